//! A custom participant for the crash suites: `fees`, a service on `twopc-participant-sdk` that
//! holds a transfer's fee in `reserve`, charges it in `confirm` and releases it in `cancel`,
//! idempotent per transaction as a real service is, and counting per transaction every hook
//! call and every effect it applied ([`Fees`]). [`Dying`] makes its hooks die where a plan says
//! (before acting, or after acting and before the SDK records it), and [`Route`] reaches it
//! in-process, where a dying hook cuts the call off as a killed process would ([`serve`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::Notify;
use twopc_core::coordinator::Coordinator;
use twopc_core::ids::TxId;
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use twopc_core::ports::{ManualClock, PortError, Transport, TransportError};
use twopc_core::record::Target;
use twopc_core::service::ServiceConfig;
use twopc_dynamo::DynamoTxLog;
use twopc_dynamo::tables::{TableKind, TableSpec, ensure_table};
use twopc_participant_sdk::state::TxState;
use twopc_participant_sdk::{
    Call, DynamoStates, Error, HookError, Hooks, Reservation, SdkParticipant,
};

use crate::{TestTransport, World};

/// The service's name in requests.
pub const FEES: &str = "fees";
/// Where the coordinator's configuration says it is (reached in-process by [`Route`]).
pub const FEES_URL: &str = "in-process://fees";
/// The largest fee the service holds: a larger one is declined (a business rule's `no`).
pub const MAX_FEE: i64 = 50;

/// Where the service stands with one transaction's fee (its own record, as a gateway keeps an
/// authorisation's status).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hold {
    /// Nothing held: never reserved, declined, or cancelled before any reserve.
    #[default]
    None,
    /// Held, awaiting confirm or cancel.
    Held,
    /// Charged (confirmed).
    Charged,
    /// Released (cancelled after it was held).
    Released,
}

/// Per hook, a count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// `reserve`.
    pub reserve: u32,
    /// `confirm`.
    pub confirm: u32,
    /// `cancel`.
    pub cancel: u32,
}

/// What the service did for one transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeeEntry {
    /// The fee, once a reserve read it.
    pub fee: i64,
    /// Where it stands.
    pub hold: Hold,
    /// Hook calls, including ones that died or found nothing to do.
    pub calls: Tally,
    /// Effects applied: a hold placed, a held fee charged, a held fee released.
    pub applied: Tally,
}

#[derive(Debug, Default)]
struct Ledger {
    entries: BTreeMap<TxId, FeeEntry>,
    charged: i128,
}

/// The fee service's hooks over an in-memory ledger. Clones share it.
#[derive(Clone, Debug, Default)]
pub struct Fees {
    ledger: Arc<Mutex<Ledger>>,
}

impl Fees {
    fn ledger(&self) -> Result<MutexGuard<'_, Ledger>, HookError> {
        self.ledger
            .lock()
            .map_err(|_| HookError::new("the fee ledger is poisoned"))
    }

    /// Every transaction the service heard of.
    pub fn entries(&self) -> BTreeMap<TxId, FeeEntry> {
        self.ledger().map(|l| l.entries.clone()).unwrap_or_default()
    }

    /// The sum of the fees charged.
    pub fn charged(&self) -> i128 {
        self.ledger().map(|l| l.charged).unwrap_or_default()
    }
}

impl Hooks for Fees {
    type Payload = Value;

    async fn reserve(&self, call: Call<'_, Value>) -> Result<Reservation, HookError> {
        let mut l = self.ledger()?;
        let entry = l.entries.entry(call.tx_id.clone()).or_default();
        entry.calls.reserve += 1;
        let Some(fee) = call.payload.get("fee").and_then(Value::as_i64) else {
            return Ok(Reservation::invalid("a fee needs an integral \"fee\""));
        };
        if fee > MAX_FEE {
            return Ok(Reservation::condition(format!(
                "a fee of {fee} is above the limit of {MAX_FEE}"
            )));
        }
        // Idempotent per transaction: a hold placed once is not placed again.
        if entry.hold == Hold::None {
            entry.fee = fee;
            entry.hold = Hold::Held;
            entry.applied.reserve += 1;
        }
        Ok(Reservation::Held)
    }

    async fn confirm(&self, call: Call<'_, Value>) -> Result<(), HookError> {
        let mut l = self.ledger()?;
        let entry = l.entries.entry(call.tx_id.clone()).or_default();
        entry.calls.confirm += 1;
        // Idempotent: only a held fee is charged (a repeated call finds it charged).
        if entry.hold == Hold::Held {
            entry.hold = Hold::Charged;
            entry.applied.confirm += 1;
            let fee = entry.fee;
            l.charged += i128::from(fee);
        }
        Ok(())
    }

    async fn cancel(&self, call: Call<'_, Value>) -> Result<(), HookError> {
        let mut l = self.ledger()?;
        let entry = l.entries.entry(call.tx_id.clone()).or_default();
        entry.calls.cancel += 1;
        // Idempotent, and also called for a reserve that never held (it was interrupted).
        if entry.hold == Hold::Held {
            entry.hold = Hold::Released;
            entry.applied.cancel += 1;
        }
        Ok(())
    }
}

/// Where a planned hook death strikes: in `reserve`, or in the first of `confirm` and `cancel`
/// to be called; before the hook acts, or after it acted and before the SDK records its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookDeath {
    /// Before `reserve` acts.
    BeforeReserve,
    /// After `reserve` held the fee.
    AfterReserve,
    /// Before `confirm` or `cancel` acts.
    BeforeComplete,
    /// After `confirm` or `cancel` acted.
    AfterComplete,
}

impl HookDeath {
    fn strikes(self, hook: &str, after: bool) -> bool {
        let reserve = hook == "reserve";
        match self {
            HookDeath::BeforeReserve => reserve && !after,
            HookDeath::AfterReserve => reserve && after,
            HookDeath::BeforeComplete => !reserve && !after,
            HookDeath::AfterComplete => !reserve && after,
        }
    }
}

/// Hooks that die as planned, once per transaction: the call never returns (see [`serve`]).
#[derive(Clone, Debug, Default)]
pub struct Dying<H> {
    inner: H,
    plan: Arc<Mutex<BTreeMap<TxId, HookDeath>>>,
    fired: Arc<Mutex<Vec<(TxId, HookDeath)>>>,
}

tokio::task_local! {
    /// The call being served: a dying hook notifies it, and [`serve`] drops the call.
    static CUT: Arc<Notify>;
}

/// A call that was cut off because a hook died inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Died;

/// Runs `call` (an SDK participant's prepare, commit, abort or sweep) as one process serving
/// it: if a [`Dying`] hook dies inside, the call is dropped where it stands, as a killed process
/// leaves it (its claim written, its result not).
pub async fn serve<T>(call: impl Future<Output = T>) -> Result<T, Died> {
    let cut = Arc::new(Notify::new());
    let died = cut.clone();
    CUT.scope(cut, async move {
        tokio::select! {
            biased;
            () = died.notified() => Err(Died),
            out = call => Ok(out),
        }
    })
    .await
}

impl<H: Hooks> Dying<H> {
    /// Wraps `inner`.
    pub fn new(inner: H) -> Self {
        Dying {
            inner,
            plan: Arc::default(),
            fired: Arc::default(),
        }
    }

    /// The hooks inside.
    pub fn inner(&self) -> &H {
        &self.inner
    }

    /// Plans `death` for the transaction's hooks (it strikes at most once).
    pub fn arm(&self, tx: &TxId, death: HookDeath) {
        self.plan.lock().expect("plan").insert(tx.clone(), death);
    }

    /// The deaths that struck.
    pub fn fired(&self) -> Vec<(TxId, HookDeath)> {
        self.fired.lock().expect("fired").clone()
    }

    async fn maybe_die(&self, tx: &TxId, hook: &str, after: bool) {
        let struck = {
            let mut plan = self.plan.lock().expect("plan");
            match plan.get(tx) {
                Some(death) if death.strikes(hook, after) => plan.remove(tx),
                _ => None,
            }
        };
        let Some(death) = struck else {
            return;
        };
        self.fired.lock().expect("fired").push((tx.clone(), death));
        CUT.try_with(|cut| cut.notify_one())
            .expect("a hook died outside `serve`: nothing would cut the call off");
        std::future::pending::<()>().await;
    }

    async fn around<T>(
        &self,
        hook: &str,
        call: Call<'_, H::Payload>,
        inner: impl Future<Output = Result<T, HookError>>,
    ) -> Result<T, HookError> {
        self.maybe_die(call.tx_id, hook, false).await;
        let out = inner.await?;
        self.maybe_die(call.tx_id, hook, true).await;
        Ok(out)
    }
}

impl<H: Hooks> Hooks for Dying<H> {
    type Payload = H::Payload;

    async fn reserve(&self, call: Call<'_, H::Payload>) -> Result<Reservation, HookError> {
        self.around("reserve", call, self.inner.reserve(call)).await
    }

    async fn confirm(&self, call: Call<'_, H::Payload>) -> Result<(), HookError> {
        self.around("confirm", call, self.inner.confirm(call)).await
    }

    async fn cancel(&self, call: Call<'_, H::Payload>) -> Result<(), HookError> {
        self.around("cancel", call, self.inner.cancel(call)).await
    }
}

/// The fee service as the suites wire it.
pub type FeesParticipant = SdkParticipant<Dying<Fees>, DynamoStates, DynamoTxLog, ManualClock>;

/// The `fees` service of a [`World`]: its hooks, its state table in DynamoDB Local, and the
/// SDK participant over them, reading the world's transaction records with the world's clock.
#[derive(Clone)]
pub struct FeesService {
    /// The participant.
    pub sdk: FeesParticipant,
    /// Its state table.
    pub table: String,
    busy: Arc<AtomicUsize>,
}

impl FeesService {
    /// Creates the state table and wires the participant.
    pub async fn new(w: &World) -> FeesService {
        let table = format!("{}-fees", w.prefix);
        let spec = TableSpec {
            name: table.clone(),
            kind: TableKind::ParticipantState,
        };
        ensure_table(&w.client, &spec).await.expect("create table");
        let sdk = SdkParticipant::builder(Dying::new(Fees::default()))
            .states(DynamoStates::new(w.client.clone(), &table))
            .log(w.log.clone())
            .clock(w.clock.clone())
            .build();
        FeesService {
            sdk,
            table,
            busy: Arc::default(),
        }
    }

    /// The hooks.
    pub fn hooks(&self) -> &Dying<Fees> {
        self.sdk.hooks()
    }

    /// A transport reaching the world's tables through `direct` and this service in-process.
    pub fn route(&self, direct: TestTransport) -> Route {
        Route {
            direct,
            fees: self.sdk.clone(),
            busy: self.busy.clone(),
        }
    }

    /// How many commits and aborts reached it while a claim on their transaction was live (a
    /// call under way, or one that died and whose claim had not expired yet).
    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::Relaxed)
    }

    /// A coordinator over the world's tables and this service, reaching them through
    /// `transport`.
    pub fn coordinator_via<T: Transport>(
        &self,
        w: &World,
        transport: T,
    ) -> Coordinator<DynamoTxLog, T, ManualClock> {
        self.coordinator_in(w, transport, w.coordinator.config().mode)
    }

    /// The same, committing in `mode`.
    pub fn coordinator_in<T: Transport>(
        &self,
        w: &World,
        transport: T,
        mode: twopc_core::coordinator::CommitMode,
    ) -> Coordinator<DynamoTxLog, T, ManualClock> {
        Coordinator::new(
            w.log.clone(),
            transport,
            w.clock.clone(),
            self.config_in(w, mode),
        )
    }

    /// The world's coordinator configuration with this service, committing in `mode`.
    pub fn config_in(
        &self,
        w: &World,
        mode: twopc_core::coordinator::CommitMode,
    ) -> twopc_core::coordinator::CoordinatorConfig {
        let mut config = w.coordinator.config().clone();
        config.mode = mode;
        config.services.insert(
            FEES.to_owned(),
            ServiceConfig::custom(Target::Http {
                url: FEES_URL.to_owned(),
            }),
        );
        config
    }

    /// Every state in the table (strongly consistent).
    pub async fn states(&self, w: &World) -> Vec<TxState> {
        let items: Vec<_> = w
            .client
            .scan()
            .table_name(&self.table)
            .consistent_read(true)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .expect("scan");
        items
            .iter()
            .map(|item| {
                let map = twopc_dynamo::codec::from_item(item).expect("item");
                serde_json::from_value(Value::Object(map)).expect("state")
            })
            .collect()
    }
}

/// `direct` targets in-process, and [`FEES_URL`] to the fee service in-process, each call
/// [`serve`]d: a hook dying inside it answers as a lost call does (undetermined).
pub struct Route {
    direct: TestTransport,
    fees: FeesParticipant,
    busy: Arc<AtomicUsize>,
}

fn fees_target(target: &Target) -> bool {
    matches!(target, Target::Http { url } if url == FEES_URL)
}

impl Route {
    async fn serve<T>(
        &self,
        call: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, TransportError> {
        let served = serve(call).await;
        if let Ok(Err(Error::Busy { .. })) = served {
            self.busy.fetch_add(1, Ordering::Relaxed);
        }
        lift(served)
    }
}

fn lift<T>(served: Result<Result<T, Error>, Died>) -> Result<T, TransportError> {
    let (message, undetermined, source) = match served {
        Ok(Ok(out)) => return Ok(out),
        Err(Died) => ("the participant died mid-call".to_owned(), true, None),
        Ok(Err(e)) => {
            let undetermined = matches!(
                e,
                Error::Hook { .. } | Error::Store(PortError::Undetermined { .. })
            );
            (e.to_string(), undetermined, Some(e.into()))
        }
    };
    Err(TransportError {
        target: FEES_URL.to_owned(),
        message,
        undetermined,
        source,
    })
}

impl Transport for Route {
    async fn prepare(
        &self,
        target: &Target,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, TransportError> {
        if fees_target(target) {
            return self.serve(self.fees.prepare(req)).await;
        }
        self.direct.prepare(target, req).await
    }

    async fn commit(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        if fees_target(target) {
            return self.serve(self.fees.commit(req)).await;
        }
        self.direct.commit(target, req).await
    }

    async fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        if fees_target(target) {
            return self.serve(self.fees.abort(req)).await;
        }
        self.direct.abort(target, req).await
    }

    async fn inquire(
        &self,
        target: &Target,
        req: &InquireRequest,
    ) -> Result<InquireReply, TransportError> {
        if fees_target(target) {
            return self.serve(self.fees.inquire(req)).await;
        }
        self.direct.inquire(target, req).await
    }
}
