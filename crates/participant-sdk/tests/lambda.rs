//! The Lambda adapter, called in-process with `LambdaEvent`s as the runtime would: the sample
//! events (`events/custom-participant-*.json`) reach the hooks once (an inquiry none), and each failure is a
//! function error the coordinator's `lambda` transport reads as it reads the generic
//! participant's (`twopc_function::errors`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use lambda_runtime::{Context, Diagnostic, LambdaEvent};
use serde_json::{Value, json};
use tokio::sync::Notify;
use twopc_core::ids::TxId;
use twopc_core::memory::MemoryTxLog;
use twopc_core::message::{CompleteReply, ParticipantCall, PrepareReply};
use twopc_core::ports::{ManualClock, PortError};
use twopc_function::errors::{ErrorKind, FunctionError};
use twopc_participant_sdk::lambda::{CallError, handle, kind};
use twopc_participant_sdk::{
    Call, Error, HookError, Hooks, MemoryStates, Reservation, SdkParticipant,
};

const PREPARE: &str = include_str!("../../../events/custom-participant-prepare.json");
const COMMIT: &str = include_str!("../../../events/custom-participant-commit.json");
const ABORT: &str = include_str!("../../../events/custom-participant-abort.json");
const INQUIRE: &str = include_str!("../../../events/custom-participant-inquire.json");

/// Records each hook call with its payload; `confirm` can be made to fail once, or to stop
/// inside (signalling `inside`) as a crashed process would.
#[derive(Clone, Default)]
struct Card {
    calls: Arc<Mutex<Vec<(&'static str, Value)>>>,
    fail_confirm: Arc<AtomicBool>,
    stall_confirm: Arc<AtomicBool>,
    inside: Arc<Notify>,
}

impl Card {
    fn note(&self, hook: &'static str, call: Call<'_, Value>) {
        let mut calls = self.calls.lock().expect("calls");
        calls.push((hook, call.payload.clone()));
    }
    fn calls(&self) -> Vec<&'static str> {
        let calls = self.calls.lock().expect("calls");
        calls.iter().map(|(h, _)| *h).collect()
    }
}

impl Hooks for Card {
    type Payload = Value;

    async fn reserve(&self, call: Call<'_, Value>) -> Result<Reservation, HookError> {
        self.note("reserve", call);
        Ok(Reservation::Held)
    }
    async fn confirm(&self, call: Call<'_, Value>) -> Result<(), HookError> {
        self.note("confirm", call);
        if self.stall_confirm.swap(false, Ordering::SeqCst) {
            self.inside.notify_one();
            std::future::pending::<()>().await;
        }
        if self.fail_confirm.swap(false, Ordering::SeqCst) {
            return Err(HookError::new("the gateway timed out"));
        }
        Ok(())
    }
    async fn cancel(&self, call: Call<'_, Value>) -> Result<(), HookError> {
        self.note("cancel", call);
        Ok(())
    }
}

type Participant = SdkParticipant<Card, MemoryStates, MemoryTxLog, ManualClock>;

fn participant(card: &Card) -> Participant {
    // The events' transaction began at 4102444795000; their deadline is 5 s later.
    let clock = ManualClock::new(4_102_444_796_000);
    let (states, log) = (MemoryStates::default(), MemoryTxLog::default());
    SdkParticipant::builder(card.clone())
        .states(states)
        .log(log)
        .clock(clock)
        .build()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("json")
}

async fn call(p: &Participant, event: Value) -> Result<Value, CallError> {
    handle(p, LambdaEvent::new(event, Context::default())).await
}

/// The function error as the `lambda` transport reads it off the wire.
fn as_read_back(e: CallError) -> FunctionError {
    let wire = serde_json::to_vec(&Diagnostic::from(e)).expect("diagnostic");
    FunctionError::parse(&wire).expect("a function error")
}

#[test]
fn the_sample_events_round_trip_through_the_participant_call() {
    for (text, action) in [
        (PREPARE, "prepare"),
        (COMMIT, "commit"),
        (ABORT, "abort"),
        (INQUIRE, "inquire"),
    ] {
        let call = ParticipantCall::from_json(json(text)).expect("a participant call");
        assert_eq!(call.action(), action);
        assert_eq!(call.to_json(), json(text), "{action} does not round-trip");
    }
}

#[tokio::test]
async fn the_sample_prepare_and_commit_reach_the_hooks_once() {
    let card = Card::default();
    let p = participant(&card);
    let vote: PrepareReply =
        serde_json::from_value(call(&p, json(PREPARE)).await.expect("prepare")).expect("a vote");
    assert!(vote.vote.is_yes(), "{vote:?}");
    let reserved = card.calls.lock().expect("calls")[0].1.clone();
    assert_eq!(reserved, json(PREPARE)["request"]["payload"], "the payload");
    for want in [CompleteReply::Done, CompleteReply::AlreadyDone] {
        let reply = call(&p, json(COMMIT)).await.expect("commit");
        assert_eq!(
            serde_json::from_value::<CompleteReply>(reply).expect("a reply"),
            want
        );
    }
    assert_eq!(card.calls(), ["reserve", "confirm"]);
}

#[tokio::test]
async fn the_sample_abort_before_its_prepare_fences_it_out() {
    let card = Card::default();
    let p = participant(&card);
    let done = call(&p, json(ABORT)).await.expect("abort");
    assert_eq!(done["result"], json!("done"), "{done}");
    let late = call(&p, json(PREPARE)).await.expect("prepare");
    assert_eq!(late["reason"], json!("fenced"), "{late}");
    assert!(card.calls().is_empty(), "{:?}", card.calls());
}

#[tokio::test]
async fn the_sample_inquiry_prevents_a_prepare_that_has_not_arrived_and_finds_one_held() {
    let card = Card::default();
    let p = participant(&card);
    let prevented = call(&p, json(INQUIRE)).await.expect("inquire");
    assert_eq!(prevented, json!({"inquiry": "prevented"}));
    let late = call(&p, json(PREPARE)).await.expect("prepare");
    assert_eq!(late["reason"], json!("fenced"), "{late}");
    assert!(card.calls().is_empty(), "{:?}", card.calls());

    let held = participant(&Card::default());
    let vote = call(&held, json(PREPARE)).await.expect("prepare");
    assert_eq!(vote["vote"], json!("yes"), "{vote}");
    let found = call(&held, json(INQUIRE)).await.expect("inquire");
    assert_eq!(
        found,
        json!({"inquiry": "held"}),
        "a prevent leaves a hold alone"
    );
}

#[tokio::test]
async fn a_malformed_event_is_an_invalid_function_error_that_did_nothing() {
    let card = Card::default();
    let p = participant(&card);
    for event in [
        json!({}),
        json!({"action": "explode", "request": {}}),
        json!({"action": "prepare", "request": {"txId": "nope"}}),
    ] {
        let e = call(&p, event.clone()).await.expect_err("refused");
        assert_eq!(e.kind, ErrorKind::Invalid, "{event}: {e}");
        let read = as_read_back(e);
        assert_eq!(read.error_type, "Invalid");
        assert!(!read.may_have_acted(), "{read:?}");
    }
    assert!(card.calls().is_empty());
}

#[tokio::test]
async fn a_failed_hook_may_have_acted_and_the_next_commit_calls_it_again() {
    let card = Card::default();
    let p = participant(&card);
    call(&p, json(PREPARE)).await.expect("prepare");
    card.fail_confirm.store(true, Ordering::SeqCst);
    let e = call(&p, json(COMMIT)).await.expect_err("the hook failed");
    assert_eq!(e.kind, ErrorKind::Undetermined, "{e}");
    assert!(
        e.message.contains("the gateway timed out"),
        "the cause: {e}"
    );
    assert!(as_read_back(e).may_have_acted());
    let done = call(&p, json(COMMIT)).await.expect("commit");
    assert_eq!(done["result"], json!("done"), "{done}");
    assert_eq!(card.calls(), ["reserve", "confirm", "confirm"]);
}

#[tokio::test]
async fn a_copy_during_a_hook_call_is_retryable_and_did_nothing() {
    let card = Card::default();
    let p = participant(&card);
    call(&p, json(PREPARE)).await.expect("prepare");
    card.stall_confirm.store(true, Ordering::SeqCst);
    // The first commit enters `confirm` and its process dies there: its claim stands.
    tokio::select! {
        r = call(&p, json(COMMIT)) => panic!("the stalled commit returned: {r:?}"),
        () = card.inside.notified() => {}
    }
    let e = call(&p, json(COMMIT)).await.expect_err("busy");
    assert_eq!(e.kind, ErrorKind::Retryable, "{e}");
    let read = as_read_back(e);
    assert_eq!(read.error_type, "Retryable");
    assert!(!read.may_have_acted(), "{read:?}");
    assert_eq!(card.calls(), ["reserve", "confirm"], "no second call");
}

#[test]
fn each_driver_error_has_the_kind_its_caller_may_assume() {
    let tx = TxId::random();
    let port = |kind: fn(String) -> PortError| Error::Store(kind("states".into()));
    let cases = [
        (
            port(|context| PortError::Retryable {
                context,
                source: "throttled".into(),
            }),
            ErrorKind::Retryable,
        ),
        (
            port(|context| PortError::Undetermined {
                context,
                source: "timeout".into(),
            }),
            ErrorKind::Undetermined,
        ),
        (
            port(|context| PortError::Fatal {
                context,
                source: "no table".into(),
            }),
            ErrorKind::Fatal,
        ),
        (
            port(|context| PortError::Invalid {
                context,
                message: "bad".into(),
            }),
            ErrorKind::Invalid,
        ),
        (
            Error::Hook {
                hook: "confirm",
                tx_id: tx.clone(),
                source: HookError::new("down"),
            },
            ErrorKind::Undetermined,
        ),
        (
            Error::Busy {
                tx_id: tx,
                phase: twopc_participant_sdk::state::Phase::Confirming,
                until: 1,
            },
            ErrorKind::Retryable,
        ),
        (Error::Invalid("not a call".into()), ErrorKind::Invalid),
    ];
    for (e, want) in cases {
        assert_eq!(kind(&e), want, "{e}");
    }
}
