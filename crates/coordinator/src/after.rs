//! Work after the answer: a staged transaction is answered once it is decided, and made
//! explicit, completed and finalized after the client has its response.
//!
//! In Lambda, the execution environment is frozen once the runtime and every extension asked
//! for their next event, so work left running by a handler that returned may never run.
//! [`AfterAnswer::lambda`] registers an *internal extension* (a thread of this process that
//! Lambda waits for): for every invocation the handler hands it exactly one message, the work
//! or nothing, under the invocation's request id, and the extension asks for its next event
//! only once that invocation's work is done. The response is posted meanwhile, so the client
//! does not wait for it. The message is sent by an [`Invocation`] guard, so an invocation that
//! never reaches the protocol (a payload that is not an API Gateway request, a panic) still
//! sends its "nothing" when the guard is dropped, and the extension never waits for the
//! invocation's timeout. In the local stack and in
//! tests the work is spawned ([`AfterAnswer::spawn`]). Either way, a crash loses nothing: the
//! transactions table's stream and the sweeper finish what the work did not (`docs/protocol.md`,
//! "The staged commit").

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use lambda_extension::{Extension, NextEvent, service_fn};
use tokio::sync::Mutex;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_util::task::TaskTracker;
use tracing::{error, warn};

/// Work to run after an answer.
pub type Work = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where the work after an answer runs.
pub enum AfterAnswer {
    /// On the tokio runtime (a process that lives on: the local stack, tests), tracked so a
    /// graceful shutdown can let it finish ([`AfterAnswer::drain`]).
    Spawn(TaskTracker),
    /// In this process's internal Lambda extension, which holds the environment until done.
    Lambda(UnboundedSender<HandOver>),
}

/// One invocation's message to the extension: its request id and its work, if any.
pub type HandOver = (String, Option<Work>);

/// The extension's name, as Lambda lists it.
const EXTENSION_NAME: &str = "twopc-after-answer";

impl AfterAnswer {
    /// Spawned on the runtime.
    pub fn spawn() -> AfterAnswer {
        AfterAnswer::Spawn(TaskTracker::new())
    }

    /// Waits for the spawned work still running (a graceful shutdown: the local stack on
    /// Ctrl-C). Work handed over afterwards still runs, untracked. A no-op in Lambda, whose
    /// extension holds the environment until each invocation's work is done.
    pub async fn drain(&self) {
        if let AfterAnswer::Spawn(tracker) = self {
            tracker.close();
            tracker.wait().await;
        }
    }

    /// Registers the internal extension with Lambda (before the runtime starts: extensions
    /// register during the init phase) and returns the handle the handler sends its work to,
    /// and the extension's loop to run beside the runtime.
    pub async fn lambda() -> Result<
        (
            AfterAnswer,
            impl Future<Output = Result<(), lambda_extension::Error>>,
        ),
        lambda_extension::Error,
    > {
        let (sender, receiver) = unbounded_channel::<HandOver>();
        let receiver = Arc::new(Mutex::new(receiver));
        let extension = Extension::new()
            .with_extension_name(EXTENSION_NAME)
            // Internal extensions get INVOKE events only.
            .with_events(&["INVOKE"])
            .with_events_processor(service_fn(move |event: lambda_extension::LambdaEvent| {
                let receiver = receiver.clone();
                async move { after_invoke(event.next, &receiver).await }
            }))
            .register()
            .await?;
        Ok((AfterAnswer::Lambda(sender), extension.run()))
    }

    /// The hand-over of invocation `request_id`: [`Invocation::hand_over`] sends its work;
    /// dropped unsent (an early return, a panic), it sends "nothing". Either way exactly one
    /// message per invocation, so the extension, which waits for it, never waits for one that
    /// is not coming.
    pub fn invocation(&self, request_id: &str) -> Invocation<'_> {
        Invocation {
            after: self,
            request_id: request_id.to_owned(),
            sent: false,
        }
    }

    fn send(&self, request_id: String, work: Option<Work>) {
        match self {
            AfterAnswer::Spawn(tracker) => {
                if let Some(work) = work {
                    tracker.spawn(work);
                }
            }
            AfterAnswer::Lambda(sender) => {
                if let Err(unsent) = sender.send((request_id, work)) {
                    // The extension is gone (its loop failed): do the work detached; if the
                    // environment freezes first, the stream and the sweeper finish it.
                    error!("the after-answer extension is not running; the work is spawned");
                    if let (_, Some(work)) = unsent.0 {
                        tokio::spawn(work);
                    }
                }
            }
        }
    }
}

/// One invocation's pending hand-over ([`AfterAnswer::invocation`]).
pub struct Invocation<'a> {
    after: &'a AfterAnswer,
    request_id: String,
    sent: bool,
}

impl Invocation<'_> {
    /// Hands over what is left after the answer (`None`: nothing).
    pub fn hand_over(mut self, work: Option<Work>) {
        self.sent = true;
        self.after.send(std::mem::take(&mut self.request_id), work);
    }
}

impl Drop for Invocation<'_> {
    fn drop(&mut self) {
        if !self.sent {
            self.after.send(std::mem::take(&mut self.request_id), None);
        }
    }
}

/// The extension's part of one invocation: the handler's work for it, run to its end. A
/// message under another request id (never expected: each invocation's message is sent before
/// its response) is run too, and the wait goes on.
async fn after_invoke(
    next: NextEvent,
    receiver: &Mutex<UnboundedReceiver<HandOver>>,
) -> Result<(), lambda_extension::Error> {
    let invoke = match next {
        NextEvent::Invoke(invoke) => invoke,
        NextEvent::Shutdown(s) => {
            warn!(reason = ?s.shutdown_reason, "after-answer extension: shutdown");
            return Ok(());
        }
    };
    let mut receiver = receiver.lock().await;
    loop {
        let Some((request_id, work)) = receiver.recv().await else {
            return Err("the handler's channel closed".into());
        };
        let this_one = request_id == invoke.request_id;
        if !this_one {
            warn!(
                %request_id,
                expected = %invoke.request_id,
                "after-answer extension: a hand-over of another invocation"
            );
        }
        if let Some(work) = work {
            work.await;
        }
        if this_one {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use lambda_extension::InvokeEvent;

    use super::*;

    fn invoke(request_id: &str) -> NextEvent {
        NextEvent::Invoke(InvokeEvent {
            deadline_ms: 0,
            request_id: request_id.to_owned(),
            invoked_function_arn: "arn:aws:lambda:us-east-1:123456789012:function:c".to_owned(),
            tracing: Default::default(),
        })
    }

    fn lambda() -> (AfterAnswer, Mutex<UnboundedReceiver<HandOver>>) {
        let (sender, receiver) = unbounded_channel();
        (AfterAnswer::Lambda(sender), Mutex::new(receiver))
    }

    #[tokio::test]
    async fn the_extension_runs_the_work_of_its_invocation() {
        let (after, receiver) = lambda();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        after.invocation("r1").hand_over(Some(Box::pin(async move {
            flag.store(true, Ordering::SeqCst)
        })));
        after_invoke(invoke("r1"), &receiver).await.unwrap();
        assert!(ran.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn an_invocation_dropped_unsent_still_releases_the_extension() {
        let (after, receiver) = lambda();
        drop(after.invocation("r1"));
        after_invoke(invoke("r1"), &receiver).await.unwrap();
        assert!(
            receiver.lock().await.try_recv().is_err(),
            "one message only"
        );
    }

    #[tokio::test]
    async fn a_panicking_handler_still_releases_the_extension() {
        let (after, receiver) = lambda();
        let after = Arc::new(after);
        let handler = after.clone();
        let panicked = tokio::spawn(async move {
            let _invocation = handler.invocation("r1");
            panic!("the handler panics before its hand-over");
        })
        .await;
        assert!(panicked.unwrap_err().is_panic());
        after_invoke(invoke("r1"), &receiver).await.unwrap();
    }

    #[tokio::test]
    async fn a_hand_over_of_another_invocation_is_run_and_the_wait_goes_on() {
        let (after, receiver) = lambda();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        after.invocation("r0").hand_over(Some(Box::pin(async move {
            flag.store(true, Ordering::SeqCst)
        })));
        after.invocation("r1").hand_over(None);
        after_invoke(invoke("r1"), &receiver).await.unwrap();
        assert!(ran.load(Ordering::SeqCst));
        assert!(receiver.lock().await.try_recv().is_err());
    }
}
