//! Answers of the API checked against `docs/openapi.json` by `tests/openapi/validate.py`
//! (openapi-schema-validator from the tools virtualenv): the tests that drive the coordinator's
//! handler and the local gateway send it what they were answered.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::lambda::workspace_root;

/// One answer as the validator reads it: the request's method and path, the status, the body.
pub fn answer(method: &str, path: &str, status: u16, body: &Value) -> Value {
    json!({"method": method, "path": path, "status": status, "body": body})
}

/// Validates `answers` (made by [`answer`]), each against the response the document declares
/// for its operation and status; panics with the validator's report when one does not fit.
pub fn validate_answers(answers: &[Value]) {
    let root = workspace_root();
    let python = root.join(".tools/venv/bin/python");
    assert!(
        python.is_file(),
        "the validators are missing: run `make py-tools` (make test does)"
    );
    let mut child = Command::new(python)
        .arg(root.join("tests/openapi/validate.py"))
        .args(["--answers", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    // The script reads all of its input before it writes: no deadlock on the pipes.
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(Value::from(answers.to_vec()).to_string().as_bytes())
        .expect("write the answers");
    drop(stdin);
    let out = child.wait_with_output().expect("validate.py");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{report}");
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains(&format!("{} handler answers", answers.len())),
        "every answer was read: {report}"
    );
}
