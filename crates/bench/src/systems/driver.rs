//! A [`Driver`] wired over a cell's tables, and how it runs a transfer: attempts retried on
//! conflict with a jittered backoff, each attempt by its system's path, its end read off the
//! transaction record.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use rand::Rng;
use serde_json::Value;
use twopc_core::coordinator::{CommitMode, Coordinator, CoordinatorConfig};
use twopc_core::direct::DirectTransport;
use twopc_core::participant::Participant;
use twopc_core::ports::SystemClock;
use twopc_core::record::{TxRecord, Vote, VoteReason};
use twopc_core::request::Limits;
use twopc_core::status::TxStatus;
use twopc_dynamo::{DynamoItems, DynamoNative, DynamoTxLog};

use super::serial::Serial;
use super::{Answer, Done, Driver, Outcome, Reason, System, Votes, Wiring, services};
use crate::config::BenchConfig;
use crate::counter::RequestCounter;
use crate::tables::Tables;
use crate::timing::{HopTransport, StepTimes, TimedLog, TimedTransport};
use crate::workload::Transfer;

impl Driver {
    /// Wires `system` over `tables`; `counter` is the one `client` reports to.
    pub fn new(
        system: System,
        (client, counter): (Client, RequestCounter),
        tables: Tables,
        config: &BenchConfig,
        (times, wiring): (StepTimes, Wiring),
    ) -> Driver {
        let (timeout_ms, max_attempts) = (config.timeout_ms, config.max_attempts);
        let log = DynamoTxLog::new(client.clone(), &tables.tx);
        let participant = Participant::new(
            DynamoItems::new(client.clone()),
            log.clone(),
            SystemClock,
            config.participant(),
        );
        let config = CoordinatorConfig {
            id: "twopc-bench".into(),
            services: services(&tables)
                .into_iter()
                .map(|(name, mut s)| {
                    s.hot = wiring.hot;
                    (name, s)
                })
                .collect(),
            limits: Limits::default(),
            mode: match system {
                System::Staged | System::StagedApplied => CommitMode::Staged,
                System::Auto => CommitMode::Auto,
                _ => CommitMode::Classic,
            },
        };
        let serial = Serial {
            log: log.clone(),
            participant: participant.clone(),
            config: config.clone(),
        };
        let transport = HopTransport::new(DirectTransport::new(participant), wiring.hop);
        let native = Arc::new(DynamoNative::new(client.clone(), log.clone()));
        let coordinator = Coordinator::new(
            TimedLog::new(log, times.clone()),
            TimedTransport::new(transport, times).with_holds(wiring.holds),
            SystemClock,
            config,
        )
        .with_native(native);
        Driver {
            system,
            client,
            tables,
            coordinator,
            serial,
            counter,
            timeout_ms,
            max_attempts: max_attempts.max(1),
        }
    }

    /// The system.
    pub fn system(&self) -> System {
        self.system
    }

    /// The transaction log (for the audit of unfinished records).
    pub fn log(&self) -> &DynamoTxLog {
        &self.serial.log
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
            let answer = Answer::new(&self.counter);
            let (outcome, v) = self.attempt(t, body.as_ref(), &answer).await;
            votes.add(v);
            if let Some(r) = outcome.reason() {
                aborted[r.index()] += 1;
            }
            if outcome != Outcome::Conflict || attempts >= self.max_attempts {
                let (answered, rounds) = answer.get();
                return Done {
                    outcome,
                    attempts,
                    aborted,
                    votes,
                    answered,
                    rounds_to_answer: rounds.saturating_sub(rounds_at_start),
                };
            }
            // Jittered exponential backoff: 0..2^attempts ms.
            let ms = rand::rng().random_range(0..=1u64 << attempts);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }

    /// One attempt. Whoever gives the client its answer marks `answer` (every system today
    /// when its call returns: answered once applied).
    async fn attempt(
        &self,
        t: &Transfer,
        body: Option<&Value>,
        answer: &Answer,
    ) -> (Outcome, Votes) {
        let record = match (self.system, body) {
            (System::Coordinator, Some(body)) => match self.coordinator.submit(body, None).await {
                Ok(answered) => match answered.finish {
                    Some(finish) => self.coordinator.finish(finish).await.map_err(|e| chain(&e)),
                    None => Ok(answered.answer.record),
                },
                Err(e) => Err(chain(&e)),
            },
            (System::Serial, Some(body)) => self.serial.run(body).await.map_err(|e| chain(&e)),
            // The answer when the client would get it; the transfer ends once it is applied
            // (in Lambda the extension finishes it before the environment takes the next
            // request).
            (System::Staged | System::StagedApplied | System::Auto, Some(body)) => {
                match self.coordinator.submit(body, None).await {
                    Ok(staged) => {
                        if self.system != System::StagedApplied {
                            answer.mark();
                        }
                        match staged.finish {
                            Some(finish) => {
                                self.coordinator.finish(finish).await.map_err(|e| chain(&e))
                            }
                            None => Ok(staged.answer.record),
                        }
                    }
                    Err(e) => Err(chain(&e)),
                }
            }
            (System::Native, _) => {
                let outcome = self.native(t).await;
                answer.mark();
                return (outcome, Votes::default());
            }
            (System::Unit, _) => {
                let outcome = self.unit(t).await;
                answer.mark();
                return (outcome, Votes::default());
            }
            (_, None) => Err("no request body".into()),
        };
        answer.mark();
        match record {
            Ok(record) => (classify(&record), Votes::of(&record)),
            Err(e) => (Outcome::Failed(e), Votes::default()),
        }
    }
}

/// Reads a transfer's end off its record.
fn classify(record: &TxRecord) -> Outcome {
    match record.status {
        TxStatus::Committed => Outcome::Committed,
        TxStatus::Aborted => {
            let mut reasons = record.votes.iter().filter_map(|v| match v {
                Vote::No { reason, .. } => Some(*reason),
                Vote::Yes { .. } => None,
            });
            if reasons.clone().any(|r| r == VoteReason::Conflict) {
                Outcome::Conflict
            } else {
                Outcome::Refused(reasons.next().map_or("none", |r| r.code()).to_owned())
            }
        }
        other => Outcome::Unfinished(format!("transaction {} left {other}", record.tx_id)),
    }
}

/// An error and its sources, on one line.
fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
