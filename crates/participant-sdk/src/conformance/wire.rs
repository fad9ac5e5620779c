//! The wire's checks: requests the coordinator never sends (unsigned, forged, stale, signed for
//! another transaction, malformed), posted raw to a participant reached over the `http`
//! transport ([`UnderTest::post_raw`]). Each is refused with its status and stable `code`
//! (`docs/participant-openapi.json`), and the transaction is then shown to hold nothing: a
//! signed commit of it is a violation (nothing was prepared), and the participant's effects,
//! where it shows them, are nil.

use serde_json::{Value, json};
use twopc_core::message::CompleteReply;
use twopc_core::ports::Clock;
use twopc_core::signing::{self, DEFAULT_MAX_SKEW_MS};

use super::{Kit, Tx, UnderTest};

/// The secret the participant checks with; the wire's checks need a participant over HTTP.
fn secret<P: UnderTest>(kit: &Kit<P>) -> Vec<u8> {
    kit.subject()
        .secret()
        .unwrap_or_else(|| panic!("not applicable: a wire check needs a participant over HTTP"))
        .to_vec()
}

fn signed(secret: &[u8], tx: &str, at: u64, body: &[u8]) -> Vec<(&'static str, String)> {
    signing::sign_text(secret, tx, at, body).to_vec()
}

fn prepare_body<P: UnderTest>(kit: &Kit<P>, tx: &Tx) -> Vec<u8> {
    serde_json::to_vec(&kit.prepare(tx)).expect("a request serializes")
}

/// Posts and asserts the refusal: `status` and `code`, a JSON error with a message.
async fn refused<P: UnderTest>(
    kit: &Kit<P>,
    action: &str,
    headers: &[(&'static str, String)],
    body: &[u8],
    (status, code): (u16, &str),
    what: &str,
) {
    let (got, answer) = kit
        .subject()
        .post_raw(what, action, headers, body)
        .await
        .unwrap_or_else(|| panic!("not applicable: a wire check needs a participant over HTTP"));
    assert_eq!(
        (got, answer["code"].as_str()),
        (status, Some(code)),
        "{what} to /{action}: the answer {answer}"
    );
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(
        !message.is_empty(),
        "{what}: the refusal's message says what to fix: {answer}"
    );
}

/// After a refused request for `tx`: nothing is held. A signed commit is a violation (no
/// prepare took effect) and the abort that follows is done (tidying up: nothing is left).
async fn nothing_held<P: UnderTest>(kit: &Kit<P>, tx: &Tx, what: &str) {
    let commit = kit.subject().commit(&kit.complete(tx)).await;
    assert!(
        matches!(commit, Ok(CompleteReply::Violation { .. })),
        "after {what}, a signed commit finds no prepare (a violation): {commit:?}"
    );
    kit.expect(tx, 0, 0, [0, 0, 0], &format!("after {what}"))
        .await;
    assert_eq!(
        kit.send_abort(tx).await,
        CompleteReply::Done,
        "after {what}"
    );
}

/// A request without the signing headers (all three, or the signature alone) is refused with
/// `unsigned` on every path: a prepare holds nothing, and a commit or an abort of a prepared
/// transaction does nothing (its signed commit afterwards is `done`, not `alreadyDone`).
pub async fn an_unsigned_request_is_refused_and_holds_nothing<P: UnderTest>(kit: Kit<P>) {
    let key = secret(&kit);
    let tx = kit.begin().await;
    let body = prepare_body(&kit, &tx);
    let unsigned = (401, "unsigned");
    refused(&kit, "prepare", &[], &body, unsigned, "an unsigned prepare").await;
    let mut headers = signed(&key, tx.id.as_str(), kit.subject().clock().now_ms(), &body);
    headers.retain(|(name, _)| *name != signing::SIGNATURE_HEADER);
    let what = "a prepare without its signature";
    refused(&kit, "prepare", &headers, &body, unsigned, what).await;
    nothing_held(&kit, &tx, "unsigned prepares").await;

    let prepared = kit.begin().await;
    assert!(kit.send_prepare(&prepared).await.vote.is_yes());
    let body = serde_json::to_vec(&kit.complete(&prepared)).expect("serializes");
    for action in ["abort", "commit"] {
        let what = format!("an unsigned {action}");
        refused(&kit, action, &[], &body, unsigned, &what).await;
    }
    assert_eq!(
        kit.send_commit(&prepared).await,
        CompleteReply::Done,
        "the unsigned abort and commit did nothing: the signed commit is the first"
    );
    kit.expect(
        &prepared,
        0,
        1,
        [1, 1, 0],
        "after unsigned calls and the signed commit",
    )
    .await;
}

/// A request signed with another secret, one whose body was altered after it was signed, and
/// one whose signature is not `v1=<64 hex digits>` are refused (`bad_signature`,
/// `malformed_signature`) and hold nothing.
pub async fn a_forged_signature_is_refused_and_holds_nothing<P: UnderTest>(kit: Kit<P>) {
    let key = secret(&kit);
    let tx = kit.begin().await;
    let body = prepare_body(&kit, &tx);
    let now = kit.subject().clock().now_ms();
    let guessed = signed(b"a guessed secret", tx.id.as_str(), now, &body);
    let bad = (401, "bad_signature");
    refused(
        &kit,
        "prepare",
        &guessed,
        &body,
        bad,
        "a prepare signed with another secret",
    )
    .await;
    let mut altered: Value = serde_json::from_slice(&body).expect("json");
    altered["deadline"] = json!(tx.deadline + 3_600_000);
    let altered = serde_json::to_vec(&altered).expect("json");
    let headers = signed(&key, tx.id.as_str(), now, &body);
    let what = "a prepare altered after signing (a later deadline)";
    refused(&kit, "prepare", &headers, &altered, bad, what).await;
    let mut malformed = headers.clone();
    for (name, value) in &mut malformed {
        if *name == signing::SIGNATURE_HEADER {
            *value = "v1=not-hex".into();
        }
    }
    let what = "a prepare whose signature is not hex";
    let form = (401, "malformed_signature");
    refused(&kit, "prepare", &malformed, &body, form, what).await;
    nothing_held(&kit, &tx, "forged prepares").await;
}

/// A request signed further from the participant's clock than the skew allowed (twice the
/// default 5 minutes, in the past and in the future) is refused (`stale_request`) and holds
/// nothing: a captured request cannot be replayed later.
pub async fn a_stale_request_is_refused_and_holds_nothing<P: UnderTest>(kit: Kit<P>) {
    let key = secret(&kit);
    let tx = kit.begin().await;
    let body = prepare_body(&kit, &tx);
    let now = kit.subject().clock().now_ms();
    let stale = (401, "stale_request");
    for (at, when) in [
        (now - 2 * DEFAULT_MAX_SKEW_MS, "10 minutes ago"),
        (now + 2 * DEFAULT_MAX_SKEW_MS, "10 minutes ahead"),
    ] {
        let headers = signed(&key, tx.id.as_str(), at, &body);
        let what = format!("a prepare signed {when}");
        refused(&kit, "prepare", &headers, &body, stale, &what).await;
    }
    nothing_held(&kit, &tx, "stale prepares").await;
}

/// A request validly signed for one transaction whose body is another's is refused
/// (`wrong_transaction`) and holds nothing for either.
pub async fn a_request_signed_for_another_transaction_is_refused_and_holds_nothing<P: UnderTest>(
    kit: Kit<P>,
) {
    let key = secret(&kit);
    let (named, signed_for) = (kit.begin().await, kit.begin().await);
    let body = prepare_body(&kit, &named);
    let now = kit.subject().clock().now_ms();
    let headers = signed(&key, signed_for.id.as_str(), now, &body);
    let what = "a prepare of one transaction signed for another";
    let wrong = (401, "wrong_transaction");
    refused(&kit, "prepare", &headers, &body, wrong, what).await;
    nothing_held(&kit, &named, "the body's transaction").await;
    nothing_held(&kit, &signed_for, "the signed transaction").await;
}

/// A validly signed body that is not the call's request (not JSON, not an object, a field
/// missing, a transaction id that is not a UUID) is refused (`invalid_request`) and holds
/// nothing.
pub async fn a_malformed_body_is_refused_and_holds_nothing<P: UnderTest>(kit: Kit<P>) {
    let key = secret(&kit);
    let tx = kit.begin().await;
    let now = kit.subject().clock().now_ms();
    let mut missing: Value = serde_json::from_slice(&prepare_body(&kit, &tx)).expect("json");
    if let Some(fields) = missing.as_object_mut() {
        fields.remove("deadline");
    }
    let invalid = (400, "invalid_request");
    for (body, what) in [
        (b"prepare, please".to_vec(), "a body that is not JSON"),
        (b"[]".to_vec(), "a body that is not an object"),
        (
            serde_json::to_vec(&missing).expect("json"),
            "a body without its deadline",
        ),
    ] {
        let headers = signed(&key, tx.id.as_str(), now, &body);
        refused(&kit, "prepare", &headers, &body, invalid, what).await;
    }
    let mut not_uuid: Value = serde_json::from_slice(&prepare_body(&kit, &tx)).expect("json");
    not_uuid["txId"] = json!("order-42");
    let body = serde_json::to_vec(&not_uuid).expect("json");
    let headers = signed(&key, "order-42", now, &body);
    let what = "a body whose txId is not a UUID";
    refused(&kit, "prepare", &headers, &body, invalid, what).await;
    nothing_held(&kit, &tx, "malformed prepares").await;
}
