//! A [`Driver`] wired over a cell's tables on model time, how it runs a transfer (attempts
//! retried on a transient abort with a jittered backoff until the deadline, each attempt by its
//! system's path, its end as the client was answered), and the product's own sweeper after a
//! cell.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use serde_json::Value;
use twopc_core::coordinator::{CommitMode, Coordinator, CoordinatorConfig, Outcome, SubmitError};
use twopc_core::direct::DirectTransport;
use twopc_core::ids::TxId;
use twopc_core::participant::Participant;
use twopc_core::ports::{Clock, ParticipantStore, TxLog};
use twopc_core::record::{TxRecord, Vote};
use twopc_core::request::Limits;
use twopc_core::service::KeySchema;
use twopc_core::status::TxStatus;
use twopc_core::sweeper::{LockTable, SweepConfig, SweepReport, Sweeper};
use twopc_dynamo::{DynamoItems, DynamoNative, DynamoTxLog};

use super::outcome::{AttemptEnd, reason_of};
use super::{
    AnswerMark, BenchCoordinator, Done, Driver, Reason, System, TransferEnd, Votes, services,
};
use crate::clock::ModelClock;
use crate::config::BenchConfig;
use crate::counter::RequestCounter;
use crate::tables::Tables;
use crate::workload::Transfer;
use crate::{BenchError, chain};

/// What the sweeper did after a cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Records it drove to an end.
    pub records: u64,
    /// Expired locks and reservations it settled.
    pub locks: u64,
    /// Passes it took.
    pub passes: u32,
}

/// Sweeper passes after a cell before what is left is reported. One pass ends at most a page
/// of records, as one scheduled run does; a cell that stalled at 128 in flight leaves more
/// than 800, so the passes go on while each one ends something, up to this many.
const PASSES: u32 = 100;

/// The sweeper's bounds after a cell: the scheduled sweeper's.
fn sweep_config() -> SweepConfig {
    SweepConfig::default()
}

/// How far model time jumps before each pass beyond the deadline: past the sweeper's longest
/// backoff of a record it could not finish ([`SweepConfig::backoff_max_ms`]). A record whose
/// finish was refused again and again during a stalled cell waits up to that long, and a pass
/// that jumped less would find it not yet due and end nothing.
fn past_backoff() -> Duration {
    Duration::from_millis(sweep_config().backoff_max_ms)
}

impl Driver {
    /// Wires `system` over `tables` with one coordinator per worker (`workers` transfers in
    /// flight); `counter` is the one `client` reports to. No service is marked hot: what `auto`
    /// learns, it learns itself, and a coordinator's memory is its own, as a Lambda instance's
    /// is (what one learns reaches the others only through the items). The sweeper and the
    /// bench's own reads after a cell go through `admin`, straight to the engine: nothing else
    /// runs then, and the model would only make them slow.
    pub fn new(
        system: System,
        (client, admin, counter): (Client, Client, RequestCounter),
        tables: Tables,
        clock: ModelClock,
        (config, workers): (&BenchConfig, usize),
    ) -> Driver {
        let mode = match system {
            System::Staged => CommitMode::Staged,
            System::Auto | System::Native => CommitMode::Auto,
            System::Classic => CommitMode::Classic,
        };
        let wiring = Wiring {
            tables: &tables,
            clock: &clock,
            config,
            mode,
        };
        let coordinators = (0..workers.max(1))
            .map(|w| wiring.coordinator(&client, &format!("twopc-bench-{w}")))
            .collect();
        let sweeper = Sweeper::new(
            wiring.coordinator(&admin, "twopc-bench-sweeper"),
            wiring.participant(&admin),
            clock.clone(),
            [&tables.accounts, &tables.wallets]
                .map(|t| LockTable {
                    table: t.clone(),
                    key: KeySchema::string_hash("id"),
                })
                .to_vec(),
            sweep_config(),
        );
        Driver {
            system,
            log: DynamoTxLog::new(admin.clone(), &tables.tx),
            admin,
            client,
            tables,
            coordinators,
            sweeper,
            counter,
            clock,
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

    /// Runs one transfer to its end on worker `worker`'s coordinator, retrying transient aborts
    /// until its deadline.
    pub async fn transfer(&self, worker: usize, t: &Transfer) -> Done {
        let deadline = Instant::now() + self.clock.wall(self.retry.deadline);
        let rounds_at_start = self.counter.snapshot().rounds;
        let mut done = Done {
            end: TransferEnd::Busy,
            attempts: 0,
            aborted: [0; Reason::ALL.len()],
            votes: Votes::default(),
            answered: Instant::now(),
            rounds: 0,
            coordinator: Duration::ZERO,
            left_open: 0,
        };
        loop {
            done.attempts += 1;
            let answer = AnswerMark::new(&self.counter);
            let remaining = self
                .clock
                .model(deadline.saturating_duration_since(Instant::now()));
            let end = self
                .attempt((worker, t), remaining, &answer, &mut done)
                .await;
            (done.answered, done.rounds) = answer.get();
            done.rounds = done.rounds.saturating_sub(rounds_at_start);
            let reason = match end {
                AttemptEnd::Committed => {
                    return Done {
                        end: TransferEnd::Committed,
                        ..done
                    };
                }
                AttemptEnd::Failed(why, tx) => {
                    return Done {
                        end: TransferEnd::Failed { why, tx },
                        ..done
                    };
                }
                AttemptEnd::Aborted(reason, codes) if !reason.transient() => {
                    done.aborted[reason.index()] += 1;
                    return Done {
                        end: TransferEnd::Refused(codes),
                        ..done
                    };
                }
                AttemptEnd::Aborted(reason, _) => reason,
            };
            done.aborted[reason.index()] += 1;
            let wait = self
                .clock
                .wall(self.retry.backoff(done.attempts, &mut rand::rng()));
            if Instant::now() + wait >= deadline {
                return done;
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// One attempt with `remaining` (model time) to the deadline. Whoever gives the client its
    /// answer marks `answer`: native when its call returns; the protocol when `submit` does
    /// (its finish, after the answer, runs here too).
    async fn attempt(
        &self,
        (worker, t): (usize, &Transfer),
        remaining: Duration,
        answer: &AnswerMark,
        done: &mut Done,
    ) -> AttemptEnd {
        if !self.system.keeps_records() {
            let end = self.native(t).await;
            answer.mark();
            return end;
        }
        let started = Instant::now();
        let body = t.request(remaining.as_millis().max(100) as u64);
        let coordinator = &self.coordinators[worker % self.coordinators.len()];
        let (end, votes, open) = protocol(coordinator, &body, answer).await;
        done.coordinator += started.elapsed();
        done.votes.add(votes);
        done.left_open += u32::from(open);
        end
    }
}

/// The protocol's attempt on `coordinator`: its answer, and whether its finish left the record
/// open.
async fn protocol(
    coordinator: &BenchCoordinator,
    body: &Value,
    answer: &AnswerMark,
) -> (AttemptEnd, Votes, bool) {
    let answered = match coordinator.submit(body, None).await {
        Ok(a) => a,
        Err(e) => {
            answer.mark();
            let tx = match &e {
                SubmitError::Unavailable { tx_id, .. } => tx_id.clone(),
                SubmitError::Request(_) => None,
            };
            return (AttemptEnd::Failed(chain(&e), tx), Votes::default(), false);
        }
    };
    answer.mark();
    let record = &answered.answer.record;
    let end = match answered.answer.outcome {
        Outcome::Committed => AttemptEnd::Committed,
        Outcome::Aborted => aborted(record),
        Outcome::Pending => AttemptEnd::Failed(
            format!("transaction {} answered pending", record.tx_id),
            Some(record.tx_id.clone()),
        ),
    };
    let votes = Votes::of(record);
    let open = match answered.finish {
        Some(finish) => !coordinator
            .finish(finish)
            .await
            .is_ok_and(|r| r.status.is_terminal()),
        None => !record.status.is_terminal(),
    };
    (end, votes, open)
}

impl Driver {
    /// After a cell, the product's own recovery: while any record is unfinished or any lock or
    /// reservation stands, model time jumps past every deadline (nothing runs between cells)
    /// and the sweeper makes one pass over the pending records and the expired-lock indexes,
    /// as the scheduled one does in production.
    pub async fn sweep(&self) -> Result<Swept, BenchError> {
        let mut swept = Swept::default();
        if !self.system.keeps_records() {
            return Ok(swept);
        }
        while swept.passes < PASSES && self.anything_open().await? {
            self.clock.advance(self.retry.deadline + past_backoff());
            let report: SweepReport = self.sweeper.run().await?;
            let ended = (report.aborted + report.rolled_forward) as u64;
            swept.records += ended;
            swept.locks += report.locks_resolved as u64;
            swept.passes += 1;
            // The first passes may only wait out a backoff; after those, a pass that ends
            // nothing will not be followed by one that does.
            if swept.passes >= 4 && ended == 0 && report.locks_resolved == 0 {
                break;
            }
        }
        Ok(swept)
    }

    /// Whether a record is unfinished or an item holds a lock or a reservation (the product's
    /// own reads: the pending index and the lock indexes, at a time past every deadline).
    async fn anything_open(&self) -> Result<bool, BenchError> {
        let later = self.clock.now_ms() + 3_600_000;
        if !self.log.overdue(later, 1).await?.is_empty() {
            return Ok(true);
        }
        let items = DynamoItems::new(self.admin.clone());
        for table in [&self.tables.accounts, &self.tables.wallets] {
            let key = KeySchema::string_hash("id");
            if !items.expired_locks(table, &key, later, 1).await?.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether transaction `tx` ended committed (read back after the sweeper).
    pub async fn committed(&self, tx: &TxId) -> Result<bool, BenchError> {
        let record = self.log.get(tx).await?;
        Ok(record.is_some_and(|r| r.status == TxStatus::Committed))
    }
}

/// What every coordinator of a driver shares: its tables, clock and settings (no memory).
struct Wiring<'a> {
    tables: &'a Tables,
    clock: &'a ModelClock,
    config: &'a BenchConfig,
    mode: CommitMode,
}

impl Wiring<'_> {
    fn participant(&self, client: &Client) -> Participant<DynamoItems, DynamoTxLog, ModelClock> {
        Participant::new(
            DynamoItems::new(client.clone()),
            DynamoTxLog::new(client.clone(), &self.tables.tx),
            self.clock.clone(),
            self.config.participant(),
        )
    }

    /// A coordinator named `id` over `client`, with a memory of its own.
    fn coordinator(&self, client: &Client, id: &str) -> BenchCoordinator {
        let log = DynamoTxLog::new(client.clone(), &self.tables.tx);
        let limits = Limits {
            max_timeout_ms: Limits::default()
                .max_timeout_ms
                .max(deadline_ms(self.config)),
            ..Limits::default()
        };
        let settings = CoordinatorConfig {
            id: id.into(),
            services: services(self.tables),
            limits,
            mode: self.mode,
            heat_window_ms: CoordinatorConfig::DEFAULT_HEAT_WINDOW_MS,
        };
        Coordinator::new(
            log.clone(),
            DirectTransport::new(self.participant(client)),
            self.clock.clone(),
            settings,
        )
        .with_native(Arc::new(DynamoNative::new(client.clone(), log)))
    }
}

/// The longest timeout a transfer's request may carry (model ms).
fn deadline_ms(config: &BenchConfig) -> u64 {
    config.retry.deadline.as_millis() as u64
}

/// An aborted record's end: the first transient reason among its no votes, else its first.
fn aborted(record: &TxRecord) -> AttemptEnd {
    let reasons: Vec<Reason> = record
        .votes
        .iter()
        .filter_map(|v| match v {
            Vote::No { reason, .. } => Some(reason_of(*reason)),
            Vote::Yes { .. } => None,
        })
        .collect();
    let reason = reasons
        .iter()
        .copied()
        .find(|r| r.transient())
        .or(reasons.first().copied())
        .unwrap_or(Reason::Other);
    let codes: Vec<&str> = record
        .votes
        .iter()
        .filter_map(|v| match v {
            Vote::No { reason, .. } => Some(reason.code()),
            Vote::Yes { .. } => None,
        })
        .collect();
    AttemptEnd::Aborted(reason, codes.join(","))
}
