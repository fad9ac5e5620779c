//! Work after the answer: a staged transaction is answered once it is decided, and made
//! explicit, completed and finalized after the client has its response.
//!
//! In Lambda, the execution environment is frozen once the runtime and every extension asked
//! for their next event, so work left running by a handler that returned may never run.
//! [`AfterAnswer::lambda`] registers an *internal extension* (a thread of this process that
//! Lambda waits for): for every invocation the handler hands it exactly one message, the work
//! or nothing, and the extension asks for its next event only once that work is done. The
//! response is posted meanwhile, so the client does not wait for it. In the local stack and in
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
    Lambda(UnboundedSender<Option<Work>>),
}

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
        let (sender, receiver) = unbounded_channel::<Option<Work>>();
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

    /// Hands over what is left after one invocation's answer: exactly once per invocation
    /// (with `None` when nothing is left), so that the extension, which waits for one message
    /// per invocation, never waits for one that is not coming.
    pub fn hand_over(&self, work: Option<Work>) {
        match self {
            AfterAnswer::Spawn(tracker) => {
                if let Some(work) = work {
                    tracker.spawn(work);
                }
            }
            AfterAnswer::Lambda(sender) => {
                if let Err(unsent) = sender.send(work) {
                    // The extension is gone (its loop failed): do the work detached; if the
                    // environment freezes first, the stream and the sweeper finish it.
                    error!("the after-answer extension is not running; the work is spawned");
                    if let Some(work) = unsent.0 {
                        tokio::spawn(work);
                    }
                }
            }
        }
    }
}

/// The extension's part of one invocation: the handler's work for it, run to its end.
async fn after_invoke(
    next: NextEvent,
    receiver: &Mutex<UnboundedReceiver<Option<Work>>>,
) -> Result<(), lambda_extension::Error> {
    if let NextEvent::Shutdown(s) = next {
        warn!(reason = ?s.shutdown_reason, "after-answer extension: shutdown");
        return Ok(());
    }
    let mut receiver = receiver.lock().await;
    match receiver.recv().await {
        Some(Some(work)) => work.await,
        Some(None) => {}
        None => return Err("the handler's channel closed".into()),
    }
    Ok(())
}
