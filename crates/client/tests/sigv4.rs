//! SigV4: (a) the client's signing code path reproduces AWS's published test vectors
//! (aws-signing-test-suite, credentials AKIDEXAMPLE at 2015-08-30T12:36:00Z); (b) a local
//! endpoint that recomputes the signature of the client's real request with aws-sigv4, from what
//! it received and the same static credentials, accepts it, and refuses a tampered copy.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_types::DateTime;
use aws_smithy_types::date_time::Format;
use common::{Reply, Seen, answer, serve};
use twopc_client::sigv4::{SERVICE, SigV4, sign_request};
use twopc_client::{Client, Config, Decimal, ErrorCode, Op, Transaction, TxStatus, key};

const ACCESS_KEY: &str = "AKIDEXAMPLE";
const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
/// 2015-08-30T12:36:00Z, the suite's time.
const SUITE_TIME: u64 = 1_440_938_160;

fn credentials(token: Option<&str>) -> Credentials {
    Credentials::new(
        ACCESS_KEY,
        SECRET_KEY,
        token.map(str::to_owned),
        None,
        "test",
    )
}

fn authorization<B>(request: &hyper::Request<B>) -> &str {
    request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .expect("signed")
}

/// aws-signing-test-suite/v4/post-vanilla.
#[test]
fn the_post_vanilla_vector_is_reproduced() {
    let mut request = hyper::Request::post("https://example.amazonaws.com/")
        .header("host", "example.amazonaws.com")
        .body(())
        .expect("request");
    let time = UNIX_EPOCH + Duration::from_secs(SUITE_TIME);
    sign_request(
        &mut request,
        b"",
        &credentials(None),
        "us-east-1",
        "service",
        time,
    )
    .expect("signed");
    assert_eq!(
        authorization(&request),
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"
    );
    assert_eq!(request.headers()["x-amz-date"], "20150830T123600Z");
}

/// aws-signing-test-suite/v4/get-vanilla-with-session-token: temporary credentials sign their
/// token too.
#[test]
fn the_session_token_vector_is_reproduced() {
    let token = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267";
    let mut request = hyper::Request::get("https://example.amazonaws.com/")
        .header("host", "example.amazonaws.com")
        .body(())
        .expect("request");
    let time = UNIX_EPOCH + Duration::from_secs(SUITE_TIME);
    sign_request(
        &mut request,
        b"",
        &credentials(Some(token)),
        "us-east-1",
        "service",
        time,
    )
    .expect("signed");
    assert_eq!(
        authorization(&request),
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"
    );
    assert_eq!(request.headers()["x-amz-security-token"], token);
}

/// What API Gateway checks, recomputed with aws-sigv4 from the request as received: the headers
/// it names as signed, its body, its `x-amz-date`, and the static credentials. `Err` says why
/// not.
fn verify(seen: &Seen, host: &str, credentials: &Credentials) -> Result<(), String> {
    let auth = seen.header("authorization").ok_or("unsigned")?;
    let signed: Vec<&str> = auth
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .ok_or("no SignedHeaders")?
        .split(';')
        .collect();
    let scope = auth
        .split("Credential=")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .ok_or("no Credential")?;
    let region = scope.split('/').nth(2).ok_or("no region")?;
    if !scope.ends_with(&format!("/{SERVICE}/aws4_request")) {
        return Err(format!("signed for another service: {scope}"));
    }
    let amz_date = seen.header("x-amz-date").ok_or("no x-amz-date")?;
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &amz_date[0..4],
        &amz_date[4..6],
        &amz_date[6..8],
        &amz_date[9..11],
        &amz_date[11..13],
        &amz_date[13..15]
    );
    let time = SystemTime::try_from(
        DateTime::from_str(&rfc3339, Format::DateTime).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let headers: Vec<(&str, &str)> = seen
        .headers
        .iter()
        .filter(|(name, _)| signed.contains(&name.as_str()))
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    if headers.len() != signed.len() {
        return Err(format!("a signed header is missing: {signed:?}"));
    }
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let url = format!("http://{host}{}", seen.path);
    let signable = SignableRequest::new(
        &seen.method,
        url,
        headers.into_iter(),
        SignableBody::Bytes(&seen.body),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    let expected = instructions
        .headers()
        .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| v.to_owned())
        .ok_or("no signature computed")?;
    if expected == auth {
        Ok(())
    } else {
        Err(format!(
            "signature mismatch: expected {expected}, got {auth}"
        ))
    }
}

#[tokio::test]
async fn a_local_endpoint_verifying_sigv4_accepts_the_clients_requests() {
    let token = "FQoGZXIvYXdzEXAMPLETOKEN";
    let creds = credentials(Some(token));
    let verifier = creds.clone();
    let (url, log) = serve(move |_, seen| {
        let host = seen.header("host").unwrap_or_default().to_owned();
        match verify(seen, &host, &verifier) {
            Ok(()) => Reply::Answer(200, answer("COMMITTED")),
            Err(why) => Reply::Answer(403, format!(r#"{{"message":{why:?}}}"#)),
        }
    })
    .await;
    let config = Config::new(&url).sigv4(
        SigV4::default()
            .region("eu-west-1")
            .credentials(creds.clone()),
    );
    let client = Client::new(config).expect("client");
    let amount = Decimal::parse("0.10").expect("amount");
    let tx = Transaction::new()
        .table(
            "accounts",
            key("id", "alice"),
            Op::debit("balance", &amount),
        )
        .table("accounts", key("id", "bob"), Op::credit("balance", &amount));

    let outcome = client
        .submit(&tx, Some("signed-1"))
        .await
        .expect("verified and answered");
    assert_eq!(outcome.status, TxStatus::Committed);
    let read = client.status(&outcome.tx_id).await.expect("a signed GET");
    assert_eq!(read.status, TxStatus::Committed);

    let seen = log.lock().expect("log").clone();
    assert_eq!(seen.len(), 2, "both verified at the first attempt");
    let post = &seen[0];
    let auth = post.header("authorization").expect("signed");
    assert!(
        auth.contains("/eu-west-1/execute-api/aws4_request"),
        "{auth}"
    );
    for signed in [
        "host",
        "idempotency-key",
        "content-type",
        "x-amz-date",
        "x-amz-security-token",
    ] {
        assert!(auth.contains(signed), "{signed} is signed: {auth}");
    }
    assert_eq!(post.header("x-amz-security-token"), Some(token));

    // The verifier is not a rubber stamp: a changed body, key or secret fails.
    let host = post.header("host").expect("host").to_owned();
    let mut tampered = post.clone();
    tampered.body = tampered
        .body
        .iter()
        .map(|b| if *b == b'1' { b'9' } else { *b })
        .collect();
    assert!(verify(&tampered, &host, &creds).is_err());
    let mut rekeyed = post.clone();
    for (name, value) in &mut rekeyed.headers {
        if name == "idempotency-key" {
            *value = "signed-2".into();
        }
    }
    assert!(verify(&rekeyed, &host, &creds).is_err());
    let stranger = Credentials::new(ACCESS_KEY, "another-secret", Some(token.into()), None, "x");
    assert!(verify(post, &host, &stranger).is_err());
}

#[tokio::test]
async fn a_signature_the_endpoint_refuses_is_unauthorized() {
    let (url, _) = serve(|_, seen| {
        let host = seen.header("host").unwrap_or_default().to_owned();
        let theirs = Credentials::new(ACCESS_KEY, "not-the-clients", None, None, "x");
        match verify(seen, &host, &theirs) {
            Ok(()) => Reply::Answer(200, answer("COMMITTED")),
            Err(_) => Reply::Answer(
                403,
                r#"{"message":"The request signature we calculated does not match the signature you provided."}"#.into(),
            ),
        }
    })
    .await;
    let config = Config::new(&url).sigv4(
        SigV4::default()
            .region("us-east-1")
            .credentials(credentials(None)),
    );
    let e = Client::new(config)
        .expect("client")
        .status(&twopc_client::TxId::random())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Unauthorized), "{e}");
}
