//! The kit's failures: one armed at a time for the next work of a step, struck where the
//! participant runs that work through [`Faults::around`].

use std::future::Future;
use std::sync::Mutex;

use tokio::sync::Notify;

/// Which message's work a failure strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Prepare's (`reserve`; the item's lock or reservation).
    Prepare,
    /// Commit's (`confirm`; the item's commit).
    Commit,
    /// Abort's (`cancel`; the item's release or fence).
    Abort,
}

/// Where an injected failure strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fail {
    /// The work fails before it acts.
    Before,
    /// The work acts, then its answer is lost.
    After,
    /// The work never returns and never acts (the process died inside it); the kit is told it
    /// began.
    Stall,
    /// The work waits before it acts until the kit releases it; the kit is told it began.
    Hold,
}

/// The failure armed for the next message's work, and the signals of held and stalled work.
#[derive(Debug, Default)]
pub struct Faults {
    armed: Mutex<Option<(Step, Fail)>>,
    inside: Notify,
    release: Notify,
}

impl Faults {
    /// Arms `fail` for the next work of `step`.
    pub fn arm(&self, step: Step, fail: Fail) {
        if let Ok(mut armed) = self.armed.lock() {
            *armed = Some((step, fail));
        }
    }

    /// Waits until armed work (`Hold`, `Stall`) is inside.
    pub(super) async fn inside(&self) {
        self.inside.notified().await;
    }

    /// Lets held work go on.
    pub(super) fn release(&self) {
        self.release.notify_one();
    }

    /// Runs `work`, the work of `step`, with the failure armed for it, if any (disarming it);
    /// `lost` makes the error a failure returns.
    pub async fn around<T, E>(
        &self,
        step: Step,
        work: impl Future<Output = Result<T, E>>,
        lost: impl FnOnce(Fail) -> E,
    ) -> Result<T, E> {
        let fail = self
            .armed
            .lock()
            .ok()
            .and_then(|mut armed| armed.take_if(|(s, _)| *s == step))
            .map(|(_, fail)| fail);
        match fail {
            None => work.await,
            Some(Fail::Before) => Err(lost(Fail::Before)),
            Some(Fail::After) => {
                work.await?;
                Err(lost(Fail::After))
            }
            Some(Fail::Stall) => {
                self.inside.notify_one();
                std::future::pending().await
            }
            Some(Fail::Hold) => {
                self.inside.notify_one();
                self.release.notified().await;
                work.await
            }
        }
    }
}
