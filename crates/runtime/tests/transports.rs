//! The `lambda` and `http` transports against a loopback server that answers what each case
//! needs: replies, function errors in both of their shapes, refusals, silence, no listener.

use std::time::Duration;

use aws_sdk_lambda::config::{BehaviorVersion, Credentials, Region};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use twopc_core::ids::TxId;
use twopc_core::message::{CompleteReply, CompleteRequest, ParticipantCall, PrepareRequest};
use twopc_core::op::Operation;
use twopc_core::ports::{Transport, TransportError};
use twopc_core::record::{Target, Vote, VoteReason};
use twopc_runtime::transport::{HttpTransport, LambdaTransport};

const BIG: &str = "12345678901234567890123456789012345678";

/// A request as the server saw it.
#[derive(Debug)]
struct Seen {
    head: String,
    body: Vec<u8>,
}

impl Seen {
    fn request_line(&self) -> &str {
        self.head.lines().next().unwrap_or_default()
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// One canned answer: status, extra headers, body; `None` keeps the connection silent.
type Canned = Option<(u16, Vec<(&'static str, &'static str)>, String)>;

/// Serves `answers` in order, one per connection, on a loopback port.
async fn serve(answers: Vec<Canned>) -> (String, mpsc::UnboundedReceiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut held = vec![];
        for answer in answers {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let mut buf = vec![];
            let mut chunk = [0u8; 4096];
            let (head, body_start) = loop {
                let n = sock.read(&mut chunk).await.expect("read");
                assert!(n > 0, "client closed before sending a request");
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break (String::from_utf8_lossy(&buf[..i]).into_owned(), i + 4);
                }
            };
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            while buf.len() < body_start + length {
                let n = sock.read(&mut chunk).await.expect("read body");
                assert!(n > 0, "client closed mid-body");
                buf.extend_from_slice(&chunk[..n]);
            }
            let _ = tx.send(Seen {
                head,
                body: buf[body_start..body_start + length].to_vec(),
            });
            match answer {
                Some((status, headers, body)) => {
                    let mut out = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                        body.len()
                    );
                    for (k, v) in headers {
                        out.push_str(&format!("{k}: {v}\r\n"));
                    }
                    out.push_str("\r\n");
                    out.push_str(&body);
                    sock.write_all(out.as_bytes()).await.expect("write");
                }
                // Keep the socket open and say nothing: the caller's timeout must fire.
                None => held.push(sock),
            }
        }
        // Hold silent sockets until the test ends.
        std::future::pending::<()>().await;
    });
    (url, rx)
}

/// A loopback URL where nothing listens.
async fn closed_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", l.local_addr().expect("addr"));
    drop(l);
    url
}

fn lambda(url: &str, timeout: Duration) -> LambdaTransport {
    let conf = aws_sdk_lambda::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("k", "s", None, None, "test"))
        .endpoint_url(url)
        // One attempt per call: each case sees exactly the answer it set up.
        .retry_config(aws_sdk_lambda::config::retry::RetryConfig::disabled())
        .build();
    LambdaTransport::new(aws_sdk_lambda::Client::from_conf(conf), timeout)
}

fn prepare() -> PrepareRequest {
    PrepareRequest {
        tx_id: TxId::random(),
        deadline: 1_900_000_000_000,
        began: 1_899_999_995_000,
        key: [("id".to_owned(), json!("alice"))].into(),
        op: Operation::from_json(
            "op",
            &serde_json::from_str(&format!(r#"{{"add": {{"balance": {BIG}}}}}"#)).expect("json"),
        )
        .expect("op"),
        coordinator: "test".into(),
        payload: None,
        hot_until: None,
    }
}

fn complete() -> CompleteRequest {
    let p = prepare();
    CompleteRequest {
        tx_id: p.tx_id,
        deadline: p.deadline,
        began: p.began,
        key: p.key,
        op: p.op,
        prune: None,
        refused: false,
    }
}

fn function() -> Target {
    Target::Lambda {
        function: "accounts-participant".into(),
    }
}

fn ok(body: Value) -> Canned {
    Some((200, vec![], body.to_string()))
}

async fn expect_err<T: std::fmt::Debug>(r: Result<T, TransportError>) -> TransportError {
    r.expect_err("a transport error")
}

// ------------------------------------------------------------------------------ lambda

#[tokio::test]
async fn lambda_invokes_the_function_with_the_participant_call_and_reads_the_vote() {
    let (url, mut seen) = serve(vec![ok(json!({"vote": "yes"}))]).await;
    let t = lambda(&url, Duration::from_secs(5));
    let req = prepare();
    let reply = t.prepare(&function(), &req).await.expect("reply");
    assert!(reply.vote.is_yes(), "{:?}", reply.vote);
    let s = seen.recv().await.expect("a request");
    assert!(
        s.request_line()
            .starts_with("POST /2015-03-31/functions/accounts-participant/invocations"),
        "{}",
        s.request_line()
    );
    assert!(
        s.head
            .to_ascii_lowercase()
            .contains("x-amz-invocation-type: requestresponse"),
        "{}",
        s.head
    );
    // The payload is the wire form, numbers exact.
    let call = ParticipantCall::from_json(s.json()).expect("a participant call");
    assert_eq!(call, ParticipantCall::Prepare(req));
    assert!(String::from_utf8_lossy(&s.body).contains(BIG));
}

#[tokio::test]
async fn lambda_reads_no_votes_and_completion_replies() {
    let (url, _seen) = serve(vec![
        ok(json!({"vote": "no", "reason": "condition", "message": "balance too low"})),
        ok(json!({"result": "alreadyDone"})),
    ])
    .await;
    let t = lambda(&url, Duration::from_secs(5));
    let reply = t.prepare(&function(), &prepare()).await.expect("reply");
    assert_eq!(
        reply.vote,
        Vote::no(VoteReason::Condition, "balance too low")
    );
    let done = t.commit(&function(), &complete()).await.expect("reply");
    assert_eq!(done, CompleteReply::AlreadyDone);
}

#[tokio::test]
async fn a_function_error_is_a_transport_error_undetermined_unless_the_participant_refused() {
    let unhandled = vec![("x-amz-function-error", "Unhandled")];
    let (url, _seen) = serve(vec![
        Some((
            200,
            unhandled.clone(),
            r#"{"errorType":"Invalid","errorMessage":"missing \"action\""}"#.into(),
        )),
        Some((
            200,
            unhandled.clone(),
            r#"{"errorType":"Retryable","errorMessage":"throttled"}"#.into(),
        )),
        Some((
            200,
            unhandled.clone(),
            r#"{"errorType":"Fatal","errorMessage":"no such table"}"#.into(),
        )),
        Some((
            200,
            unhandled,
            r#"{"errorType":"Sandbox.Timedout","errorMessage":"Task timed out"}"#.into(),
        )),
    ])
    .await;
    let t = lambda(&url, Duration::from_secs(5));
    let e = expect_err(t.commit(&function(), &complete()).await).await;
    assert!(!e.undetermined, "{e}");
    assert!(e.message.contains("missing \"action\""), "{e}");
    let e = expect_err(t.commit(&function(), &complete()).await).await;
    assert!(!e.undetermined, "{e}");
    let e = expect_err(t.commit(&function(), &complete()).await).await;
    assert!(e.undetermined, "{e}");
    let e = expect_err(t.commit(&function(), &complete()).await).await;
    assert!(e.undetermined, "{e}");
    assert!(e.message.contains("Sandbox.Timedout"), "{e}");
}

#[tokio::test]
async fn an_emulators_http_500_function_error_is_read_the_same_way() {
    // cargo lambda watch answers a function error with a bare 500 and the error payload.
    let (url, _seen) = serve(vec![
        Some((
            500,
            vec![],
            r#"{"errorType":"Invalid","errorMessage":"bad op"}"#.into(),
        )),
        Some((
            500,
            vec![],
            r#"{"errorType":"Undetermined","errorMessage":"lost"}"#.into(),
        )),
    ])
    .await;
    let t = lambda(&url, Duration::from_secs(5));
    let e = expect_err(t.prepare(&function(), &prepare()).await).await;
    assert!(!e.undetermined, "{e}");
    assert!(e.message.contains("bad op"), "{e}");
    let e = expect_err(t.prepare(&function(), &prepare()).await).await;
    assert!(e.undetermined, "{e}");
}

#[tokio::test]
async fn lambda_refusals_did_nothing_and_service_failures_may_have() {
    let (url, _seen) = serve(vec![
        Some((
            404,
            vec![("x-amzn-errortype", "ResourceNotFoundException")],
            r#"{"Type":"User","message":"Function not found: accounts-participant"}"#.into(),
        )),
        Some((
            429,
            vec![("x-amzn-errortype", "TooManyRequestsException")],
            r#"{"Reason":"ReservedFunctionConcurrentInvocationLimitExceeded","message":"Rate exceeded"}"#.into(),
        )),
        Some((
            500,
            vec![("x-amzn-errortype", "ServiceException")],
            r#"{"message":"internal"}"#.into(),
        )),
        Some((200, vec![], "not a reply".into())),
    ])
    .await;
    let t = lambda(&url, Duration::from_secs(5));
    let e = expect_err(t.prepare(&function(), &prepare()).await).await;
    assert!(!e.undetermined, "{e}");
    assert!(e.message.contains("ResourceNotFoundException"), "{e}");
    assert!(e.source.is_some(), "the SDK error is kept as the source");
    let e = expect_err(t.prepare(&function(), &prepare()).await).await;
    assert!(!e.undetermined, "{e}");
    let e = expect_err(t.prepare(&function(), &prepare()).await).await;
    assert!(e.undetermined, "{e}");
    let e = expect_err(t.prepare(&function(), &prepare()).await).await;
    assert!(e.undetermined, "an unreadable reply may hide a write: {e}");
}

#[tokio::test]
async fn lambda_unreachable_is_determined_and_silence_times_out_undetermined() {
    let t = lambda(&closed_port().await, Duration::from_secs(5));
    let e = expect_err(t.prepare(&function(), &prepare()).await).await;
    assert!(!e.undetermined, "nothing was sent: {e}");

    let (url, _seen) = serve(vec![None]).await;
    let t = lambda(&url, Duration::from_millis(300));
    let e = expect_err(t.commit(&function(), &complete()).await).await;
    assert!(e.undetermined, "{e}");
    assert!(e.message.contains("timed out"), "{e}");
}

#[tokio::test]
async fn lambda_refuses_other_targets() {
    let t = lambda("http://127.0.0.1:9", Duration::from_secs(1));
    let e = expect_err(
        t.prepare(
            &Target::Http {
                url: "http://x".into(),
            },
            &prepare(),
        )
        .await,
    )
    .await;
    assert!(!e.undetermined);
}

// ------------------------------------------------------------------------------ http

fn service(url: &str) -> Target {
    Target::Http {
        url: format!("{url}/"),
    }
}

#[tokio::test]
async fn http_posts_each_action_to_its_path_with_the_request_as_json() {
    let (url, mut seen) = serve(vec![
        ok(json!({"vote": "yes", "prune": {"ids": [], "horizon": 1_899_999_990_000_u64}})),
        ok(json!({"result": "done"})),
        ok(json!({"result": "alreadyDone"})),
    ])
    .await;
    let t = HttpTransport::new(Duration::from_secs(5));
    let req = prepare();
    let reply = t.prepare(&service(&url), &req).await.expect("vote");
    assert!(reply.vote.is_yes(), "{:?}", reply.vote);
    assert_eq!(
        reply.prune.map(|p| p.horizon),
        Some(1_899_999_990_000),
        "the prune hint's number survives the transport"
    );
    assert_eq!(
        t.commit(&service(&url), &complete()).await.expect("done"),
        CompleteReply::Done
    );
    assert_eq!(
        t.abort(&service(&url), &complete()).await.expect("done"),
        CompleteReply::AlreadyDone
    );
    let first = seen.recv().await.expect("prepare");
    assert!(
        first.request_line().starts_with("POST /prepare "),
        "{}",
        first.request_line()
    );
    assert!(
        first
            .head
            .to_ascii_lowercase()
            .contains("content-type: application/json")
    );
    let body: PrepareRequest = serde_json::from_slice(&first.body).expect("a prepare request");
    assert_eq!(body, req);
    assert!(String::from_utf8_lossy(&first.body).contains(BIG));
    assert!(
        seen.recv()
            .await
            .expect("commit")
            .request_line()
            .starts_with("POST /commit ")
    );
    assert!(
        seen.recv()
            .await
            .expect("abort")
            .request_line()
            .starts_with("POST /abort ")
    );
}

#[tokio::test]
async fn http_errors_are_undetermined_only_when_the_service_may_have_acted() {
    let (url, _seen) = serve(vec![
        Some((400, vec![], r#"{"code":"invalid"}"#.into())),
        Some((503, vec![], "busy".into())),
        Some((200, vec![], "{}".into())),
        None,
    ])
    .await;
    let t = HttpTransport::new(Duration::from_millis(500));
    let e = expect_err(t.commit(&service(&url), &complete()).await).await;
    assert!(!e.undetermined, "{e}");
    assert!(e.message.contains("400"), "{e}");
    let e = expect_err(t.commit(&service(&url), &complete()).await).await;
    assert!(e.undetermined, "{e}");
    let e = expect_err(t.commit(&service(&url), &complete()).await).await;
    assert!(e.undetermined, "an unreadable reply may hide a write: {e}");
    let e = expect_err(t.commit(&service(&url), &complete()).await).await;
    assert!(e.undetermined, "{e}");
    assert!(e.message.contains("no reply within"), "{e}");

    let e = expect_err(t.prepare(&service(&closed_port().await), &prepare()).await).await;
    assert!(!e.undetermined, "nothing was sent: {e}");
}

// ------------------------------------------------------------------------------ tracing

const TRACE: &str = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";

/// The `x-amzn-trace-id` header a request carried, if any.
fn trace_header(s: &Seen) -> Option<String> {
    s.head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(twopc_runtime::trace::HEADER)
            .then(|| v.trim().to_owned())
    })
}

#[tokio::test]
async fn both_transports_carry_the_callers_trace_so_a_transaction_is_one_trace() {
    use twopc_runtime::trace::within;
    let (url, mut seen) = serve(vec![
        ok(json!({"vote": "yes"})),
        ok(json!({"vote": "yes"})),
        ok(json!({"result": "done"})),
        ok(json!({"result": "done"})),
    ])
    .await;
    let (l, h) = (
        lambda(&url, Duration::from_secs(5)),
        HttpTransport::new(Duration::from_secs(5)),
    );
    within(Some(TRACE.to_owned()), async {
        l.prepare(&function(), &prepare()).await.expect("lambda");
        h.prepare(&service(&url), &prepare()).await.expect("http");
    })
    .await;
    // Outside a traced invocation, none is made up.
    within(None, async {
        l.commit(&function(), &complete()).await.expect("lambda");
        h.commit(&service(&url), &complete()).await.expect("http");
    })
    .await;
    for expected in [Some(TRACE), Some(TRACE), None, None] {
        let s = seen.recv().await.expect("a request");
        assert_eq!(trace_header(&s).as_deref(), expected, "{}", s.head);
    }
}

#[tokio::test]
async fn the_dispatcher_counts_every_violation_its_participants_answer() {
    use twopc_core::direct::DirectTransport;
    use twopc_core::memory::{MemoryItems, MemoryTxLog};
    use twopc_core::participant::{Participant, ParticipantConfig};
    use twopc_core::ports::ManualClock;
    use twopc_runtime::telemetry::Metrics;
    use twopc_runtime::transport::DispatchTransport;

    let violation = || ok(json!({"result": "violation", "message": "no lock, no fence entry"}));
    let (url, _seen) = serve(vec![violation(), violation()]).await;
    let direct = DirectTransport::new(Participant::new(
        MemoryItems::default(),
        MemoryTxLog::default(),
        ManualClock::new(0),
        ParticipantConfig::default(),
    ));
    let metrics = Metrics::in_memory("coordinator");
    let t = DispatchTransport::new(
        direct,
        lambda(&url, Duration::from_secs(5)),
        HttpTransport::new(Duration::from_secs(5)),
    )
    .with_metrics(metrics.clone());
    let counted = |m: &Metrics| {
        m.lines()
            .iter()
            .filter(|l| l.get("ProtocolViolations").is_some())
            .count()
    };

    // A participant function's violation is counted here, once (the function does not count).
    let reply = t.commit(&function(), &complete()).await.expect("a reply");
    assert!(
        matches!(reply, CompleteReply::Violation { .. }),
        "{reply:?}"
    );
    assert_eq!(counted(&metrics), 1);
    // So is an http participant's.
    let reply = t
        .abort(&Target::Http { url: url.clone() }, &complete())
        .await
        .expect("a reply");
    assert!(
        matches!(reply, CompleteReply::Violation { .. }),
        "{reply:?}"
    );
    assert_eq!(counted(&metrics), 2);
}
