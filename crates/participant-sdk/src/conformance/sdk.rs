//! An SDK participant under test: the service's hooks wrapped to count each call, track what
//! they hold and applied, and take the kit's failures; the driver over an in-memory log.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use twopc_core::ids::TxId;
use twopc_core::memory::MemoryTxLog;
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use twopc_core::ports::{Clock, ManualClock, SystemClock};

use super::{Atomicity, Effects, Entry, Failure, Faults, Step, Tx, UnderTest, payload_entry};
use crate::hooks::{Call, HookError, Hooks, Reservation};
use crate::participant::{Error, Resolved, SdkParticipant};
use crate::store::{MemoryStates, StateStore};

/// What an SDK participant is made of for the kit.
pub struct Subject<H, S = MemoryStates> {
    /// Its hooks.
    pub hooks: H,
    /// Where its state is kept.
    pub store: S,
    /// A payload its `reserve` holds.
    pub valid: Value,
    /// A payload its `reserve` refuses as `invalid`.
    pub invalid: Value,
}

/// A hook, to count its calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hook {
    /// `reserve`.
    Reserve,
    /// `confirm`.
    Confirm,
    /// `cancel`.
    Cancel,
}

impl Hook {
    fn step(self) -> Step {
        match self {
            Hook::Reserve => Step::Prepare,
            Hook::Confirm => Step::Commit,
            Hook::Cancel => Step::Abort,
        }
    }
}

/// What the hooks did for one transaction.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    calls: [u32; 3],
    held: u32,
    applied: u32,
}

type Tallies = Arc<Mutex<BTreeMap<TxId, Tally>>>;

/// The subject's hooks as the kit sees them: each call counted, what each returned tallied,
/// and the kit's failures injected.
#[derive(Clone)]
pub struct Counted<H> {
    inner: H,
    tallies: Tallies,
    faults: Arc<Faults>,
}

impl<H: Hooks> Counted<H> {
    async fn around<T>(
        &self,
        hook: Hook,
        call: Call<'_, H::Payload>,
        inner: impl Future<Output = Result<T, HookError>>,
        done: impl FnOnce(&T, &mut Tally),
    ) -> Result<T, HookError> {
        self.tally(call.tx_id, |t| t.calls[hook as usize] += 1);
        let work = async {
            let out = inner.await?;
            self.tally(call.tx_id, |t| done(&out, t));
            Ok(out)
        };
        let lost = |at| HookError::new(format!("{hook:?} failed ({at:?}, injected by the kit)"));
        self.faults.around(hook.step(), work, lost).await
    }

    fn tally(&self, tx: &TxId, f: impl FnOnce(&mut Tally)) {
        if let Ok(mut tallies) = self.tallies.lock() {
            f(tallies.entry(tx.clone()).or_default());
        }
    }
}

impl<H: Hooks> Hooks for Counted<H> {
    type Payload = H::Payload;

    async fn reserve(&self, call: Call<'_, H::Payload>) -> Result<Reservation, HookError> {
        let held = |r: &Reservation, t: &mut Tally| t.held += u32::from(*r == Reservation::Held);
        let inner = self.inner.reserve(call);
        self.around(Hook::Reserve, call, inner, held).await
    }

    async fn confirm(&self, call: Call<'_, H::Payload>) -> Result<(), HookError> {
        let applied = |_: &(), t: &mut Tally| {
            t.applied += 1;
            t.held = 0;
        };
        let inner = self.inner.confirm(call);
        self.around(Hook::Confirm, call, inner, applied).await
    }

    async fn cancel(&self, call: Call<'_, H::Payload>) -> Result<(), HookError> {
        let released = |_: &(), t: &mut Tally| t.held = 0;
        let inner = self.inner.cancel(call);
        self.around(Hook::Cancel, call, inner, released).await
    }
}

/// An SDK participant wired for the kit: counted hooks, the subject's store, an in-memory log.
pub struct Sdk<H, S = MemoryStates> {
    participant: SdkParticipant<Counted<H>, S, MemoryTxLog, ManualClock>,
    tallies: Tallies,
    faults: Arc<Faults>,
    log: MemoryTxLog,
    clock: ManualClock,
    valid: Value,
    invalid: Value,
}

impl<H: Hooks, S: StateStore> From<Subject<H, S>> for Sdk<H, S> {
    fn from(subject: Subject<H, S>) -> Self {
        let tallies = Tallies::default();
        let faults = Arc::new(Faults::default());
        let hooks = Counted {
            inner: subject.hooks,
            tallies: tallies.clone(),
            faults: faults.clone(),
        };
        let log = MemoryTxLog::default();
        let clock = ManualClock::new(SystemClock.now_ms());
        let participant = SdkParticipant::builder(hooks)
            .states(subject.store)
            .log(log.clone())
            .clock(clock.clone())
            .build();
        Sdk {
            participant,
            tallies,
            faults,
            log,
            clock,
            valid: subject.valid,
            invalid: subject.invalid,
        }
    }
}

impl<H, S> Sdk<H, S> {
    /// The participant.
    pub fn participant(&self) -> &SdkParticipant<Counted<H>, S, MemoryTxLog, ManualClock> {
        &self.participant
    }

    /// The calls of each hook for the transaction: `[reserve, confirm, cancel]`.
    pub fn counts(&self, tx: &TxId) -> [u32; 3] {
        self.tally(tx).calls
    }

    fn tally(&self, tx: &TxId) -> Tally {
        let tallies = self.tallies.lock();
        tallies.map_or_else(
            |_| Tally::default(),
            |t| t.get(tx).copied().unwrap_or_default(),
        )
    }
}

fn failure(e: Error) -> Failure {
    match e {
        Error::Busy { .. } => Failure::Busy(e.to_string()),
        Error::Hook { .. } => Failure::Failed(e.to_string()),
        other => Failure::Other(other.to_string()),
    }
}

impl<H: Hooks, S: StateStore> UnderTest for Sdk<H, S> {
    type Log = MemoryTxLog;

    fn log(&self) -> &MemoryTxLog {
        &self.log
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }

    fn atomicity(&self) -> Atomicity {
        Atomicity::Claimed {
            claim_ms: self.participant.claim_ms(),
        }
    }

    fn faults(&self) -> &Faults {
        &self.faults
    }

    async fn valid(&self, tx: &TxId) -> Entry {
        payload_entry(tx, self.valid.clone())
    }

    async fn invalid(&self, tx: &TxId) -> Entry {
        payload_entry(tx, self.invalid.clone())
    }

    async fn prepare(&self, req: &PrepareRequest) -> Result<PrepareReply, Failure> {
        self.participant.prepare(req).await.map_err(failure)
    }

    async fn commit(&self, req: &CompleteRequest) -> Result<CompleteReply, Failure> {
        self.participant.commit(req).await.map_err(failure)
    }

    async fn abort(&self, req: &CompleteRequest) -> Result<CompleteReply, Failure> {
        self.participant.abort(req).await.map_err(failure)
    }

    async fn inquire(&self, req: &InquireRequest) -> Result<InquireReply, Failure> {
        self.participant.inquire(req).await.map_err(failure)
    }

    async fn resolve(&self, tx: &Tx) -> Result<Resolved, Failure> {
        self.participant.resolve(&tx.id).await.map_err(failure)
    }

    async fn sweep(&self) -> Result<Vec<(TxId, Resolved)>, Failure> {
        self.participant.sweep(100).await.map_err(failure)
    }

    async fn effects(&self, tx: &Tx) -> Option<Effects> {
        let t = self.tally(&tx.id);
        Some(Effects {
            held: t.held,
            applied: t.applied,
            calls: Some(t.calls),
        })
    }
}
