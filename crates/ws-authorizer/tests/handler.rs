//! The `$connect` authorizer's answers, fed from the sample event with tokens of a local issuer:
//! allowed with the principal in the context, denied with a code and a metric otherwise.

use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use serde_json::{Value, json};
use twopc_authorizer::local::{self, LocalIssuer};
use twopc_authorizer::verify::JwkSet;
use twopc_authorizer::{Grants, Verifier};
use twopc_function::var;
use twopc_runtime::config::{Settings, WsAuthorizerSettings};
use twopc_runtime::telemetry::Metrics;
use ws_authorizer::{App, AuthorizerResponse, Trust, handle, trust};

const NOW: u64 = 1_795_305_600;
const SAMPLE: &str = include_str!("../../../events/ws-authorizer-connect.json");

fn event(token: Option<&str>) -> ApiGatewayCustomAuthorizerRequestTypeRequest {
    let mut v: Value = serde_json::from_str(SAMPLE).expect("sample");
    match token {
        Some(t) => {
            v["queryStringParameters"]["token"] = json!(t);
            v["multiValueQueryStringParameters"]["token"] = json!([t]);
        }
        None => {
            v["queryStringParameters"] = json!({});
            v["multiValueQueryStringParameters"] = json!({});
        }
    }
    serde_json::from_value(v).expect("event")
}

fn app(issuer: Option<&LocalIssuer>, shared: Option<&str>) -> App<JwkSet> {
    App {
        trust: match issuer {
            Some(i) => Trust::Issuer(Verifier::new(local::config(), i.jwks())),
            None => Trust::Nobody,
        },
        shared_token: shared.map(str::to_owned),
        metrics: Metrics::in_memory("ws-authorizer"),
    }
}

fn effect(a: &AuthorizerResponse) -> String {
    serde_json::to_value(&a.policy_document).expect("policy")["Statement"][0]["Effect"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_sample_event_round_trips() {
    let e: ApiGatewayCustomAuthorizerRequestTypeRequest =
        serde_json::from_str(SAMPLE).expect("parses");
    let again: ApiGatewayCustomAuthorizerRequestTypeRequest =
        serde_json::from_value(serde_json::to_value(&e).expect("serialize")).expect("round trip");
    assert_eq!(again.method_arn, e.method_arn);
    assert_eq!(
        e.query_string_parameters.first("token"),
        Some("eyJhbGciOiJFUzI1NiJ9.e30.c2ln")
    );
}

#[tokio::test]
async fn a_token_of_the_issuer_is_allowed_with_its_principal_in_the_context() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let grants = Grants {
        admin: false,
        topics: vec!["accounts/alice".into()],
    };
    let token = issuer.mint("alice", &grants, NOW, 600).expect("mint");
    let a = handle(&app(Some(&issuer), None), &event(Some(&token)), NOW).await;
    assert_eq!(effect(&a), "Allow");
    assert_eq!(a.principal_id.as_deref(), Some("alice"));
    let resource =
        &serde_json::to_value(&a.policy_document).expect("policy")["Statement"][0]["Resource"];
    assert_eq!(
        resource,
        &json!(["arn:aws:execute-api:us-east-1:123456789012:abc123/live/$connect"])
    );
    // What the $connect route receives reads back as the same principal.
    let mut fields: std::collections::HashMap<String, Value> =
        serde_json::from_value(a.context.clone()).expect("context");
    fields.insert("principalId".into(), json!("alice"));
    let p = twopc_authorizer::context::from_fields(&fields).expect("principal");
    assert_eq!(
        (p.sub.as_str(), p.exp, p.grants),
        ("alice", NOW + 600, grants)
    );
}

#[tokio::test]
async fn bad_tokens_are_denied_with_their_code_and_counted() {
    let issuer = LocalIssuer::ephemeral().expect("key");
    let app = app(Some(&issuer), None);
    let expired = issuer
        .mint("alice", &Grants::admin(), NOW - 7_200, 60)
        .expect("mint");
    let stranger = LocalIssuer::ephemeral()
        .expect("key")
        .mint("x", &Grants::admin(), NOW, 60)
        .expect("mint");
    for (token, code) in [
        (None, "token_missing"),
        (Some("nope"), "token_malformed"),
        (Some(expired.as_str()), "token_expired"),
        (Some(stranger.as_str()), "token_unknown_key"),
    ] {
        let a = handle(&app, &event(token), NOW).await;
        assert_eq!(
            (effect(&a).as_str(), a.context["code"].as_str()),
            ("Deny", Some(code))
        );
    }
    let counted: Vec<String> = app
        .metrics
        .lines()
        .iter()
        .filter(|l| l["ConnectRefused"] == json!(1))
        .filter_map(|l| l["Code"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        counted,
        [
            "token_missing",
            "token_malformed",
            "token_expired",
            "token_unknown_key"
        ]
    );
}

#[tokio::test]
async fn the_shared_token_is_admitted_only_when_configured() {
    let a = handle(
        &app(None, Some("s3cret-demo")),
        &event(Some("s3cret-demo")),
        NOW,
    )
    .await;
    assert_eq!(
        (effect(&a).as_str(), a.principal_id.as_deref()),
        ("Allow", Some("shared-token"))
    );
    let a = handle(&app(None, Some("s3cret-demo")), &event(Some("guess")), NOW).await;
    assert_eq!(
        (effect(&a).as_str(), a.context["code"].as_str()),
        ("Deny", Some("token_shared"))
    );
}

#[tokio::test]
async fn with_nothing_configured_nobody_is_admitted() {
    let a = handle(&app(None, None), &event(Some("s3cret-demo")), NOW).await;
    assert_eq!(
        (effect(&a).as_str(), a.context["code"].as_str()),
        ("Deny", Some("auth_not_configured"))
    );
}

/// What `main` builds from a half-set issuer (the template's three parameters, one left empty)
/// or an unusable one: the authorizer starts, and every connection, the shared token's
/// included, is refused with `auth_misconfigured`, counted, the reason naming the variable.
#[tokio::test]
async fn a_misconfigured_issuer_refuses_every_connection_saying_what_to_fix() {
    let half_set = [
        (var::WS_ISSUER, "https://issuer.example"),
        (var::WS_AUDIENCE, "app"),
        (var::WS_JWKS_URL, ""),
        (var::WS_TOKEN, "s3cret-demo"),
    ];
    let not_https = [
        (var::WS_ISSUER, "https://issuer.example"),
        (var::WS_AUDIENCE, "app"),
        (var::WS_JWKS_URL, "http://issuer.example/jwks.json"),
    ];
    for (env, named) in [
        (&half_set[..], var::WS_JWKS_URL),
        (&not_https[..], var::WS_JWKS_URL),
    ] {
        let settings = WsAuthorizerSettings::from_lookup(|name: &str| {
            env.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
        .unwrap_or_else(|e| panic!("{env:?}: the authorizer does not start: {e}"));
        let trusted = trust(&settings);
        let Trust::Misconfigured(problem) = &trusted else {
            panic!("{env:?}: not refused as misconfigured");
        };
        let problem = problem.clone();
        assert!(problem.contains(named), "{problem}");
        let app = App::<ws_authorizer::jwks::HttpsJwks> {
            trust: trusted,
            shared_token: settings.shared_token.clone(),
            metrics: Metrics::in_memory("ws-authorizer"),
        };
        for token in [
            Some("s3cret-demo"),
            Some("eyJhbGciOiJFUzI1NiJ9.e30.c2ln"),
            None,
        ] {
            let a = handle(&app, &event(token), NOW).await;
            assert_eq!(
                (effect(&a).as_str(), a.context["code"].as_str()),
                ("Deny", Some("auth_misconfigured")),
                "{env:?} {token:?}"
            );
        }
        let refusal = ws_authorizer::authorize(&app, Some("s3cret-demo"), NOW)
            .await
            .expect_err("refused");
        assert!(refusal.to_string().contains(&problem), "{refusal}");
        assert_eq!(app.metrics.lines().len(), 3);
    }
}
