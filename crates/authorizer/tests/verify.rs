//! Each refusal of the verifier, with tokens made the way an attacker or a broken client would
//! make them, and the key cache's one refetch on an unknown key id.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use twopc_authorizer::local::{self, LocalIssuer};
use twopc_authorizer::refusal::codes;
use twopc_authorizer::{Grants, KeySource, Verifier};

const NOW: u64 = 1_800_000_000;

/// The issuer's key set, which tests can rotate, counting fetches.
struct Keys {
    set: Mutex<JwkSet>,
    fetches: AtomicUsize,
    fail: bool,
}

impl Keys {
    fn of(issuer: &LocalIssuer) -> Self {
        Keys {
            set: Mutex::new(issuer.jwks()),
            fetches: AtomicUsize::new(0),
            fail: false,
        }
    }
    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

impl KeySource for &Keys {
    async fn fetch(&self) -> Result<JwkSet, String> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            return Err("connection refused".into());
        }
        Ok(self.set.lock().expect("lock").clone())
    }
}

fn claims() -> Value {
    json!({"iss": local::ISSUER, "aud": local::AUDIENCE, "sub": "alice", "nbf": NOW - 10,
           "exp": NOW + 600, "twopc": {"topics": ["accounts/alice"]}})
}

fn with(mut c: Value, field: &str, v: Value) -> Value {
    c[field] = v;
    c
}

fn without(mut c: Value, field: &str) -> Value {
    c.as_object_mut().expect("object").remove(field);
    c
}

fn b64(v: &Value) -> String {
    URL_SAFE_NO_PAD.encode(v.to_string())
}

async fn refusal(keys: &Keys, token: Option<&str>) -> String {
    let v = Verifier::new(local::config(), keys);
    v.verify(token, NOW)
        .await
        .expect_err("refused")
        .code()
        .to_owned()
}

#[tokio::test]
async fn a_token_from_the_issuer_names_its_principal_grants_and_expiry() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    let token = issuer.sign(&claims()).expect("sign");
    let p = Verifier::new(local::config(), &keys)
        .verify(Some(&token), NOW)
        .await
        .expect("valid");
    assert_eq!((p.sub.as_str(), p.exp), ("alice", NOW + 600));
    assert_eq!(p.grants.topics, vec!["accounts/alice".to_owned()]);
    assert!(!p.grants.admin);
}

#[tokio::test]
async fn minted_tokens_verify_and_carry_their_grants() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    let token = issuer.mint("ops", &Grants::admin(), NOW, 60).expect("mint");
    let p = Verifier::new(local::config(), &keys)
        .verify(Some(&token), NOW + 59)
        .await
        .expect("valid");
    assert_eq!(
        (p.sub.as_str(), p.exp, p.grants.admin),
        ("ops", NOW + 60, true)
    );
}

#[tokio::test]
async fn no_token_is_token_missing() {
    let keys = Keys::of(&LocalIssuer::ephemeral().expect("key"));
    assert_eq!(refusal(&keys, None).await, codes::TOKEN_MISSING);
    assert_eq!(refusal(&keys, Some("  ")).await, codes::TOKEN_MISSING);
}

#[tokio::test]
async fn garbage_is_token_malformed() {
    let keys = Keys::of(&LocalIssuer::ephemeral().expect("key"));
    for t in [
        "abc",
        "a.b",
        "a.b.c.d",
        "!!!.e30.sig",
        &format!("{}.e30.sig", b64(&json!([1]))),
    ] {
        assert_eq!(refusal(&keys, Some(t)).await, codes::TOKEN_MALFORMED, "{t}");
    }
}

#[tokio::test]
async fn a_token_signed_by_another_key_under_the_issuers_kid_is_token_signature() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let forger = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(issuer.kid().to_owned());
    let forged = jsonwebtoken::encode(&header, &claims(), &forger.encoding_key()).expect("sign");
    assert_eq!(refusal(&keys, Some(&forged)).await, codes::TOKEN_SIGNATURE);
}

#[tokio::test]
async fn altered_claims_break_the_signature() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    let token = issuer.sign(&claims()).expect("sign");
    let parts: Vec<&str> = token.split('.').collect();
    let admin = with(claims(), "twopc", json!({"admin": true}));
    let altered = format!("{}.{}.{}", parts[0], b64(&admin), parts[2]);
    assert_eq!(refusal(&keys, Some(&altered)).await, codes::TOKEN_SIGNATURE);
}

#[tokio::test]
async fn alg_none_is_token_algorithm() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    for sig in ["", "x"] {
        let none = format!(
            "{}.{}.{sig}",
            b64(&json!({"alg": "none", "kid": issuer.kid()})),
            b64(&claims())
        );
        assert_eq!(refusal(&keys, Some(&none)).await, codes::TOKEN_ALGORITHM);
    }
    assert_eq!(keys.fetches(), 0, "refused before any key is looked up");
}

#[tokio::test]
async fn hmac_signed_with_the_public_key_is_token_algorithm() {
    // The classic confusion: HS256 keyed with the issuer's public key material.
    let issuer = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(issuer.kid().to_owned());
    let public = serde_json::to_vec(&issuer.jwks()).expect("jwks");
    let token =
        jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(&public)).expect("sign");
    assert_eq!(refusal(&keys, Some(&token)).await, codes::TOKEN_ALGORITHM);
}

#[tokio::test]
async fn an_algorithm_other_than_the_keys_is_token_algorithm() {
    // RS256 is accepted by default, but this issuer's key is ES256.
    let issuer = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    let config = twopc_authorizer::VerifierConfig::new(local::ISSUER, local::AUDIENCE);
    let header = json!({"alg": "RS256", "kid": issuer.kid()});
    let token = format!("{}.{}.c2ln", b64(&header), b64(&claims()));
    let e = Verifier::new(config, &keys)
        .verify(Some(&token), NOW)
        .await
        .expect_err("refused");
    assert_eq!(e.code(), codes::TOKEN_ALGORITHM);
}

#[tokio::test]
async fn expiry_and_not_before_are_checked_with_leeway() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    let leeway = local::config().leeway_secs;
    let expired = issuer
        .sign(&with(claims(), "exp", json!(NOW - leeway)))
        .expect("sign");
    assert_eq!(refusal(&keys, Some(&expired)).await, codes::TOKEN_EXPIRED);
    let just = issuer
        .sign(&with(claims(), "exp", json!(NOW - leeway + 1)))
        .expect("sign");
    let v = Verifier::new(local::config(), &keys);
    assert!(
        v.verify(Some(&just), NOW).await.is_ok(),
        "within the leeway"
    );
    let early = issuer
        .sign(&with(claims(), "nbf", json!(NOW + leeway + 1)))
        .expect("sign");
    assert_eq!(
        refusal(&keys, Some(&early)).await,
        codes::TOKEN_NOT_YET_VALID
    );
}

#[tokio::test]
async fn another_issuer_or_audience_is_refused() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    let t = issuer
        .sign(&with(claims(), "iss", json!("https://evil.example")))
        .expect("sign");
    assert_eq!(refusal(&keys, Some(&t)).await, codes::TOKEN_ISSUER);
    let t = issuer.sign(&without(claims(), "iss")).expect("sign");
    assert_eq!(refusal(&keys, Some(&t)).await, codes::TOKEN_ISSUER);
    let t = issuer
        .sign(&with(claims(), "aud", json!("another-app")))
        .expect("sign");
    assert_eq!(refusal(&keys, Some(&t)).await, codes::TOKEN_AUDIENCE);
    let t = issuer.sign(&without(claims(), "aud")).expect("sign");
    assert_eq!(refusal(&keys, Some(&t)).await, codes::TOKEN_AUDIENCE);
    let t = issuer
        .sign(&with(
            claims(),
            "aud",
            json!(["another-app", local::AUDIENCE]),
        ))
        .expect("sign");
    let v = Verifier::new(local::config(), &keys);
    assert!(
        v.verify(Some(&t), NOW).await.is_ok(),
        "a list containing ours"
    );
}

/// Amazon Cognito's access tokens carry no `aud`: they name the app client in `client_id`.
#[tokio::test]
async fn an_access_token_issued_to_the_audience_as_its_client_is_admitted() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    let access = with(
        with(without(claims(), "aud"), "token_use", json!("access")),
        "client_id",
        json!(local::AUDIENCE),
    );
    let t = issuer.sign(&access).expect("sign");
    let v = Verifier::new(local::config(), &keys);
    assert_eq!(
        v.verify(Some(&t), NOW).await.expect("admitted").sub,
        "alice"
    );
    for refused in [
        with(access.clone(), "client_id", json!("another-app")),
        without(access.clone(), "client_id"),
        // An ID token names its client in aud; client_id alone does not stand in for it.
        with(access.clone(), "token_use", json!("id")),
        // With an aud, the aud alone decides.
        with(access.clone(), "aud", json!("another-app")),
    ] {
        let t = issuer.sign(&refused).expect("sign");
        assert_eq!(
            refusal(&keys, Some(&t)).await,
            codes::TOKEN_AUDIENCE,
            "{refused}"
        );
    }
}

#[tokio::test]
async fn missing_or_mistyped_claims_are_token_claims() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    for c in [
        without(claims(), "exp"),
        with(claims(), "exp", json!("tomorrow")),
        without(claims(), "sub"),
        with(claims(), "nbf", json!("now")),
        with(claims(), "twopc", json!({"topics": ["everything"]})),
    ] {
        let t = issuer.sign(&c).expect("sign");
        assert_eq!(refusal(&keys, Some(&t)).await, codes::TOKEN_CLAIMS, "{c}");
    }
}

#[tokio::test]
async fn an_unknown_kid_fetches_the_keys_once_more_then_is_refused() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let stranger = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&issuer);
    let v = Verifier::new(local::config(), &keys);
    let good = issuer.sign(&claims()).expect("sign");
    v.verify(Some(&good), NOW).await.expect("valid");
    assert_eq!(keys.fetches(), 1, "first use fetches");
    v.verify(Some(&good), NOW).await.expect("valid");
    assert_eq!(keys.fetches(), 1, "cached");

    let unknown = stranger.sign(&claims()).expect("sign");
    let cooldown = local::config().refresh_cooldown_secs;
    let later = NOW + cooldown;
    let e = v
        .verify(Some(&unknown), later)
        .await
        .expect_err("unknown kid");
    assert_eq!(e.code(), codes::TOKEN_UNKNOWN_KEY);
    assert_eq!(keys.fetches(), 2, "one refetch");
    let e = v
        .verify(Some(&unknown), later + 1)
        .await
        .expect_err("unknown kid");
    assert_eq!(e.code(), codes::TOKEN_UNKNOWN_KEY);
    assert_eq!(keys.fetches(), 2, "no refetch within the cooldown");
}

#[tokio::test]
async fn a_rotated_key_is_found_by_the_refetch() {
    let old = LocalIssuer::ephemeral().expect("key");
    let new = LocalIssuer::ephemeral().expect("key");
    let keys = Keys::of(&old);
    let v = Verifier::new(local::config(), &keys);
    v.verify(Some(&old.sign(&claims()).expect("sign")), NOW)
        .await
        .expect("valid");
    let mut both = old.jwks();
    both.keys.extend(new.jwks().keys);
    *keys.set.lock().expect("lock") = both;
    let later = NOW + local::config().refresh_cooldown_secs;
    let p = v
        .verify(Some(&new.sign(&claims()).expect("sign")), later)
        .await
        .expect("the new key is fetched");
    assert_eq!(p.sub, "alice");
}

#[tokio::test]
async fn keys_that_cannot_be_fetched_are_keys_unavailable() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let mut keys = Keys::of(&issuer);
    keys.fail = true;
    let t = issuer.sign(&claims()).expect("sign");
    assert_eq!(refusal(&keys, Some(&t)).await, codes::KEYS_UNAVAILABLE);
}

#[test]
fn shared_secret_algorithms_cannot_be_configured() {
    let c = twopc_authorizer::VerifierConfig::new("i", "a");
    assert!(c.clone().with_algorithms(&["HS256"]).is_err());
    assert!(c.clone().with_algorithms(&["none"]).is_err());
    assert!(c.clone().with_algorithms(&[]).is_err());
    assert!(c.with_algorithms(&["RS256", "ES256"]).is_ok());
}

#[test]
fn the_local_key_is_made_once_per_folder_and_kept() {
    let dir = std::env::temp_dir().join(format!("twopc-authorizer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let first = LocalIssuer::load_or_create(&dir).expect("made");
    let again = LocalIssuer::load_or_create(&dir).expect("read");
    assert_eq!(first.kid(), again.kid());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(local::KEY_FILE))
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "readable by its owner only");
    }
    std::fs::write(dir.join(local::KEY_FILE), b"junk").expect("write");
    assert!(LocalIssuer::load_or_create(&dir).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}
