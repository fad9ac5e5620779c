//! The `twopc` command line as a user runs it: its exit codes, its text and `--json` output, its
//! errors (each a JSON `{"code", "message"}` with `--json`), the local-only commands refusing a
//! deployed stack, and SigV4 signing of a deployed stack's requests with the standard AWS
//! credentials.

mod common;

use std::process::Stdio;

use axum::http::HeaderMap;
use common::{call, start_on_shared};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {:?}", self.stdout))
    }
}

/// Runs `twopc ARGS` with `stdin`, the AWS chain pointed at static test credentials.
async fn twopc(args: &[&str], stdin: &str) -> Ran {
    let mut child = Command::new(env!("CARGO_BIN_EXE_twopc"))
        .args(args)
        .env_remove("TWOPC_URL")
        .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        .env(
            "AWS_SECRET_ACCESS_KEY",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        )
        .env("AWS_REGION", "us-east-1")
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn twopc");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.as_bytes())
        .await
        .expect("write stdin");
    drop(input);
    let out = child.wait_with_output().await.expect("twopc runs");
    Ran {
        code: out.status.code().expect("an exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_answer_with_exit_codes_text_and_json_and_errors_carry_codes() {
    let (serve, _data) = start_on_shared("cli", &[]).await;
    let url = serve.url.as_str();

    // A transfer that commits: exit 0, the outcome as text, then as the API's JSON.
    let ran = twopc(
        &[
            "--url", url, "transfer", "--from", "alice", "--to", "bob", "--amount", "2.50",
        ],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stdout.starts_with("COMMITTED  transaction "),
        "{}",
        ran.stdout
    );
    let ran = twopc(
        &[
            "--url", url, "--json", "transfer", "--from", "alice", "--to", "bob", "--amount", "1",
        ],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let answer = ran.json();
    assert_eq!(answer["status"], "COMMITTED");
    let tx = answer["txId"].as_str().expect("txId").to_owned();
    let (_, read) = call(url, "GET", &format!("/transactions/{tx}"), None, None)
        .await
        .expect("read back");
    assert_eq!(read["status"], "COMMITTED", "the CLI's answer is the API's");

    // status of it: exit 0; an overdraft aborts: exit 1, the reason in the JSON.
    let ran = twopc(&["--url", url, "status", &tx], "").await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(ran.stdout.contains(&tx), "{}", ran.stdout);
    let ran = twopc(
        &[
            "--url", url, "--json", "transfer", "--from", "carol", "--to", "bob", "--amount",
            "1000",
        ],
        "",
    )
    .await;
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(
        (ran.json()["status"].as_str(), ran.json()["code"].as_str()),
        (Some("ABORTED"), Some("condition"))
    );

    // Errors: a refusal of the API, bad input caught before sending, an unknown transaction,
    // an unreachable stack; each exit 2 with its code in JSON, and a line on stderr without.
    let cases: [(&[&str], &str, &str); 5] = [
        (
            &["submit", "-"],
            r#"{"participants": [{"participant": "nope", "key": {"id": "x"}, "op": {"add": {"n": 1}}}]}"#,
            "unknown_participant",
        ),
        (&["submit", "-"], "not json", "invalid_json"),
        (
            &["transfer", "--from", "a", "--to", "b", "--amount", "1e"],
            "",
            "invalid_number",
        ),
        (
            &["status", "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69"],
            "",
            "not_found",
        ),
        (&["get", "accounts", "nobody"], "", "not_found"),
    ];
    for (args, stdin, code) in cases {
        let mut with_url = vec!["--url", url, "--json"];
        with_url.extend_from_slice(args);
        let ran = twopc(&with_url, stdin).await;
        assert_eq!(ran.code, 2, "{args:?}: {}", ran.stdout);
        assert_eq!(ran.json()["code"], code, "{args:?}");
        assert!(
            ran.json()["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        let ran = twopc(
            &with_url[..2]
                .iter()
                .chain(args)
                .copied()
                .collect::<Vec<_>>(),
            stdin,
        )
        .await;
        assert_eq!((ran.code, ran.stdout.as_str()), (2, ""), "{args:?}");
        assert!(
            ran.stderr.contains(code) || ran.stderr.starts_with("twopc: "),
            "{args:?}: {}",
            ran.stderr
        );
    }
    let ran = twopc(
        &["--url", "http://127.0.0.1:1", "--json", "status", &tx],
        "",
    )
    .await;
    assert_eq!(
        (ran.code, ran.json()["code"].as_str()),
        (2, Some("unreachable"))
    );
    assert!(interrupt_ok(serve).await);
}

async fn interrupt_ok(serve: common::Serve) -> bool {
    common::interrupt(serve).await.success()
}

#[tokio::test]
async fn local_only_commands_refuse_a_deployed_stack_without_calling_it() {
    let deployed = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod";
    for args in [
        vec!["sweep"],
        vec!["accounts"],
        vec!["items", "accounts"],
        vec!["get", "accounts", "alice"],
    ] {
        let mut all = vec!["--url", deployed, "--json"];
        all.extend(args.iter().copied());
        let ran = twopc(&all, "").await;
        assert_eq!(ran.code, 2, "{args:?}");
        let e = ran.json();
        assert_eq!(e["code"], "local_only", "{args:?}: {e}");
        assert!(
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("local stack")),
            "{e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_to_a_deployed_stack_are_signed_with_the_aws_credentials() {
    // An endpoint that records the Authorization header and answers a transaction.
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel::<String>();
    let app = axum::Router::new().fallback(move |headers: HeaderMap| {
        let seen_tx = seen_tx.clone();
        async move {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let _ = seen_tx.send(auth);
            (
                [("content-type", "application/json")],
                r#"{"txId": "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69", "status": "COMMITTED", "participants": []}"#,
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });

    // `--sign sigv4` on an http URL (a local stand-in for https): signed for execute-api.
    let ran = twopc(
        &[
            "--url",
            &url,
            "--sign",
            "sigv4",
            "--region",
            "eu-west-1",
            "status",
            "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69",
        ],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let auth = seen.recv().await.expect("a request");
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
            && auth.contains("/eu-west-1/execute-api/aws4_request")
            && auth.contains("Signature="),
        "{auth}"
    );
    // Unsigned by default for http.
    let ran = twopc(
        &[
            "--url",
            &url,
            "status",
            "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69",
        ],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(seen.recv().await.expect("a request"), "", "no signature");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_with_credential_process_signs_requests_with_its_credentials() {
    // An endpoint that records the Authorization header and answers a transaction.
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel::<String>();
    let app = axum::Router::new().fallback(move |headers: HeaderMap| {
        let seen_tx = seen_tx.clone();
        async move {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let _ = seen_tx.send(auth);
            (
                [("content-type", "application/json")],
                r#"{"txId": "0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69", "status": "COMMITTED", "participants": []}"#,
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });

    // GIVEN only a profile whose credentials come from a program (as SSO helpers and vaults
    // provide them), no keys in the environment.
    let dir = common::temp_dir("credential-process");
    let config = dir.join("config");
    std::fs::write(
        &config,
        "[profile operator]\nregion = eu-west-1\ncredential_process = printf '{\"Version\": 1, \"AccessKeyId\": \"AKIDFROMPROCESS\", \"SecretAccessKey\": \"secret\", \"SessionToken\": \"token\"}'\n",
    )
    .expect("config file");
    let out = Command::new(env!("CARGO_BIN_EXE_twopc"))
        .args(["--url", &url, "--sign", "sigv4", "status"])
        .arg("0b6f6c1e-3f0e-4c3a-9a53-1f2d3c4b5a69")
        .env_remove("TWOPC_URL")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_REGION")
        .env("AWS_PROFILE", "operator")
        .env("AWS_CONFIG_FILE", &config)
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .await
        .expect("twopc runs");
    // THEN the request is signed with the program's credentials, for the profile's region.
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let auth = seen.recv().await.expect("a request");
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDFROMPROCESS/")
            && auth.contains("/eu-west-1/execute-api/aws4_request"),
        "{auth}"
    );
}
