//! The seed's serial driver: the coordinator's records, participant logic and conditional
//! writes, one participant after another.

use serde_json::Value;
use twopc_core::coordinator::CoordinatorConfig;
use twopc_core::ids::TxId;
use twopc_core::message::{CompleteRequest, PrepareReply, PrepareRequest, Prune};
use twopc_core::ports::{Clock, Created, Swapped, SystemClock, TxLog};
use twopc_core::record::{Target, TxRecord, Vote, VoteReason};
use twopc_core::request::TxRequest;
use twopc_core::status::{Decision, TxStatus};
use twopc_dynamo::DynamoTxLog;

use super::BenchParticipant;
use crate::BenchError;
use crate::capacity::in_step;

/// The seed's driver: the same records, participant logic and conditional writes as the
/// coordinator, one request at a time (each charged to its step's capacity units, as the
/// coordinator's timed ports are). A `no` vote stops the prepares; the participants asked so
/// far are then aborted, one after another.
pub(super) struct Serial {
    pub(super) log: DynamoTxLog,
    pub(super) participant: BenchParticipant,
    pub(super) config: CoordinatorConfig,
}

impl Serial {
    /// Runs one transaction of `body` to its end, one request at a time.
    pub(super) async fn run(&self, body: &Value) -> Result<TxRecord, BenchError> {
        let request = TxRequest::parse(body, &self.config.services, &self.config.limits)
            .map_err(|e| BenchError::Check(format!("serial driver: {e}")))?;
        let now = SystemClock.now_ms();
        let tx_id = TxId::random();
        let record = request.begin(
            tx_id.clone(),
            None,
            format!("{}/{}", self.config.id, TxId::random()),
            now,
        );
        if let Created::Exists(_) = in_step(0, self.log.create(&record)).await? {
            return Err(BenchError::Check(format!("transaction id {tx_id} taken")));
        }
        let (votes, prunes): (Vec<Vote>, Vec<_>) = self
            .prepare_all(&record, &tx_id)
            .await?
            .into_iter()
            .map(|reply| (reply.vote, reply.prune))
            .unzip();
        let ours = if votes.len() == record.participants.len() && votes.iter().all(Vote::is_yes) {
            Decision::Commit
        } else {
            Decision::Abort
        };
        let deciding = self.log.transition(
            &record,
            TxStatus::deciding(ours),
            Some(&votes),
            SystemClock.now_ms(),
        );
        let decided = match in_step(2, deciding).await? {
            Swapped::Done(r) | Swapped::Lost(Some(r)) => *r,
            Swapped::Lost(None) => {
                return Err(BenchError::Check(format!("record {tx_id} vanished")));
            }
        };
        let Some(decision) = decided.status.decision() else {
            return Err(BenchError::Check(format!("record {tx_id} still undecided")));
        };
        if decided.status.is_terminal() {
            return Ok(decided);
        }
        // Someone else's decision (a resolver's abort) reaches every participant. Each
        // completion carries the prune its prepare's reply planned, as the coordinator's do.
        let (asked, prunes) = if decision == ours {
            (votes.len(), prunes)
        } else {
            (record.participants.len(), vec![])
        };
        // Each asked participant's prune, and whether its `yes` was a refusal to change.
        let plan: Vec<_> = (0..asked)
            .map(|i| {
                (
                    prunes.get(i).cloned().flatten(),
                    decision == ours && votes.get(i).is_some_and(Vote::refused),
                )
            })
            .collect();
        if !self.complete_all(&record, &tx_id, decision, plan).await? {
            return Ok(decided); // left for the sweeper, as the coordinator does
        }
        let finishing = self.log.transition(
            &decided,
            TxStatus::finishing(decision),
            None,
            SystemClock.now_ms(),
        );
        match in_step(5, finishing).await? {
            Swapped::Done(r) | Swapped::Lost(Some(r)) => Ok(*r),
            Swapped::Lost(None) => Err(BenchError::Check(format!("record {tx_id} vanished"))),
        }
    }
    /// Asks the participants to prepare, one after another, until one votes `no`: the replies
    /// of those asked.
    async fn prepare_all(
        &self,
        record: &TxRecord,
        tx_id: &TxId,
    ) -> Result<Vec<PrepareReply>, BenchError> {
        let mut replies = vec![];
        for p in &record.participants {
            let req = PrepareRequest {
                tx_id: tx_id.clone(),
                deadline: record.deadline,
                began: record.created_at,
                key: p.key.clone(),
                op: p.op.clone(),
                coordinator: self.config.id.clone(),
                payload: None,
            };
            let reply = match in_step(1, self.participant.prepare(table(&p.target)?, &req)).await {
                Ok(reply) => reply,
                Err(e) => PrepareReply::no(VoteReason::Unreachable, e.to_string()),
            };
            let yes = reply.vote.is_yes();
            replies.push(reply);
            if !yes {
                break;
            }
        }
        Ok(replies)
    }

    /// Sends `decision` to the first participants, one after another, each with its planned
    /// prune and refusal; `false` as soon as one does not acknowledge.
    async fn complete_all(
        &self,
        record: &TxRecord,
        tx_id: &TxId,
        decision: Decision,
        plan: Vec<(Option<Prune>, bool)>,
    ) -> Result<bool, BenchError> {
        for (p, (prune, refused)) in record.participants.iter().zip(plan) {
            let req = CompleteRequest {
                tx_id: tx_id.clone(),
                deadline: record.deadline,
                began: record.created_at,
                key: p.key.clone(),
                op: p.op.clone(),
                prune,
                refused,
            };
            let t = table(&p.target)?;
            let reply = match decision {
                Decision::Commit => in_step(3, self.participant.commit(t, &req)).await,
                Decision::Abort => in_step(4, self.participant.abort(t, &req)).await,
            };
            if !reply.is_ok_and(|r| r.acknowledged()) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The table a `direct` target names.
fn table(target: &Target) -> Result<&str, BenchError> {
    match target {
        Target::Direct { table } => Ok(table),
        other => Err(BenchError::Check(format!("not a direct target: {other:?}"))),
    }
}
