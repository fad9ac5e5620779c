//! A hot load on the local stack: many transactions at once on two accounts (`alice` and
//! `bob`), the default mode (`auto`), nothing marked hot anywhere (the demo marks no service, and
//! no request asks; docs/protocol.md, "Hot items, found by themselves"). Plain transfers between the two (native first, staged
//! where they meet contention) stand beside card top-ups (a custom participant: always staged,
//! their credits reserved), so the native attempts meet reservations on the items they write.
//! Every transaction is valid in any order, so every one must commit; once the stack has
//! finished, nothing may be held.
//!
//! On the engine under test (`twopc_tests::engine`), reached as the stack's `--dynamodb-endpoint`
//! so that the test can read the items' protocol attributes.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{call, free_port, interrupt, start, temp_dir, transfer};
use serde_json::{Value, json};
use twopc_core::ids::TxId;
use twopc_dynamo::items::item_state;

/// Clients sending at once, each one transaction after another...
const CLIENTS: usize = 12;
/// ...this many each: 120 transactions.
const ROUNDS: usize = 10;
/// Long enough that no deadline passes on a loaded 2-core machine: a deadline is not what is
/// tested here.
const TIMEOUT_MS: u64 = 30_000;

/// A top-up of `account` by 1, paid by card: staged (a custom participant takes part), its
/// credit reserved.
fn top_up(account: &str) -> Value {
    let amount: Value = serde_json::from_str("1.00").expect("an exact number");
    json!({"timeoutMs": TIMEOUT_MS, "participants": [
        {"participant": "accounts", "key": {"id": account}, "op": {"add": {"balance": 1}}},
        {"participant": "payments", "payload": {"card": "4242", "amount": amount}}]})
}

/// Client `c`'s transaction of round `r`: one in four a top-up (alternately alice's and
/// bob's), the others transfers of 1, alternately each way. Of the 120, 45 transfers leave
/// alice (100) and 45 leave bob (50): in any order neither balance goes below 55 or 5, so every
/// one is valid.
fn nth(c: usize, r: usize) -> (String, Value) {
    let n = c * ROUNDS + r;
    let (a, b) = if n.is_multiple_of(2) {
        ("alice", "bob")
    } else {
        ("bob", "alice")
    };
    if (c + r).is_multiple_of(4) {
        (format!("top-up of {a} #{n}"), top_up(a))
    } else {
        (format!("{a}->{b} #{n}"), transfer(a, b, 1, TIMEOUT_MS))
    }
}

/// The load: [`CLIENTS`] clients at once, each sending its rounds one after another; every
/// answer, (what it was, HTTP status, body).
async fn hot_load(url: &str) -> Vec<(String, u16, Value)> {
    let mut load = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let url = url.to_owned();
        load.spawn(async move {
            let mut answers = vec![];
            for r in 0..ROUNDS {
                let (what, body) = nth(c, r);
                let (status, body) = call(&url, "POST", "/transactions", None, Some(body))
                    .await
                    .unwrap_or_else(|e| panic!("{what}: no answer: {e}"));
                answers.push((what, status, body));
            }
            answers
        });
    }
    let mut answers = vec![];
    while let Some(done) = load.join_next().await {
        answers.extend(done.expect("a client"));
    }
    answers
}

/// What is still held on the accounts' items: (id, why) for each lock, placeholder, reservation
/// or busy escrow, read from the items' protocol attributes.
async fn held(client: &aws_sdk_dynamodb::Client, table: &str) -> Vec<(String, String)> {
    let scanned = client
        .scan()
        .table_name(table)
        .consistent_read(true)
        .send()
        .await
        .expect("scan");
    let mut held = vec![];
    for raw in scanned.items() {
        let state = item_state(raw).expect("an item the protocol reads");
        let id = format!("{:?}", raw.get("id"));
        if state.lock.is_some() || state.placeholder {
            held.push((id.clone(), "a lock".to_owned()));
        }
        if !state.reservations.is_empty() {
            held.push((
                id.clone(),
                format!("{} reservations", state.reservations.len()),
            ));
        }
        if state
            .escrow
            .values()
            .any(|e| e.count + e.floors + e.ceilings != 0)
        {
            held.push((id, format!("a busy escrow {:?}", state.escrow)));
        }
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_load_with_nothing_marked_commits_every_valid_transfer_and_leaves_nothing_held() {
    // GIVEN the stack in its default mode, nothing marked hot.
    let endpoint = twopc_tests::endpoint();
    let prefix = format!("h{}-", &TxId::random().as_str()[..8]);
    let data = temp_dir("hot");
    let serve = start(
        &data,
        free_port(),
        &["--dynamodb-endpoint", &endpoint, "--table-prefix", &prefix],
    )
    .await;
    let url = serve.url.clone();
    let client = twopc_dynamo::client(Some(&endpoint)).await;

    // WHEN every transaction of the hot load is in flight at once.
    let answers = hot_load(&url).await;

    // THEN every one is answered committed.
    let refused: Vec<_> = answers
        .iter()
        .filter(|(_, status, body)| *status != 200 || body["outcome"] != "committed")
        .collect();
    assert!(
        refused.is_empty(),
        "{} of {} valid transactions not committed: {refused:#?}",
        refused.len(),
        answers.len()
    );
    // AND the load was hot: native attempts met the top-ups' reservations, and the stack,
    // told nothing, sent transfers to reserve.
    let modes = transfer_modes(&answers);
    eprintln!("the transfers' items by mode: {modes:?}");
    assert!(
        modes.get("reserved").is_some_and(|&n| n > 0),
        "no transfer met contention: the load was not hot ({modes:?})"
    );

    // AND once the stack has finished them, nothing is pending, nothing held, and the balances
    // are exactly what every commit makes them.
    let table = format!("{prefix}accounts");
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, pending) = call(&url, "GET", "/transactions?status=pending", None, None)
            .await
            .expect("pending");
        let open = pending["transactions"]
            .as_array()
            .map_or(usize::MAX, Vec::len);
        let held = held(&client, &table).await;
        if open == 0 && held.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "60 s after the last answer: {open} pending, held: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await; // the work after the answers
    }
    let topped = |id: &str| {
        let named = |w: &String| w.starts_with(&format!("top-up of {id} "));
        answers.iter().filter(|(w, _, _)| named(w)).count() as i64
    };
    for (id, expected) in [
        ("alice", 100 + topped("alice")),
        ("bob", 50 + topped("bob")),
    ] {
        let (_, body) = call(
            &url,
            "GET",
            &format!("/local/items/accounts/{id}"),
            None,
            None,
        )
        .await
        .expect("item");
        assert_eq!(body["item"]["balance"], json!(expected), "{id}: {body}");
    }
    assert!(interrupt(serve).await.success(), "SIGINT stops serve");
    let _ = std::fs::remove_dir_all(&data);
}

/// The modes the transfers' items were written in (`exclusive`: native or locked; `reserved`:
/// contention found and routed around), counted.
fn transfer_modes(answers: &[(String, u16, Value)]) -> BTreeMap<String, usize> {
    let mut modes = BTreeMap::new();
    for (_, _, body) in answers.iter().filter(|(w, _, _)| !w.starts_with("top-up")) {
        for vote in body["participants"].as_array().into_iter().flatten() {
            let mode = vote["mode"].as_str().unwrap_or("none").to_owned();
            *modes.entry(mode).or_default() += 1;
        }
    }
    modes
}
