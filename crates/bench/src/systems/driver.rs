//! A [`Driver`] wired over a cell's tables, and how it runs a transfer: attempts retried on
//! conflict with a jittered backoff, each attempt by its system's path, its end read off the
//! transaction record.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use serde_json::Value;
use twopc_core::coordinator::{CommitMode, Coordinator, CoordinatorConfig};
use twopc_core::direct::DirectTransport;
use twopc_core::participant::Participant;
use twopc_core::ports::{Clock, SystemClock, TxLog};
use twopc_core::record::{TxRecord, Vote, VoteReason};
use twopc_core::request::Limits;
use twopc_core::status::TxStatus;
use twopc_dynamo::{DynamoItems, DynamoNative, DynamoTxLog};

use super::{AnswerMark, Done, Driver, Reason, System, TransferEnd, Votes, services};
use crate::config::BenchConfig;
use crate::counter::RequestCounter;
use crate::tables::Tables;
use crate::workload::Transfer;
use crate::{BenchError, chain};

impl Driver {
    /// Wires `system` over `tables`; `counter` is the one `client` reports to. `hot`: the
    /// services are marked hot (`ServiceConfig::hot`), as an operator marks hot items.
    pub fn new(
        system: System,
        (client, counter): (Client, RequestCounter),
        tables: Tables,
        config: &BenchConfig,
    ) -> Driver {
        let log = DynamoTxLog::new(client.clone(), &tables.tx);
        let participant = Participant::new(
            DynamoItems::new(client.clone()),
            log.clone(),
            SystemClock,
            config.participant(),
        );
        let coordinator_config = CoordinatorConfig {
            id: "twopc-bench".into(),
            services: services(&tables),
            limits: Limits::default(),
            mode: match system {
                System::Staged => CommitMode::Staged,
                System::Auto | System::Native => CommitMode::Auto,
                System::Classic => CommitMode::Classic,
            },
            heat_window_ms: CoordinatorConfig::DEFAULT_HEAT_WINDOW_MS,
        };
        let native = Arc::new(DynamoNative::new(client.clone(), log.clone()));
        let coordinator = Coordinator::new(
            log.clone(),
            DirectTransport::new(participant),
            SystemClock,
            coordinator_config,
        )
        .with_native(native);
        Driver {
            system,
            client,
            tables,
            coordinator,
            log,
            counter,
            timeout_ms: config.timeout_ms,
            retry: config.retry,
        }
    }

    /// The system.
    pub fn system(&self) -> System {
        self.system
    }

    /// The transaction log (for the audit of unfinished records).
    pub fn log(&self) -> &DynamoTxLog {
        &self.log
    }

    /// Runs one transfer to its end, retrying conflicts.
    pub async fn transfer(&self, t: &Transfer) -> Done {
        let body = self
            .system
            .keeps_records()
            .then(|| t.request(self.timeout_ms));
        let rounds_at_start = self.counter.snapshot().rounds;
        let mut attempts = 0;
        let mut aborted = [0; Reason::ALL.len()];
        let mut votes = Votes::default();
        loop {
            attempts += 1;
            let answer = AnswerMark::new(&self.counter);
            let (end, v) = self.attempt(t, body.as_ref(), &answer).await;
            votes.add(v);
            if let Some(r) = end.reason() {
                aborted[r.index()] += 1;
            }
            if end != TransferEnd::Conflict || attempts >= self.retry.attempts {
                let (answered, rounds) = answer.get();
                return Done {
                    end,
                    attempts,
                    aborted,
                    votes,
                    answered,
                    rounds: rounds.saturating_sub(rounds_at_start),
                };
            }
            let wait = self.retry.backoff(attempts, &mut rand::rng());
            tokio::time::sleep(wait).await;
        }
    }

    /// One attempt. Whoever gives the client its answer marks `answer`: native when its call
    /// returns; the protocol after `stage` (staged: before the finish; classic: after it).
    async fn attempt(
        &self,
        t: &Transfer,
        body: Option<&Value>,
        answer: &AnswerMark,
    ) -> (TransferEnd, Votes) {
        let Some(body) = body else {
            let end = self.native(t).await;
            answer.mark();
            return (end, Votes::default());
        };
        let record = match self.coordinator.submit(body, None).await {
            Ok(staged) => {
                answer.mark();
                match staged.finish {
                    Some(finish) => self.coordinator.finish(finish).await.map_err(|e| chain(&e)),
                    None => Ok(staged.answer.record),
                }
            }
            Err(e) => {
                answer.mark();
                Err(chain(&e))
            }
        };
        let record = match record {
            Ok(record) => self.sweep(record).await,
            Err(e) => Err(e),
        };
        match record {
            Ok(record) => (classify(&record), Votes::of(&record)),
            Err(e) => (TransferEnd::Failed(e), Votes::default()),
        }
    }

    /// Plays the sweeper at once for a record its finish left decided but not finished (a
    /// participant's completion not acknowledged: on a hot item, refused by a native
    /// transaction's hold): drives it from the record, as the scheduled sweeper would, after a
    /// backoff, a bounded number of times. Counted ([`RequestCounter::note_swept`]).
    async fn sweep(&self, mut record: TxRecord) -> Result<TxRecord, String> {
        let mut tries = 0;
        while record.status.decision().is_some() && !record.status.is_terminal() {
            if tries == 0 {
                self.counter.note_swept();
            }
            tries += 1;
            if tries > SWEEPS {
                break;
            }
            let wait = self.retry.backoff(tries, &mut rand::rng());
            tokio::time::sleep(wait).await;
            record = self
                .coordinator
                .recover(record)
                .await
                .map_err(|e| chain(&e))?;
        }
        Ok(record)
    }
}

impl Driver {
    /// Plays the scheduled sweeper after a cell: every record left open (a transfer whose
    /// stage failed, say, as a client would see a 503) is driven from the record once past its
    /// deadline, as the sweeper drives it. Returns how many there were.
    pub async fn sweep_left(&self) -> Result<usize, BenchError> {
        if !self.system.keeps_records() {
            return Ok(0);
        }
        let open = self
            .log
            .overdue(SystemClock.now_ms() + 3_600_000, 1000)
            .await?;
        if open.is_empty() {
            return Ok(0);
        }
        tokio::time::sleep(Duration::from_millis(self.timeout_ms + 1000)).await;
        for record in &open {
            self.counter.note_swept();
            self.coordinator.recover(record.clone()).await?;
        }
        Ok(open.len())
    }
}

/// How many times the bench drives a record left unfinished before calling it a failure.
const SWEEPS: u32 = 10;

/// Reads a transfer's end off its record.
fn classify(record: &TxRecord) -> TransferEnd {
    match record.status {
        TxStatus::Committed => TransferEnd::Committed,
        TxStatus::Aborted => {
            let mut reasons = record.votes.iter().filter_map(|v| match v {
                Vote::No { reason, .. } => Some(*reason),
                Vote::Yes { .. } => None,
            });
            if reasons.clone().any(|r| r == VoteReason::Conflict) {
                TransferEnd::Conflict
            } else {
                TransferEnd::Refused(reasons.next().map_or("none", |r| r.code()).to_owned())
            }
        }
        other => TransferEnd::Unfinished(format!("transaction {} left {other}", record.tx_id)),
    }
}
