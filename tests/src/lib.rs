//! Test harness: a fresh set of tables per test on the DynamoDB engine that `make test` started
//! (`TWOPC_DYNAMODB_ENDPOINT`: DynamoDB Local, then the embedded engine; [`engine`] says which),
//! the real adapters, and the coordinator over the `direct`
//! transport with a clock the test moves by hand. [`fees`] is a custom participant on the
//! participant SDK for the crash suites; [`lambda`] serves a function's binary through
//! `cargo lambda watch`, for the `lambda` transport's end-to-end tests; [`openapi`] checks
//! answers of the API against its description; [`template`] reads `template.yaml`, and
//! [`grants`] holds its grants to the AWS calls the suites recorded; [`loopback`] stands in for
//! Firehose on a loopback port.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use serde_json::{Value, json};
use twopc_core::coordinator::{CommitMode, Coordinator, CoordinatorConfig, SubmitError};
use twopc_core::direct::DirectTransport;
use twopc_core::ids::TxId;
use twopc_core::item::{ItemState, Key};
use twopc_core::message::{CompleteReply, CompleteRequest, PrepareReply, PrepareRequest};
use twopc_core::participant::{Participant, ParticipantConfig};
use twopc_core::ports::{Clock, ManualClock, ParticipantStore, SystemClock, Transport, TxLog};
use twopc_core::record::{Target, TxRecord, Vote, VoteReason};
use twopc_core::request::Limits;
use twopc_core::service::{KeySchema, ServiceConfig};
use twopc_core::sweeper::{LockTable, SweepConfig, Sweeper};
use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};
use twopc_dynamo::{DynamoItems, DynamoNative, DynamoTxLog};

pub mod crash;
pub mod fees;
pub mod grants;
pub mod lambda;
pub mod loopback;
pub mod openapi;
pub mod template;

pub use crash::CrashAt;

/// A transaction run the one way the coordinator's handler runs it, to its end:
/// [`Coordinator::submit`], then the work after the answer ([`Coordinator::finish`]) at once, a
/// test having no client to answer first. Its record as it ends.
pub trait SubmitToEnd {
    /// `submit`, then `finish`.
    fn submit_to_end<'a>(
        &'a self,
        body: &'a Value,
        idempotency_key: Option<&'a str>,
    ) -> impl Future<Output = Result<TxRecord, SubmitError>> + Send + 'a;
}

impl<L: TxLog, T: Transport, C: Clock> SubmitToEnd for Coordinator<L, T, C> {
    async fn submit_to_end(
        &self,
        body: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<TxRecord, SubmitError> {
        let answered = self.submit(body, idempotency_key).await?;
        match answered.finish {
            Some(finish) => Ok(self.finish(finish).await?),
            None => Ok(answered.answer.record),
        }
    }
}

/// The participant logic as wired in tests.
pub type TestParticipant = Participant<DynamoItems, DynamoTxLog, ManualClock>;
/// The direct transport as wired in tests.
pub type TestTransport = DirectTransport<DynamoItems, DynamoTxLog, ManualClock>;
/// The coordinator as wired in tests.
pub type TestCoordinator = Coordinator<DynamoTxLog, TestTransport, ManualClock>;

/// The endpoint of the DynamoDB engine under test.
pub fn endpoint() -> String {
    std::env::var("TWOPC_DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!(
            "TWOPC_DYNAMODB_ENDPOINT is not set: run the suites with `make test`, or under \
             `target/debug/twopc-engine -- COMMAND` (the embedded engine) or \
             `infra/dynamodb-local.sh run COMMAND` (DynamoDB Local)"
        )
    })
}

/// The variable that names the engine under test (`make test` sets it for each of its passes).
pub const ENGINE_VAR: &str = "TWOPC_TEST_ENGINE";

/// The DynamoDB engines `make test` runs the suites on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// The embedded engine (crates/engine, dynoxide): `twopc serve`'s default.
    Embedded,
    /// Amazon's DynamoDB Local: the reference.
    DynamoDbLocal,
}

impl Engine {
    /// Its name as `twopc serve --engine` and [`ENGINE_VAR`] spell it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Embedded => "embedded",
            Engine::DynamoDbLocal => "dynamodb-local",
        }
    }
}

/// The engine under test: [`ENGINE_VAR`], `embedded` (`twopc serve`'s default) when unset. It
/// serves [`endpoint`], a test that starts `twopc serve` with an engine of its own starts this
/// one, and a test that meets a difference between the engines asks it which answer to expect.
pub fn engine() -> Engine {
    match std::env::var(ENGINE_VAR).as_deref() {
        Err(_) | Ok("embedded") => Engine::Embedded,
        Ok("dynamodb-local") => Engine::DynamoDbLocal,
        Ok(other) => panic!("{ENGINE_VAR}={other}: expected embedded or dynamodb-local"),
    }
}

/// One test's world: its own tables, seeded, and the protocol wired over them.
pub struct World {
    /// Raw client (for assertions).
    pub client: Client,
    /// The clock every protocol step reads.
    pub clock: ManualClock,
    /// The prefix of this world's table names.
    pub prefix: String,
    /// Transactions table name.
    pub tx_table: String,
    /// `accounts` service table.
    pub accounts: String,
    /// `wallets` service table.
    pub wallets: String,
    /// The transaction log.
    pub log: DynamoTxLog,
    /// The participant logic (what the participant Lambda runs).
    pub participant: TestParticipant,
    /// The coordinator, direct transport.
    pub coordinator: TestCoordinator,
}

impl World {
    /// New tables with a unique prefix.
    pub async fn new() -> World {
        World::with_participant_config(ParticipantConfig::default()).await
    }

    /// New tables with a unique prefix; the participant logic tuned by `config`.
    pub async fn with_participant_config(config: ParticipantConfig) -> World {
        let client = twopc_dynamo::client(Some(&endpoint())).await;
        let prefix = format!("t{}", &TxId::random().as_str()[..8]);
        let tx_table = format!("{prefix}-transactions");
        let accounts = format!("{prefix}-accounts");
        let wallets = format!("{prefix}-wallets");
        let specs = [
            TableSpec {
                name: tx_table.clone(),
                kind: TableKind::Transactions,
            },
            TableSpec {
                name: accounts.clone(),
                kind: TableKind::Participant(KeySchema::string_hash("id")),
            },
            TableSpec {
                name: wallets.clone(),
                kind: TableKind::Participant(KeySchema::string_hash("id")),
            },
        ];
        for spec in &specs {
            ensure_table(&client, spec).await.expect("create table");
        }
        let clock = ManualClock::new(SystemClock.now_ms());
        let log = DynamoTxLog::new(client.clone(), &tx_table);
        let participant = Participant::new(
            DynamoItems::new(client.clone()),
            log.clone(),
            clock.clone(),
            config,
        );
        let services: BTreeMap<String, ServiceConfig> = [
            (
                "accounts".to_owned(),
                ServiceConfig::table(
                    Target::Direct {
                        table: accounts.clone(),
                    },
                    KeySchema::string_hash("id"),
                ),
            ),
            (
                "wallets".to_owned(),
                ServiceConfig::table(
                    Target::Direct {
                        table: wallets.clone(),
                    },
                    KeySchema::string_hash("id"),
                ),
            ),
        ]
        .into();
        let config = CoordinatorConfig {
            id: "test-coordinator".into(),
            services,
            limits: Limits::default(),
            // The classic path, whose steps most suites here drive one by one; the staged
            // suites ask for theirs (`coordinator_in`).
            mode: CommitMode::Classic,
            heat_window_ms: CoordinatorConfig::DEFAULT_HEAT_WINDOW_MS,
        };
        let coordinator = Coordinator::new(
            log.clone(),
            DirectTransport::new(participant.clone()),
            clock.clone(),
            config,
        );
        World {
            client,
            clock,
            prefix,
            tx_table,
            accounts,
            wallets,
            log,
            participant,
            coordinator,
        }
    }

    /// Another coordinator over the same tables, reaching participants through `transport`.
    pub fn coordinator_via<T: Transport>(
        &self,
        transport: T,
    ) -> Coordinator<DynamoTxLog, T, ManualClock> {
        Coordinator::new(
            self.log.clone(),
            transport,
            self.clock.clone(),
            self.coordinator.config().clone(),
        )
    }

    /// A coordinator over the direct transport that commits in `mode` (with DynamoDB's native
    /// transactions, which only [`CommitMode::Auto`] uses).
    pub fn coordinator_in(
        &self,
        mode: CommitMode,
    ) -> Coordinator<DynamoTxLog, TestTransport, ManualClock> {
        let mut config = self.coordinator.config().clone();
        config.mode = mode;
        self.coordinator_with(config)
    }

    /// A coordinator over the direct transport with `config` (and native transactions).
    pub fn coordinator_with(
        &self,
        config: CoordinatorConfig,
    ) -> Coordinator<DynamoTxLog, TestTransport, ManualClock> {
        Coordinator::new(self.log.clone(), self.direct(), self.clock.clone(), config).with_native(
            std::sync::Arc::new(DynamoNative::new(self.client.clone(), self.log.clone())),
        )
    }

    /// A direct transport over this world's tables.
    pub fn direct(&self) -> TestTransport {
        DirectTransport::new(self.participant.clone())
    }

    /// The participant tables, for the sweeper's lock scan.
    pub fn lock_tables(&self) -> Vec<LockTable> {
        [&self.accounts, &self.wallets]
            .into_iter()
            .map(|t| LockTable {
                table: t.clone(),
                key: KeySchema::string_hash("id"),
            })
            .collect()
    }

    /// A sweeper whose coordinator reaches participants through `transport`.
    pub fn sweeper_via<T: Transport>(
        &self,
        transport: T,
        config: SweepConfig,
    ) -> Sweeper<DynamoTxLog, T, ManualClock, DynamoItems> {
        Sweeper::new(
            self.coordinator_via(transport),
            self.participant.clone(),
            self.clock.clone(),
            self.lock_tables(),
            config,
        )
    }

    /// A sweeper over the direct transport with default bounds.
    pub fn sweeper(&self) -> Sweeper<DynamoTxLog, TestTransport, ManualClock, DynamoItems> {
        self.sweeper_via(self.direct(), SweepConfig::default())
    }

    /// Every item of a service's table, as the protocol sees it.
    pub async fn scan(&self, service: &str) -> Vec<ItemState> {
        self.scan_table(self.table(service))
            .await
            .iter()
            .map(|item| twopc_dynamo::items::item_state(item).expect("item"))
            .collect()
    }

    /// Every transaction record.
    pub async fn records(&self) -> Vec<twopc_core::record::TxRecord> {
        self.scan_table(&self.tx_table)
            .await
            .iter()
            .map(|item| twopc_dynamo::txlog::record_from_item(item).expect("record"))
            .collect()
    }

    /// Runs `transfer(from, to, amount)` through the coordinator; its record.
    pub async fn transfer(
        &self,
        from: &str,
        to: &str,
        amount: i64,
    ) -> twopc_core::record::TxRecord {
        self.coordinator
            .submit_to_end(&transfer(from, to, amount), None)
            .await
            .expect("submit")
    }

    /// Every item of a table, raw (strongly consistent).
    async fn scan_table(&self, table: &str) -> Vec<twopc_dynamo::codec::Item> {
        self.client
            .scan()
            .table_name(table)
            .consistent_read(true)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .expect("scan")
    }

    /// The table of a service name.
    pub fn table(&self, service: &str) -> &str {
        match service {
            "accounts" => &self.accounts,
            "wallets" => &self.wallets,
            other => panic!("no service {other}"),
        }
    }

    /// Writes a plain item (as a service would before any transaction).
    pub async fn seed(&self, service: &str, id: &str, attrs: Value) {
        let mut item = attrs.as_object().cloned().unwrap_or_default();
        item.insert("id".into(), json!(id));
        self.client
            .put_item()
            .table_name(self.table(service))
            .set_item(Some(twopc_dynamo::codec::to_item(&item)))
            .send()
            .await
            .expect("seed");
    }

    /// The participant's prepare on `service`'s table.
    pub async fn prepare(&self, service: &str, req: &PrepareRequest) -> PrepareReply {
        self.participant
            .prepare(self.table(service), req)
            .await
            .expect("prepare")
    }

    /// The participant's commit on `service`'s table.
    pub async fn commit(&self, service: &str, req: &CompleteRequest) -> CompleteReply {
        self.participant
            .commit(self.table(service), req)
            .await
            .expect("commit")
    }

    /// The participant's abort on `service`'s table.
    pub async fn abort(&self, service: &str, req: &CompleteRequest) -> CompleteReply {
        self.participant
            .abort(self.table(service), req)
            .await
            .expect("abort")
    }

    /// The protocol's view of an item.
    pub async fn item(&self, service: &str, id: &str) -> Option<ItemState> {
        self.participant
            .store()
            .read(self.table(service), &key(id))
            .await
            .expect("read")
    }

    /// An attribute of an item, as stored (numbers as their exact text).
    pub async fn attr(&self, service: &str, id: &str, name: &str) -> Option<String> {
        self.item(service, id).await.and_then(|i| {
            i.attributes.get(name).map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        })
    }

    /// Number of records in the transactions table.
    pub async fn tx_count(&self) -> i32 {
        self.client
            .scan()
            .table_name(&self.tx_table)
            .select(aws_sdk_dynamodb::types::Select::Count)
            .send()
            .await
            .expect("scan")
            .count()
    }
}

/// One actor's clock in a test of skew: `ahead_ms` ahead of the world's clock (behind when
/// negative), moving with it.
#[derive(Clone, Debug)]
pub struct SkewedClock {
    base: ManualClock,
    ahead_ms: i64,
}

impl SkewedClock {
    /// `ahead_ms` ahead of `base` (behind when negative).
    pub fn new(base: ManualClock, ahead_ms: i64) -> Self {
        SkewedClock { base, ahead_ms }
    }
}

impl Clock for SkewedClock {
    fn now_ms(&self) -> u64 {
        self.base.now_ms().saturating_add_signed(self.ahead_ms)
    }
}

/// `{"id": id}`.
pub fn key(id: &str) -> Key {
    [("id".to_owned(), json!(id))].into()
}

/// A transfer of `amount` from accounts/`from` to wallets/`to`, refusing to overdraw.
pub fn transfer(from: &str, to: &str, amount: i64) -> Value {
    json!({"participants": [
        {"participant": "accounts", "key": {"id": from}, "op": {"add": {"balance": -amount}, "require": {"balance": {"gte": amount}}}},
        {"participant": "wallets", "key": {"id": to}, "op": {"add": {"balance": amount}}}
    ]})
}

/// The same request made exclusive: each operation also sets `memo`, so its participants lock
/// their items instead of reserving (for the suites about locks).
pub fn exclusive(mut body: Value) -> Value {
    if let Some(ps) = body["participants"].as_array_mut() {
        for p in ps {
            p["op"]["set"] = json!({"memo": "exclusive"});
        }
    }
    body
}

/// An operation from its JSON.
pub fn op(v: Value) -> twopc_core::op::Operation {
    twopc_core::op::Operation::from_json("op", &v).expect("valid op")
}

/// A prepare of `o` on `accounts`-style item `id` by `tx`, which began 5 s before `deadline`
/// (a deadline more than 15 s ahead of the participant's clock is a `began` past its margin:
/// refused `clockSkew`).
pub fn prepare_req(tx: &TxId, deadline: u64, id: &str, o: Value) -> PrepareRequest {
    PrepareRequest {
        tx_id: tx.clone(),
        deadline,
        began: began(deadline),
        key: key(id),
        op: op(o),
        coordinator: "test".into(),
        payload: None,
        hot_until: None,
    }
}

/// The commit or abort of the same.
pub fn complete_req(tx: &TxId, deadline: u64, id: &str, o: Value) -> CompleteRequest {
    CompleteRequest {
        tx_id: tx.clone(),
        deadline,
        began: began(deadline),
        key: key(id),
        op: op(o),
        prune: None,
        refused: false,
    }
}

/// The begin time the request helpers give a transaction with this deadline.
pub fn began(deadline: u64) -> u64 {
    deadline.saturating_sub(5_000)
}

/// A no vote's reason (`None`: yes).
pub fn reason(reply: &PrepareReply) -> Option<VoteReason> {
    vote_reason(&reply.vote)
}

/// The reason of a record's first vote, if it is a no (`None`: yes, or no vote yet).
pub fn first_no(rec: &twopc_core::record::TxRecord) -> Option<VoteReason> {
    rec.votes.first().and_then(vote_reason)
}

fn vote_reason(vote: &Vote) -> Option<VoteReason> {
    match vote {
        Vote::Yes { .. } => None,
        Vote::No { reason, .. } => Some(*reason),
    }
}
