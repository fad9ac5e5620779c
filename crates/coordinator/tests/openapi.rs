//! Every answer the coordinator gives is one `docs/openapi.json` describes.
//!
//! The real handler is driven, against DynamoDB Local, into every code of
//! `twopc_core::api::codes` it can answer (every refusal, every abort a request can cause),
//! plus the answers of the core's `api` module for the states a request cannot reach on cue
//! (a deadline passing mid-prepare, a late prepare, a completion cut short). Each answer
//! (method, path, status, body) then goes to `tests/openapi/validate.py`, which validates it
//! with openapi-schema-validator against the response the document declares for its operation
//! and status (and checks the document, the events and the examples of the README and docs/ too).

use std::collections::{BTreeMap, BTreeSet};

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderValue, Method};
use coordinator::handler::{App, handle};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};
use twopc_core::api::{self, codes};
use twopc_core::coordinator::{Outcome, Submitted};
use twopc_core::ids::TxId;
use twopc_core::op::Mode;
use twopc_core::ports::{Clock, SystemClock};
use twopc_core::record::{Target, Vote, VoteReason};
use twopc_core::request::{Limits, TxRequest};
use twopc_core::service::{KeySchema, ServiceConfig};
use twopc_core::status::TxStatus;
use twopc_function::var;
use twopc_runtime::Clients;
use twopc_runtime::config::{CoordinatorSettings, Settings};
use twopc_runtime::telemetry::Metrics;
use twopc_tests::openapi::{answer, validate_answers};
use twopc_tests::{World, prepare_req};

const POST: &str = include_str!("../../../events/coordinator-post-transaction.json");
const GET: &str = include_str!("../../../events/coordinator-get-transaction.json");

/// Codes no request can make the handler answer on cue: the core's `api` answers them here
/// from records in those states (a new code belongs here only for the same reason).
const ONLY_FROM_RECORDS: [codes::Code; 4] = [
    codes::VOTE_EXPIRED,
    codes::VOTE_FENCED,
    codes::VOTE_CLOCK_SKEW,
    codes::ABORTED,
];

fn event(text: &str) -> ApiGatewayProxyRequest {
    serde_json::from_str(text).expect("an API Gateway REST event")
}

fn request(method: Method, path: &str) -> ApiGatewayProxyRequest {
    let mut e = event(GET);
    e.http_method = method;
    e.path = Some(path.to_owned());
    e.path_parameters = Default::default();
    e
}

fn post(body: &str, key: Option<&str>) -> ApiGatewayProxyRequest {
    let mut e = event(POST);
    e.body = Some(body.to_owned());
    e.headers.remove("idempotency-key");
    e.multi_value_headers.remove("idempotency-key");
    if let Some(k) = key {
        e.headers.insert(
            "idempotency-key",
            HeaderValue::from_str(k).expect("a header"),
        );
    }
    e
}

/// `GET /transactions` with these query parameters.
fn list(query: &[(&str, &str)]) -> ApiGatewayProxyRequest {
    let mut e = request(Method::GET, "/transactions");
    let params: std::collections::HashMap<String, Vec<String>> = query
        .iter()
        .map(|(k, v)| ((*k).to_owned(), vec![(*v).to_owned()]))
        .collect();
    e.query_string_parameters = params.clone().into();
    e.multi_value_query_string_parameters = params.into();
    e
}

/// An operator API call, built into its request when sent (a request is large: a list of them
/// would crowd the test's stack).
type Call = (Method, String, &'static [(&'static str, &'static str)]);

fn operator(method: Method, path: &str, query: &'static [(&'static str, &'static str)]) -> Call {
    (method, path.to_owned(), query)
}

/// A request to the operator API as an operator (an IAM caller), with these query parameters.
fn operator_request((method, path, query): Call) -> ApiGatewayProxyRequest {
    let mut e = request(method, &path);
    e.request_context.identity.user_arn = Some("arn:aws:iam::123456789012:user/ops".into());
    let params: std::collections::HashMap<String, Vec<String>> = query
        .iter()
        .map(|(k, v)| ((*k).to_owned(), vec![(*v).to_owned()]))
        .collect();
    e.query_string_parameters = params.clone().into();
    e.multi_value_query_string_parameters = params.into();
    e
}

/// Every answer of the operator API: listings, counts, a story, an item, both actions run and
/// refused, and each refusal of a bad request. `done` is a committed transaction.
async fn operator_answers(a: &mut Answers, live: &App, w: &World, done: &str) {
    let mut anonymous = operator_request(operator(Method::GET, "/operator/transactions", &[]));
    anonymous.request_context.identity.user_arn = None;
    anonymous.request_context.identity.caller = None;
    a.expect(live, anonymous, 403, Some(codes::OPERATOR_FORBIDDEN))
        .await;
    // An undecided transaction before its deadline, and one past it.
    let record = |deadline: u64| {
        let mut r = twopc_core::record::TxRecord::never_began(&TxId::random(), now_ms());
        r.status = TxStatus::Preparing;
        r.deadline = deadline;
        r.begun_by = "openapi-test".into();
        r
    };
    let (live_one, stuck) = (record(now_ms() + 60_000), record(now_ms() - 1_000));
    for r in [&live_one, &stuck] {
        twopc_core::ports::TxLog::create(&w.log, r)
            .await
            .expect("create");
    }
    let (live_id, stuck_id) = (live_one.tx_id.to_string(), stuck.tx_id.to_string());
    let tx = |id: &str, rest: &str| format!("/operator/transactions/{id}{rest}");
    let ok = [
        operator(Method::GET, "/operator/transactions", &[]),
        operator(
            Method::GET,
            "/operator/transactions",
            &[("overdue", "true"), ("limit", "5")],
        ),
        operator(
            Method::GET,
            "/operator/transactions",
            &[("status", "COMMITTED"), ("since", "0")],
        ),
        operator(
            Method::GET,
            "/operator/transactions",
            &[("participant", "accounts"), ("key", r#"{"id":"alice"}"#)],
        ),
        operator(Method::GET, "/operator/counts", &[]),
        operator(Method::GET, &tx(done, ""), &[]),
        operator(Method::GET, &tx(&stuck_id, ""), &[]),
        operator(
            Method::GET,
            "/operator/items/accounts",
            &[("key", r#"{"id":"alice"}"#)],
        ),
        operator(
            Method::GET,
            "/operator/items/accounts",
            &[("key", r#"{"id":"carol"}"#)],
        ),
        operator(Method::POST, &tx(&stuck_id, "/recover"), &[]),
    ];
    for call in ok {
        a.expect(live, operator_request(call), 200, None).await;
    }
    let refused = [
        (
            operator(Method::GET, "/operator/transactions", &[("status", "DONE")]),
            codes::INVALID_OPERATOR_QUERY,
        ),
        (
            operator(Method::GET, "/operator/transactions", &[("since", "1")]),
            codes::INVALID_OPERATOR_QUERY,
        ),
        (
            operator(
                Method::GET,
                "/operator/transactions",
                &[("key", r#"{"id":"a"}"#)],
            ),
            codes::INVALID_OPERATOR_QUERY,
        ),
        (
            operator(
                Method::GET,
                "/operator/transactions",
                &[("participant", "")],
            ),
            codes::INVALID_OPERATOR_QUERY,
        ),
        (
            operator(Method::GET, "/operator/counts", &[("since", "yesterday")]),
            codes::INVALID_OPERATOR_QUERY,
        ),
        (
            operator(Method::GET, "/operator/items/accounts", &[]),
            codes::INVALID_OPERATOR_QUERY,
        ),
        (
            operator(
                Method::GET,
                "/operator/items/payments",
                &[("key", r#"{"id":"a"}"#)],
            ),
            codes::ITEM_NOT_READABLE,
        ),
        (
            operator(
                Method::GET,
                "/operator/items/ledger",
                &[("key", r#"{"id":"a"}"#)],
            ),
            codes::UNKNOWN_PARTICIPANT,
        ),
        (
            operator(Method::GET, &tx("not-a-uuid", ""), &[]),
            codes::INVALID_TX_ID,
        ),
        (
            operator(Method::POST, &tx("not-a-uuid", "/abort"), &[]),
            codes::INVALID_TX_ID,
        ),
        (
            operator(Method::GET, &tx(&TxId::random().to_string(), ""), &[]),
            codes::NOT_FOUND,
        ),
        (
            operator(
                Method::POST,
                &tx(&TxId::random().to_string(), "/recover"),
                &[],
            ),
            codes::NOT_FOUND,
        ),
        (
            operator(Method::POST, &tx(&live_id, "/abort"), &[]),
            codes::NOT_OVERDUE,
        ),
        (
            operator(Method::POST, &tx(done, "/abort"), &[]),
            codes::ALREADY_DECIDED,
        ),
        (
            operator(Method::POST, &tx(done, "/recover"), &[]),
            codes::ALREADY_ENDED,
        ),
        (
            operator(Method::POST, &tx(done, "/explode"), &[]),
            codes::NOT_FOUND,
        ),
        (
            operator(Method::DELETE, "/operator/transactions", &[]),
            codes::METHOD_NOT_ALLOWED,
        ),
        (
            operator(Method::GET, &tx(done, "/abort"), &[]),
            codes::METHOD_NOT_ALLOWED,
        ),
    ];
    for (call, code) in refused {
        a.expect(live, operator_request(call), code.status, Some(code))
            .await;
    }
}

fn get(id: &str) -> ApiGatewayProxyRequest {
    let mut e = event(GET);
    e.path = Some(format!("/transactions/{id}"));
    e.path_parameters = [("id".to_owned(), id.to_owned())].into();
    e
}

async fn app(env: BTreeMap<&'static str, String>) -> App {
    let config = CoordinatorSettings::from_lookup(|name| env.get(name).cloned()).expect("config");
    let clients = Clients::load(&config).await;
    App::new(&config, &clients, Metrics::in_memory("coordinator"))
}

/// `accounts` and `wallets` on the world's tables; `payments` a custom participant at an
/// address where nothing listens.
fn services(w: &World) -> Value {
    json!({
        "accounts": {"target": {"transport": "direct", "table": w.accounts}, "key": {"hash": {"name": "id", "type": "S"}}},
        "wallets": {"target": {"transport": "direct", "table": w.wallets}, "key": {"hash": {"name": "id", "type": "S"}}},
        "payments": {"kind": "custom", "target": {"transport": "http", "url": "http://127.0.0.1:9"}},
    })
}

/// The answers collected, as the validator reads them, and which codes the handler gave.
#[derive(Default)]
struct Answers {
    all: Vec<Value>,
    from_handler: BTreeSet<String>,
    from_records: BTreeSet<String>,
}

impl Answers {
    /// Sends `req` to the handler; the answer must have `status` and `code` (`None`: no code).
    async fn expect(
        &mut self,
        app: &App,
        req: ApiGatewayProxyRequest,
        status: u16,
        code: Option<codes::Code>,
    ) -> Value {
        let (method, path) = (
            req.http_method.to_string(),
            req.path.clone().unwrap_or_default(),
        );
        let r = handle(app, LambdaEvent::new(req, Context::default()))
            .await
            .unwrap_or_else(|never| match never {});
        let body: Value = match r.body {
            Some(Body::Text(t)) => serde_json::from_str(&t).expect("a JSON body"),
            other => panic!("{method} {path}: expected a text body, got {other:?}"),
        };
        assert_eq!(
            (r.status_code, body["code"].as_str()),
            (i64::from(status), code.map(|c| c.name)),
            "{method} {path}: {body}"
        );
        if let Some(c) = code {
            self.from_handler.insert(c.name.to_owned());
        }
        self.all.push(answer(&method, &path, status, &body));
        body
    }

    /// An answer of the core's `api` module, as the handler would send it for `POST`.
    fn add_api_answer(&mut self, given: api::Answer) {
        if let Some(code) = given.body["code"].as_str() {
            self.from_records.insert(code.to_owned());
        }
        self.all
            .push(answer("POST", "/transactions", given.status, &given.body));
    }
}

fn now_ms() -> u64 {
    SystemClock.now_ms()
}

fn entry(participant: &str, id: &str, op: Value) -> Value {
    json!({"participant": participant, "key": {"id": id}, "op": op})
}

fn body(entries: &[Value]) -> String {
    json!({ "participants": entries }).to_string()
}

#[tokio::test]
async fn every_answer_of_the_coordinator_is_declared_in_the_api_document() {
    // GIVEN alice with 100, bob's wallet, an item whose balance is not a number, and carol
    // locked by a live transaction that never began at the coordinator.
    let w = World::new().await;
    w.seed("accounts", "alice", json!({"balance": 100})).await;
    w.seed("accounts", "odd", json!({"balance": "ten"})).await;
    w.seed("accounts", "carol", json!({"balance": 5})).await;
    let huge: Value = serde_json::from_str("9E+125").expect("the largest magnitude");
    w.seed("accounts", "huge", json!({"balance": huge})).await;
    w.seed("wallets", "bob", json!({"balance": 0})).await;
    let holder = TxId::random();
    let held = twopc_core::message::PrepareRequest {
        // Begun now (within the participant's clock margin), live for a minute.
        began: w.clock.now_ms(),
        ..prepare_req(
            &holder,
            now_ms() + 60_000,
            "carol",
            json!({"set": {"note": "held"}}),
        )
    };
    assert!(
        w.prepare("accounts", &held).await.vote.is_yes(),
        "carol is locked"
    );
    let live = app([
        (var::TRANSACTIONS_TABLE, w.tx_table.clone()),
        (var::SERVICES, services(&w).to_string()),
        (var::DYNAMODB_ENDPOINT, twopc_tests::endpoint()),
    ]
    .into())
    .await;
    let mut a = Answers::default();

    // WHEN every operation is asked to commit, read, and refuse for every reason it has
    let done = a.expect(&live, event(POST), 200, None).await;
    let id = done["txId"].as_str().expect("txId").to_owned();
    a.expect(&live, get(&id), 200, None).await;
    a.expect(
        &live,
        get(&TxId::random().to_string()),
        404,
        Some(codes::NOT_FOUND),
    )
    .await;
    a.expect(&live, get("not-a-uuid"), 400, Some(codes::INVALID_TX_ID))
        .await;
    a.expect(&live, list(&[("status", "pending")]), 200, None)
        .await;
    a.expect(
        &live,
        list(&[("status", "pending"), ("limit", "0")]),
        400,
        Some(codes::INVALID_LISTING),
    )
    .await;
    // A well-formed cursor past the overdue bound: an empty last page, never 503.
    let past_now = format!("{}.{}", u64::MAX, TxId::random());
    let page = a
        .expect(
            &live,
            list(&[
                ("status", "pending"),
                ("overdue", "true"),
                ("next", &past_now),
            ]),
            200,
            None,
        )
        .await;
    assert_eq!(page, json!({"transactions": []}));
    a.expect(
        &live,
        request(Method::GET, "/nope"),
        404,
        Some(codes::NOT_FOUND),
    )
    .await;
    a.expect(
        &live,
        request(Method::DELETE, "/transactions"),
        405,
        Some(codes::METHOD_NOT_ALLOWED),
    )
    .await;
    a.expect(
        &live,
        request(Method::PUT, &format!("/transactions/{id}")),
        405,
        Some(codes::METHOD_NOT_ALLOWED),
    )
    .await;

    let refused = |body: &str| post(body, None);
    let debit = entry("accounts", "alice", json!({"add": {"balance": -1}}));
    let pay = json!({"participant": "payments", "payload": {"card": "4242", "amount": 9.99}});
    let many: Vec<Value> = (0..=Limits::default().max_participants)
        .map(|i| entry("accounts", &format!("a{i}"), json!({"add": {"n": 1}})))
        .collect();
    let mut base64 = post(&body(std::slice::from_ref(&debit)), None);
    base64.is_base64_encoded = true;
    let mut bad_bytes = post(&body(std::slice::from_ref(&debit)), None);
    bad_bytes.headers.insert(
        "idempotency-key",
        HeaderValue::from_bytes(&[0xff]).expect("opaque bytes"),
    );
    let cases = [
        (refused("{\"participants\": ["), codes::INVALID_JSON),
        (refused(""), codes::INVALID_JSON),
        (base64, codes::INVALID_JSON),
        (
            refused(&format!("{{\"pad\": \"{}\"}}", "x".repeat(70_000))),
            codes::REQUEST_TOO_LARGE,
        ),
        (refused("[]"), codes::INVALID_REQUEST),
        (refused(r#"{"participants": []}"#), codes::INVALID_REQUEST),
        (
            refused(&body(&[entry("ledger", "a", json!({"delete": true}))])),
            codes::UNKNOWN_PARTICIPANT,
        ),
        (
            refused(&body(&[
                json!({"participant": "accounts", "key": {"id": 1}, "op": {"delete": true}}),
            ])),
            codes::INVALID_KEY,
        ),
        (
            refused(&body(&[debit.clone(), debit.clone()])),
            codes::DUPLICATE_ITEM,
        ),
        (
            refused(&body(&[pay.clone(), pay.clone()])),
            codes::DUPLICATE_PARTICIPANT,
        ),
        (refused(&body(&many)), codes::TOO_MANY_PARTICIPANTS),
        (
            refused(&body(&[entry(
                "accounts",
                "a",
                json!({"add": {"b": 1}, "require": {"b": {"between": [1, 2]}}}),
            )])),
            codes::INVALID_OPERATION,
        ),
        (
            refused(&body(&[entry(
                "accounts",
                "a",
                json!({"set": {"lock": 1}}),
            )])),
            codes::INVALID_ATTRIBUTE_NAME,
        ),
        (
            refused(
                r#"{"participants": [{"participant": "accounts", "key": {"id": "a"}, "op": {"add": {"b": 123456789012345678901234567890123456789}}}]}"#,
            ),
            codes::INVALID_NUMBER,
        ),
        (
            refused(
                r#"{"participants": [{"participant": "accounts", "key": {"id": "huge"}, "op": {"add": {"balance": 9E+125}}}]}"#,
            ),
            codes::INVALID_FOR_STORE,
        ),
        (
            refused(&body(&[
                json!({"participant": "accounts", "key": {"id": "a"}, "payload": 1}),
            ])),
            codes::WRONG_PARTICIPANT_KIND,
        ),
        (
            refused(&body(&[json!({"participant": "payments"})])),
            codes::INVALID_PAYLOAD,
        ),
        (
            refused(&json!({"participants": [debit], "timeoutMs": 10}).to_string()),
            codes::INVALID_TIMEOUT,
        ),
        (
            post(r#"{"participants": []}"#, Some("has space")),
            codes::INVALID_IDEMPOTENCY_KEY,
        ),
        (bad_bytes, codes::INVALID_IDEMPOTENCY_KEY),
        (
            post(
                &body(&[entry("wallets", "bob", json!({"add": {"balance": 1}}))]),
                Some("order-42"),
            ),
            codes::IDEMPOTENCY_KEY_REUSED,
        ),
    ];
    for (req, code) in cases {
        a.expect(&live, req, code.status, Some(code)).await;
    }

    // ... and to abort, once for each reason a request can cause.
    let aborts = [
        (
            entry(
                "accounts",
                "alice",
                json!({"add": {"balance": -100}, "require": {"balance": {"gte": 100}}}),
            ),
            codes::VOTE_CONDITION,
        ),
        (
            entry("accounts", "nobody", json!({"set": {"owner": "Nobody"}})),
            codes::VOTE_NOT_FOUND,
        ),
        (
            entry("accounts", "odd", json!({"add": {"balance": 1}})),
            codes::VOTE_INVALID,
        ),
        (
            entry("accounts", "carol", json!({"set": {"note": "mine"}})),
            codes::VOTE_CONFLICT,
        ),
        (pay, codes::VOTE_UNREACHABLE),
    ];
    for (e, code) in aborts {
        let answer = a
            .expect(&live, post(&body(&[e]), None), 409, Some(code))
            .await;
        // ABORTING when the abort could not reach the participant either (the sweeper ends it).
        assert!(
            ["ABORTED", "ABORTING"].contains(&answer["status"].as_str().unwrap_or_default()),
            "{answer}"
        );
    }

    // ... and the operator API: without an operator's identity, then as an operator.
    Box::pin(operator_answers(&mut a, &live, &w, &id)).await;

    // ... and with the transaction store out of reach.
    let offline = app([
        (var::TRANSACTIONS_TABLE, "tx".to_owned()),
        (var::SERVICES, services(&w).to_string()),
        (var::DYNAMODB_ENDPOINT, "http://127.0.0.1:9".to_owned()),
    ]
    .into())
    .await;
    let unavailable = a
        .expect(&offline, event(POST), 503, Some(codes::UNAVAILABLE))
        .await;
    assert!(unavailable["txId"].is_string(), "{unavailable}");
    a.expect(&offline, get(&id), 503, Some(codes::UNAVAILABLE))
        .await;
    a.expect(
        &offline,
        list(&[("status", "pending")]),
        503,
        Some(codes::UNAVAILABLE),
    )
    .await;

    // ... and the answers for records no request reaches on cue.
    let table = ServiceConfig::table(
        Target::Direct {
            table: w.accounts.clone(),
        },
        KeySchema::string_hash("id"),
    );
    let request = TxRequest::parse(
        &json!({"participants": [entry("accounts", "alice", json!({"add": {"balance": 1}}))]}),
        &[("accounts".to_owned(), table)].into(),
        &Limits::default(),
    )
    .expect("valid");
    let begun = request.begin(TxId::random(), None, "test".into(), now_ms());
    let yes = [Vote::yes(Mode::Reserved)];
    a.add_api_answer(api::submitted(&Submitted::of(begun.clone())));
    a.add_api_answer(api::submitted(&Submitted::of(begun.moved(
        TxStatus::Committing,
        Some(&yes),
        now_ms(),
    ))));
    // A staged commit as its stager answers it: committed, the record still STAGING.
    let mut staging = begun.clone();
    staging.status = TxStatus::Staging;
    staging.votes = yes.to_vec();
    a.add_api_answer(api::submitted(&Submitted {
        record: staging,
        outcome: Outcome::Committed,
    }));
    for (reason, message) in [
        (
            VoteReason::Expired,
            "the transaction's deadline passed 3 ms ago",
        ),
        (
            VoteReason::Fenced,
            "this transaction already ended on this item",
        ),
        (
            VoteReason::ClockSkew,
            "the transaction began 30000 ms ahead of this participant's clock (at most 10000 ms, TWOPC_FENCE_MARGIN_MS): the coordinator's clock runs ahead",
        ),
    ] {
        let no = [Vote::no(reason, message)];
        a.add_api_answer(api::submitted(&Submitted::of(begun.moved(
            TxStatus::Aborted,
            Some(&no),
            now_ms(),
        ))));
    }
    a.add_api_answer(api::submitted(&Submitted::of(begun.moved(
        TxStatus::Aborting,
        None,
        now_ms(),
    ))));

    // THEN every code of the API was answered, by the handler but for those only records reach,
    let only_records: BTreeSet<String> = ONLY_FROM_RECORDS
        .iter()
        .map(|c| c.name.to_owned())
        .collect();
    for code in codes::REFUSALS.iter().chain(codes::ABORTS) {
        let (want, got) = if only_records.contains(code.name) {
            ("the core's api module", &a.from_records)
        } else {
            ("the handler", &a.from_handler)
        };
        assert!(
            got.contains(code.name),
            "no answer of {want} carried {code}: add a case that makes it"
        );
    }
    // AND each answer is one the document declares, as openapi-schema-validator judges it.
    validate_answers(&a.all);
}
