//! `template.yaml` against the code: its tables, indexes and attributes are the ones
//! `twopc_dynamo::tables` creates; its environment variables are the ones
//! `twopc_runtime::config` reads, with values the configuration accepts; its functions point
//! at crates that exist.
//!
//! The template is read as text (`twopc_tests::template`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use twopc_core::coordinator::{CommitMode, CoordinatorConfig};
use twopc_core::layout::{
    DEADLINE, ENDED, EXPIRE_AT, LOCK_EXPIRES_AT, LOCK_SHARD, PENDING, RETRY_AFTER, TX_ID,
    UPDATED_AT,
};
use twopc_core::record::Target;
use twopc_core::rules::{self, NotNative, PathFacts, Reach};
use twopc_core::service::{KeySchema, KeyType, ServiceKind};
use twopc_dynamo::tables::{ENDED_INDEX, LOCK_INDEX, PENDING_INDEX};
use twopc_function::var;
use twopc_runtime::config::{CoordinatorSettings, Role, Settings, SweeperSettings};

use twopc_tests::template::{TEMPLATE, Template, indent, is_content, pairs, value};

const REPO: Template<'static> = Template::repo();

/// The lines of a top-level section's entry (`Resources:` → `  Name:`), without its header.
fn block(section: &str, name: &str) -> Vec<&'static str> {
    REPO.block(section, name)
}

/// The resources of a type.
fn resources_of(kind: &str) -> Vec<String> {
    REPO.resources_of(kind)
}

/// What a table definition says.
#[derive(Debug, Default, PartialEq, Eq)]
struct Table {
    attributes: BTreeMap<String, String>,
    key: Vec<(String, String)>,
    indexes: BTreeMap<String, Vec<(String, String)>>,
    projections: Vec<String>,
    ttl: Option<(String, String)>,
    stream: Option<String>,
    billing: Option<String>,
}

fn table(name: &str) -> Table {
    let lines = block("Resources", name);
    let p = pairs(&lines);
    let mut t = Table::default();
    let mut index: Option<String> = None;
    for (i, (k, v)) in p.iter().enumerate() {
        let next = p.get(i + 1).copied().unwrap_or_default();
        match (*k, next.0) {
            ("AttributeName", "AttributeType") => {
                t.attributes.insert((*v).into(), next.1.into());
            }
            ("AttributeName", "KeyType") => {
                let element = ((*v).to_owned(), next.1.to_owned());
                match &index {
                    Some(ix) => t.indexes.entry(ix.clone()).or_default().push(element),
                    None => t.key.push(element),
                }
            }
            ("AttributeName", "Enabled") => t.ttl = Some(((*v).into(), next.1.into())),
            ("IndexName", _) => index = Some((*v).into()),
            ("ProjectionType", _) => t.projections.push((*v).into()),
            ("StreamViewType", _) => t.stream = Some((*v).into()),
            ("BillingMode", _) => t.billing = Some((*v).into()),
            _ => {}
        }
    }
    t
}

fn element(name: &str, key_type: &str) -> (String, String) {
    (name.to_owned(), key_type.to_owned())
}

#[test]
fn the_transactions_table_is_the_one_the_adapters_use() {
    let t = table("TransactionsTable");
    assert_eq!(
        t.attributes,
        [
            (TX_ID, "S"),
            (PENDING, "S"),
            (DEADLINE, "N"),
            (ENDED, "S"),
            (UPDATED_AT, "N")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .into()
    );
    assert_eq!(t.key, [element(TX_ID, "HASH")]);
    assert_eq!(
        t.indexes,
        [
            (
                PENDING_INDEX.to_owned(),
                vec![element(PENDING, "HASH"), element(DEADLINE, "RANGE")]
            ),
            (
                ENDED_INDEX.to_owned(),
                vec![element(ENDED, "HASH"), element(UPDATED_AT, "RANGE")]
            )
        ]
        .into()
    );
    // Keys and the sweeper's backoff only; the operator's ended index keys only
    // (crates/dynamo/src/tables.rs says why).
    assert_eq!(t.projections, ["INCLUDE", "KEYS_ONLY"]);
    assert!(
        block("Resources", "TransactionsTable")
            .iter()
            .any(|l| l.trim() == format!("- {RETRY_AFTER}")),
        "the pending index projects {RETRY_AFTER}, which the sweeper's query filters on"
    );
    assert_eq!(t.ttl, Some((EXPIRE_AT.to_owned(), "true".to_owned())));
    assert_eq!(t.stream.as_deref(), Some("NEW_AND_OLD_IMAGES"));
    assert_eq!(t.billing.as_deref(), Some("PAY_PER_REQUEST"));
}

#[test]
fn every_participant_table_carries_the_lock_index() {
    let participants: Vec<String> = resources_of("AWS::DynamoDB::Table")
        .into_iter()
        .filter(|n| n != "TransactionsTable" && n != "ConnectionsTable")
        .collect();
    assert_eq!(participants, ["AccountsTable", "WalletsTable"]);
    for name in participants {
        let t = table(&name);
        assert_eq!(
            t.attributes,
            [("id", "S"), (LOCK_SHARD, "S"), (LOCK_EXPIRES_AT, "N")]
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .into(),
            "{name}"
        );
        assert_eq!(t.key, [element("id", "HASH")], "{name}");
        assert_eq!(
            t.indexes,
            [(
                LOCK_INDEX.to_owned(),
                vec![
                    element(LOCK_SHARD, "HASH"),
                    element(LOCK_EXPIRES_AT, "RANGE")
                ]
            )]
            .into(),
            "{name}"
        );
        assert_eq!(t.projections, ["KEYS_ONLY"], "{name}");
        assert_eq!(t.ttl, None, "{name}");
        assert_eq!(t.stream.as_deref(), Some("NEW_AND_OLD_IMAGES"), "{name}");
        assert_eq!(t.billing.as_deref(), Some("PAY_PER_REQUEST"), "{name}");
    }
}

#[test]
fn policies_name_only_indexes_that_exist() {
    let named: BTreeSet<&str> = TEMPLATE
        .split("/index/")
        .skip(1)
        .map(|rest| rest.split(['"', '\n', ' ']).next().unwrap_or_default())
        .collect();
    assert_eq!(
        named,
        [
            PENDING_INDEX,
            ENDED_INDEX,
            LOCK_INDEX,
            twopc_dynamo::tables::BY_CONNECTION_INDEX
        ]
        .into()
    );
}

/// Environment variables set anywhere in the template: the keys of `Variables:` blocks.
fn variables_set() -> BTreeMap<String, Vec<String>> {
    REPO.variables_set()
}

#[test]
fn every_environment_variable_is_one_the_configuration_reads() {
    let set = variables_set();
    for name in set.keys() {
        assert!(
            var::ALL.contains(&name.as_str()),
            "template.yaml sets {name}, which twopc_function::var does not define"
        );
    }
    let owners = |v: &str| set.get(v).cloned().unwrap_or_default();
    assert_eq!(owners(var::TRANSACTIONS_TABLE), ["Function"], "in Globals");
    assert_eq!(owners(var::SERVICES), ["CoordinatorFunction"]);
    assert_eq!(
        owners(var::PARTICIPANT_TABLE),
        ["WalletsParticipantFunction"]
    );
    assert_eq!(owners(var::LOCK_TABLES), ["SweeperFunction"]);
    assert_eq!(owners(var::STREAM_TABLES), ["StreamProcessorFunction"]);
    assert_eq!(owners(var::DELIVERY_STREAM), ["StreamProcessorFunction"]);
    assert_eq!(
        owners(var::CONNECTIONS_TABLE),
        ["StreamProcessorFunction", "ConnectionsFunction"]
    );
}

#[test]
fn the_connections_table_matches_the_adapter() {
    use twopc_dynamo::tables::{BY_CONNECTION_INDEX, CONNECTION_ATTR, TOPIC_ATTR};
    let t = table("ConnectionsTable");
    assert_eq!(
        t.attributes,
        [(TOPIC_ATTR, "S"), (CONNECTION_ATTR, "S")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .into()
    );
    assert_eq!(
        t.key,
        [
            element(TOPIC_ATTR, "HASH"),
            element(CONNECTION_ATTR, "RANGE")
        ]
    );
    assert_eq!(
        t.indexes,
        [(
            BY_CONNECTION_INDEX.to_owned(),
            vec![
                element(CONNECTION_ATTR, "HASH"),
                element(TOPIC_ATTR, "RANGE")
            ]
        )]
        .into()
    );
    assert_eq!(t.ttl, Some((EXPIRE_AT.to_owned(), "true".to_owned())));
}

#[test]
fn the_stream_processor_reads_every_stream_with_item_failures_reported() {
    let lines = block("Resources", "StreamProcessorFunction");
    let text = lines.join("\n");
    for table in ["TransactionsTable", "AccountsTable", "WalletsTable"] {
        assert!(
            text.contains(&format!("!GetAtt {table}.StreamArn")),
            "no stream mapping for {table}"
        );
    }
    assert_eq!(text.matches("ReportBatchItemFailures").count(), 3);
    assert_eq!(text.matches("BisectBatchOnFunctionError: true").count(), 3);
    assert_eq!(
        text.matches("Destination: !GetAtt StreamFailuresQueue.Arn")
            .count(),
        3
    );
    // SAM grants the role sqs:SendMessage on an OnFailure destination only when told its type
    // (samtranslator's pull event sources): the Policies do not repeat it.
    assert_eq!(text.matches("Type: SQS").count(), 3, "{text}");
}

/// A `NAME: !Sub >-` folded value, its `${...}` replaced by `sub`.
fn folded_sub(resource: &str, name: &str, sub: impl Fn(&str) -> String) -> String {
    REPO.folded_sub(resource, name, sub)
}

/// The coordinator's configuration as the template sets it: its services (functions as ARNs,
/// tables by their logical ids) and its parameters' defaults.
fn deployed_coordinator() -> CoordinatorConfig {
    let services = folded_sub("CoordinatorFunction", var::SERVICES, |r| {
        match r.strip_suffix(".Arn") {
            Some(function) => {
                assert!(resources_of("AWS::Serverless::Function").contains(&function.to_owned()));
                format!("arn:aws:lambda:us-east-1:123456789012:function:{function}")
            }
            None => {
                assert!(resources_of("AWS::DynamoDB::Table").contains(&r.to_owned()));
                r.to_owned()
            }
        }
    });
    let coordinator = block("Resources", "CoordinatorFunction");
    let default =
        |parameter: &str| value(&block("Parameters", parameter), "Default").map(str::to_owned);
    let env = |name: &str| match name {
        var::TRANSACTIONS_TABLE => Some("tx".to_owned()),
        var::SERVICES => Some(services.clone()),
        _ => value(&coordinator, name)
            .and_then(|v| v.strip_prefix("!Ref "))
            .and_then(default),
    };
    CoordinatorSettings::from_lookup(env)
        .expect("the template's coordinator configuration")
        .coordinator
}

#[test]
fn the_coordinators_services_are_accepted_by_the_configuration() {
    let config = deployed_coordinator();
    assert_eq!(
        config.services.keys().collect::<Vec<_>>(),
        ["accounts", "wallets"]
    );
    assert_eq!(
        config.services["accounts"].target,
        Target::Direct {
            table: "AccountsTable".into()
        },
        "a plain table the coordinator writes itself"
    );
    assert!(
        matches!(config.services["wallets"].target, Target::Lambda { .. }),
        "the worked example of a service behind its own function"
    );
    for (name, s) in &config.services {
        assert_eq!(s.key, Some(KeySchema::string_hash("id")), "{name}");
    }
}

#[test]
fn a_plain_table_transfer_goes_native_with_the_templates_defaults() {
    // What the coordinator asks of a transaction before it commits it natively
    // (twopc_core::coordinator: CommitMode::Auto, then rules::native of its participants).
    let config = deployed_coordinator();
    assert_eq!(config.mode, CommitMode::Auto, "CommitMode's default");
    let facts = |service: &str| {
        let s = &config.services[service];
        PathFacts {
            table: s.kind == ServiceKind::Table,
            reach: match s.target {
                Target::Direct { .. } => Reach::Direct,
                Target::Lambda { .. } => Reach::Lambda,
                Target::Http { .. } => Reach::Http,
            },
            highly_available: s.highly_available,
            hot: s.hot,
            heated: false,
            deletes: false,
        }
    };
    assert_eq!(
        rules::native([facts("accounts"), facts("accounts")], 1_000),
        Ok(()),
        "alice to bob in accounts: one TransactWriteItems"
    );
    assert_eq!(
        rules::native([facts("accounts"), facts("wallets")], 1_000),
        Err(NotNative::NotDirect),
        "wallets keeps its table behind its function"
    );
}

#[test]
fn the_sweepers_lock_tables_are_accepted_by_the_configuration() {
    let tables = folded_sub("SweeperFunction", var::LOCK_TABLES, |r| {
        assert!(resources_of("AWS::DynamoDB::Table").contains(&r.to_owned()));
        r.to_owned()
    });
    let env = |name: &str| match name {
        var::TRANSACTIONS_TABLE => Some("tx".to_owned()),
        var::LOCK_TABLES => Some(tables.clone()),
        _ => None,
    };
    let config = SweeperSettings::from_lookup(env).expect("the template's lock tables");
    let names: Vec<&str> = config
        .lock_tables
        .iter()
        .map(|t| t.table.as_str())
        .collect();
    assert_eq!(names, ["AccountsTable", "WalletsTable"]);
    for t in &config.lock_tables {
        assert_eq!(t.key.hash.kind, KeyType::S);
    }
}

#[test]
fn every_function_is_given_what_its_role_requires() {
    let set = variables_set();
    let mut seen = BTreeSet::new();
    for f in resources_of("AWS::Serverless::Function") {
        let lines = block("Resources", &f);
        let binary = value(&lines, "Binary").unwrap_or_else(|| panic!("{f}: no Binary"));
        let role = Role::ALL
            .into_iter()
            .find(|r| r.function() == binary)
            .unwrap_or_else(|| panic!("{f}: no Role reads the configuration of {binary}"));
        seen.insert(role.function());
        for v in role.required() {
            let owners = set.get(*v).cloned().unwrap_or_default();
            assert!(
                owners.iter().any(|o| o == &f || o == "Function"),
                "{f} ({role:?}) needs {v}, which neither it nor Globals sets"
            );
        }
    }
    assert_eq!(
        seen.len(),
        Role::ALL.len(),
        "a role no function has: {seen:?}"
    );
}

#[test]
fn every_function_is_built_from_a_crate_of_the_workspace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let functions = resources_of("AWS::Serverless::Function");
    assert_eq!(
        functions,
        [
            "CoordinatorFunction",
            "WalletsParticipantFunction",
            "SweeperFunction",
            "StreamProcessorFunction",
            "ConnectionsFunction",
            "WsAuthorizerFunction"
        ]
    );
    for f in functions {
        let lines = block("Resources", &f);
        assert_eq!(
            value(&lines, "BuildMethod"),
            Some("rust-cargolambda"),
            "{f}"
        );
        let binary = value(&lines, "Binary").unwrap_or_else(|| panic!("{f}: no Binary"));
        let code = value(&lines, "CodeUri").unwrap_or_else(|| panic!("{f}: no CodeUri"));
        assert_eq!(code, format!("crates/{binary}"), "{f}");
        let manifest = std::fs::read_to_string(root.join(code).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{f}: {code}/Cargo.toml: {e}"));
        assert!(
            manifest.contains(&format!("name = \"{binary}\"")),
            "{f}: {code} is not package {binary}"
        );
        assert!(
            root.join(code).join("src/main.rs").exists(),
            "{f}: no binary"
        );
    }
    let globals = block("Globals", "Function");
    assert_eq!(value(&globals, "Runtime"), Some("provided.al2023"));
    assert_eq!(value(&globals, "Handler"), Some("bootstrap"));
}

/// The architecture the functions are configured with is the one `make build` (and so `sam
/// build`) builds, written in the template: no parameter, so `sam deploy --guided` never asks
/// for it. A guided answer lands in the deploy's parameters only, and `sam build` would go on
/// building the default: the answer x86_64 deployed arm64 binaries.
#[test]
fn the_functions_architecture_is_the_one_make_build_builds_and_no_deploy_answer() {
    let makefile = include_str!("../../Makefile");
    let recipe = makefile
        .lines()
        .skip_while(|l| !l.starts_with("build:"))
        .nth(1)
        .expect("make build's recipe");
    let built = if recipe.contains(" --arm64 ") {
        "arm64"
    } else if recipe.contains(" --x86-64 ") {
        "x86_64"
    } else {
        panic!("make build names no architecture: {recipe}")
    };
    let globals = block("Globals", "Function");
    assert_eq!(
        value(&globals, "Architectures"),
        Some(format!("[{built}]").as_str()),
        "the functions run what make build builds, a literal (a parameter would be a guided answer)"
    );
    for f in resources_of("AWS::Serverless::Function") {
        assert_eq!(
            value(&block("Resources", &f), "Architectures"),
            None,
            "{f}: the Globals' architecture"
        );
    }
}

#[test]
fn make_build_builds_every_function_the_template_deploys() {
    let makefile = include_str!("../../Makefile");
    let built: BTreeSet<&str> = makefile
        .lines()
        .find_map(|l| l.strip_prefix("FUNCTIONS :="))
        .expect("the Makefile names its FUNCTIONS")
        .split_whitespace()
        .collect();
    let deployed: BTreeSet<&str> = resources_of("AWS::Serverless::Function")
        .iter()
        .map(|f| {
            let lines = block("Resources", f);
            value(&lines, "Binary").unwrap_or_else(|| panic!("{f}: no Binary"))
        })
        .collect();
    assert_eq!(
        built, deployed,
        "the Makefile's FUNCTIONS (make build) and template.yaml's binaries differ"
    );
}

#[test]
fn the_api_requires_iam_and_exposes_only_the_coordinator() {
    let api = block("Resources", "TransactionsApi");
    assert_eq!(value(&api, "DefaultAuthorizer"), Some("AWS_IAM"));
    let with_api_events: Vec<String> = resources_of("AWS::Serverless::Function")
        .into_iter()
        .filter(|f| pairs(&block("Resources", f)).contains(&("Type", "Api")))
        .collect();
    assert_eq!(with_api_events, ["CoordinatorFunction"]);
    assert_eq!(
        api_routes(),
        [
            ("/operator/counts", "get"),
            ("/operator/items/{participant}", "get"),
            ("/operator/transactions", "get"),
            ("/operator/transactions/{id}", "get"),
            ("/operator/transactions/{id}/abort", "post"),
            ("/operator/transactions/{id}/recover", "post"),
            ("/transactions", "get"),
            ("/transactions", "post"),
            ("/transactions/{id}", "get")
        ]
    );
    // The operator routes apart: OperatorPolicy grants them, ClientPolicy the rest only.
    let operator = block("Resources", "OperatorPolicy");
    assert!(
        operator.iter().any(|l| l.ends_with("/*/operator/*")),
        "{operator:?}"
    );
    let client = block("Resources", "ClientPolicy");
    assert!(!client.iter().any(|l| l.contains("operator")), "{client:?}");
}

/// The REST API's routes: the coordinator's `Api` events, (path, method).
fn api_routes() -> Vec<(&'static str, &'static str)> {
    let p = pairs(&block("Resources", "CoordinatorFunction"));
    p.iter()
        .zip(p.iter().skip(1))
        .filter(|((k, _), (k2, _))| *k == "Path" && *k2 == "Method")
        .map(|((_, path), (_, method))| (*path, *method))
        .collect()
}

#[test]
fn the_api_document_describes_the_apis_routes_and_its_iam_authorisation() {
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("../../docs/openapi.json")).expect("JSON");
    let mut described = vec![];
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            described.push((path.as_str(), method.as_str()));
        }
    }
    assert_eq!(described, api_routes(), "docs/openapi.json's operations");
    assert_eq!(doc["security"], serde_json::json!([{"sigv4": []}]));
    assert_eq!(
        doc["components"]["securitySchemes"]["sigv4"]["x-amazon-apigateway-authtype"], "awsSigv4",
        "API Gateway's name for IAM (SigV4) authorisation"
    );
}

#[test]
fn every_table_that_holds_state_is_restorable_and_protected_from_deletion() {
    for name in ["TransactionsTable", "AccountsTable", "WalletsTable"] {
        let lines = block("Resources", name);
        assert_eq!(
            value(&lines, "PointInTimeRecoveryEnabled"),
            Some("true"),
            "{name}"
        );
        assert_eq!(
            value(&lines, "DeletionProtectionEnabled"),
            Some("true"),
            "{name}"
        );
        // Not RetainExceptOnCreate: deletion protection would fail a first create's rollback.
        assert_eq!(value(&lines, "DeletionPolicy"), Some("Retain"), "{name}");
    }
    // The connections table holds subscriptions only (docs/operations.md).
    let connections = block("Resources", "ConnectionsTable");
    assert_eq!(value(&connections, "PointInTimeRecoveryEnabled"), None);
}

#[test]
fn one_sweeper_pass_at_a_time_when_asked_each_shorter_than_the_shortest_schedule() {
    let lines = block("Resources", "SweeperFunction");
    // A new account (concurrency quota 10) cannot reserve any: off by default, 1 when asked.
    assert_eq!(
        value(&lines, "ReservedConcurrentExecutions"),
        Some("!If [ReservesSweeperConcurrency, 1, !Ref AWS::NoValue]")
    );
    let parameter = block("Parameters", "SweeperReservedConcurrency");
    assert_eq!(value(&parameter, "Default"), Some("0"));
    assert_eq!(value(&parameter, "AllowedValues"), Some("[0, 1]"));
    assert!(
        TEMPLATE.contains(
            "ReservesSweeperConcurrency: !Equals [!Ref SweeperReservedConcurrency, \"1\"]"
        ),
        "the condition reads the parameter"
    );
    let timeout: u64 = value(&lines, "Timeout")
        .and_then(|t| t.parse().ok())
        .expect("a Timeout in seconds");
    // EventBridge schedules fire at most once a minute.
    assert!(
        timeout < 60,
        "Timeout {timeout} s can overlap the next pass"
    );
    assert_eq!(
        value(&lines, "TargetArn"),
        Some("!GetAtt SweeperFailuresQueue.Arn"),
        "failed passes are kept"
    );
}

#[test]
fn the_log_filter_default_is_the_codes() {
    let lines: Vec<&str> = TEMPLATE.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "  LogFilter:")
        .expect("a LogFilter parameter");
    let default = lines[at..]
        .iter()
        .find_map(|l| l.trim().strip_prefix("Default: "))
        .expect("a default");
    assert_eq!(default, twopc_function::logs::DEFAULT_LOG_FILTER);
}

/// The metric names the functions' EMF lines carry (each `Metrics` method, once).
fn emitted_metrics() -> BTreeSet<String> {
    use twopc_core::sweeper::SweepReport;
    use twopc_runtime::telemetry::{Metrics, StreamBatch};
    let m = Metrics::in_memory("any");
    let mut record = twopc_core::record::TxRecord::never_began(&twopc_core::ids::TxId::random(), 0);
    for status in [
        twopc_core::status::TxStatus::Committed,
        twopc_core::status::TxStatus::Aborted,
        twopc_core::status::TxStatus::Preparing,
    ] {
        record.status = status;
        m.transaction(&twopc_core::coordinator::Submitted::of(record.clone()), 1);
    }
    m.sweep(
        &SweepReport {
            oldest_overdue_ms: Some(1),
            ..SweepReport::default()
        },
        1,
    );
    m.sweep_failed(1);
    m.protocol_violation();
    m.connect_refused("token_expired");
    m.subscribe_refused("topic_forbidden");
    m.stream_batch(&StreamBatch {
        commit_age_ms: Some(1),
        ..StreamBatch::default()
    });
    m.lines()
        .iter()
        .flat_map(|l| {
            l["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|d| d["Name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn every_alarm_and_dashboard_metric_of_ours_is_one_the_functions_emit() {
    let namespace = "!Sub dynamo-2pc/${AWS::StackName}";
    let globals = block("Globals", "Function");
    assert_eq!(value(&globals, var::METRICS_NAMESPACE), Some(namespace));
    let emitted = emitted_metrics();
    let alarms = resources_of("AWS::CloudWatch::Alarm");
    assert!(alarms.len() >= 7, "{alarms:?}");
    for alarm in &alarms {
        let lines = block("Resources", alarm);
        let metric = value(&lines, "MetricName").expect("a metric");
        if value(&lines, "Namespace") == Some(namespace) {
            assert!(emitted.contains(metric), "{alarm}: nothing emits {metric}");
        }
    }
    let dashboard = block("Resources", "OperationsDashboard").join("\n");
    for (i, _) in dashboard.match_indices("[\"dynamo-2pc/${AWS::StackName}\", \"") {
        let rest = &dashboard[i + "[\"dynamo-2pc/${AWS::StackName}\", \"".len()..];
        let metric = &rest[..rest.find('"').expect("a quoted name")];
        assert!(
            emitted.contains(metric),
            "dashboard: nothing emits {metric}"
        );
    }
    for alarm in alarms {
        assert!(
            dashboard.contains(&format!("${{{alarm}.Arn}}")),
            "{alarm} not on the dashboard"
        );
    }
}

#[test]
fn aws_partitions_the_lake_by_commit_day_as_the_local_lake_does() {
    // The local lake's folder is the UTC day of a row's committedAt (twopc_fanout::parquet_lake).
    let d = twopc_fanout::detect::Detected::TransactionCompleted {
        tx_id: "t".into(),
        status: "COMMITTED".into(),
        participants: vec![],
        completed_at: 1_700_000_000_000,
    };
    let row = twopc_fanout::rows::row(&d);
    assert_eq!(row["committedAt"], 1_700_000_000_000_u64, "epoch ms");
    assert_eq!(
        twopc_fanout::rows::partition_date(1_700_000_000_000),
        "2023-11-14"
    );
    // Firehose reads the same field, in seconds, as the same UTC day, under the same prefix.
    let lines = block("Resources", "LakeStream");
    assert_eq!(
        value(&lines, "Prefix"),
        Some(
            format!(
                "{}/dt=!{{partitionKeyFromQuery:dt}}/",
                twopc_fanout::lake::PREFIX
            )
            .as_str()
        )
    );
    assert_eq!(
        value(&lines, "ParameterValue"),
        Some(r#"'{dt: (.committedAt / 1000 | floor | strftime("%Y-%m-%d"))}'"#)
    );
    // Parquet, as the local files: converted against the Glue table, compressed inside.
    assert_eq!(value(&lines, "CompressionFormat"), Some("UNCOMPRESSED"));
    assert_eq!(value(&lines, "FileExtension"), Some(".parquet"));
    assert_eq!(value(&lines, "TableName"), Some("!Ref LakeTable"));
    assert_eq!(value(&lines, "Compression"), Some("SNAPPY"));
    assert_eq!(value(&lines, "CaseInsensitive"), Some("true"));
}

/// The `{Name: n, Type: t}` columns of a Glue table resource.
fn glue_columns(resource: &str) -> Vec<(String, String)> {
    block("Resources", resource)
        .iter()
        .filter_map(|l| {
            let t = l.trim().strip_prefix("- {Name: ")?.strip_suffix('}')?;
            let (name, kind) = t.split_once(", Type: ")?;
            Some((name.to_owned(), kind.trim_matches('"').to_owned()))
        })
        .collect()
}

fn lake_columns() -> Vec<(String, String)> {
    twopc_fanout::lake::COLUMNS
        .iter()
        .map(|c| (c.name.to_owned(), c.kind.glue()))
        .collect()
}

#[test]
fn the_glue_table_has_the_columns_the_local_parquet_files_are_written_with() {
    assert_eq!(glue_columns("LakeTable"), lake_columns());
    let table = block("Resources", "LakeTable");
    assert_eq!(value(&table, "classification"), Some("parquet"));
    assert_eq!(
        value(&table, "SerializationLibrary"),
        Some("org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe")
    );
    // The partition is the folder, text, as `make lake` reads it.
    assert!(
        table
            .iter()
            .any(|l| l.trim() == format!("- Name: {}", twopc_fanout::lake::PARTITION))
    );
    // Every column is a key of the JSON rows Firehose converts (matched ignoring case).
    let item = twopc_fanout::rows::row(&twopc_fanout::detect::Detected::ItemCommitted {
        tx_id: "t".into(),
        participant: "accounts".into(),
        key: serde_json::from_str(r#"{"id": "alice"}"#).expect("key"),
        item: Some(serde_json::from_str(r#"{"id": "alice", "balance": 1.50}"#).expect("item")),
        version: 1.into(),
        committed_at: 1,
    });
    let tx = twopc_fanout::rows::row(&twopc_fanout::detect::Detected::TransactionCompleted {
        tx_id: "t".into(),
        status: "COMMITTED".into(),
        participants: vec![],
        completed_at: 1,
    });
    for column in twopc_fanout::lake::COLUMNS {
        assert!(
            [&item, &tx]
                .iter()
                .any(|r| twopc_fanout::lake::field(r, column.name).is_some()),
            "no row carries {}",
            column.name
        );
    }
}

/// The text of a literal block (`key: |`) inside a resource.
fn literal(resource: &str, key: &str) -> String {
    let lines: Vec<&str> = TEMPLATE.lines().collect();
    let header = format!("  {resource}:");
    let from = lines.iter().position(|l| *l == header).expect("resource");
    let at = lines[from..]
        .iter()
        .position(|l| l.trim() == format!("{key}: |"))
        .map(|i| from + i)
        .unwrap_or_else(|| panic!("no {key} in {resource}"));
    let depth = indent(lines[at]);
    let body: Vec<&str> = lines[at + 1..]
        .iter()
        .take_while(|l| l.trim().is_empty() || indent(l) > depth)
        .copied()
        .collect();
    let strip = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent(l))
        .min()
        .unwrap_or(0);
    body.iter()
        .map(|l| l.get(strip..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_owned()
        + "\n"
}

fn lake_sql(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../infra/lake")
        .join(format!("{name}.sql"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn athena_saves_the_queries_make_lake_runs_and_a_workgroup_with_a_result_location() {
    for (resource, name) in [
        ("LakeQueryBalanceChanges", "balance-changes-per-day"),
        ("LakeQueryAbortedAndStuck", "aborted-and-stuck-today"),
    ] {
        let lines = block("Resources", resource);
        assert_eq!(value(&lines, "Name"), Some(name));
        assert_eq!(value(&lines, "WorkGroup"), Some("!Ref LakeWorkGroup"));
        assert_eq!(value(&lines, "Database"), Some("!Ref LakeDatabase"));
        assert_eq!(
            literal(resource, "QueryString"),
            lake_sql(name),
            "{resource}"
        );
    }
    let workgroup = block("Resources", "LakeWorkGroup");
    assert_eq!(
        value(&workgroup, "OutputLocation"),
        Some("!Sub s3://${LakeBucket}/athena-results/")
    );
    assert_eq!(
        value(&workgroup, "EnforceWorkGroupConfiguration"),
        Some("true")
    );
}

#[test]
fn the_changes_view_is_the_sql_make_lake_runs_over_the_same_columns() {
    let view = block("Resources", "LakeChangesView");
    assert_eq!(value(&view, "TableType"), Some("VIRTUAL_VIEW"));
    let text = view.join("\n");
    let sql = lake_sql("changes");
    assert!(
        text.contains(&format!(r#"{{"originalSql": "{}","#, sql.trim())),
        "the view's SQL is not infra/lake/changes.sql"
    );
    let mut columns = lake_columns();
    columns.push((twopc_fanout::lake::PARTITION.into(), "string".into()));
    assert_eq!(glue_columns("LakeChangesView"), columns);
    let mut trino: Vec<(String, String)> = twopc_fanout::lake::COLUMNS
        .iter()
        .map(|c| (c.name.to_owned(), c.kind.trino()))
        .collect();
    trino.push((twopc_fanout::lake::PARTITION.into(), "varchar".into()));
    for (name, kind) in &trino {
        assert!(
            text.contains(&format!(r#"{{"name": "{name}", "type": "{kind}"}}"#)),
            "the view's stored columns lack {name} {kind}"
        );
    }
}

#[test]
fn websocket_connections_need_the_authorizer_and_the_shared_token_is_an_opt_in_secret() {
    let connect = block("Resources", "ConnectRoute");
    assert_eq!(value(&connect, "AuthorizationType"), Some("CUSTOM"));
    assert_eq!(
        value(&connect, "AuthorizerId"),
        Some("!Ref WebSocketAuthorizer")
    );
    let authorizer = block("Resources", "WebSocketAuthorizer");
    assert_eq!(value(&authorizer, "AuthorizerType"), Some("REQUEST"));
    assert!(
        authorizer
            .iter()
            .any(|l| l.trim() == "- route.request.querystring.token"),
        "no ?token=, no authorizer call: API Gateway refuses"
    );
    let set = variables_set();
    assert_eq!(
        set.get(var::WS_TOKEN).cloned().unwrap_or_default(),
        ["WsAuthorizerFunction"]
    );
    for v in [var::WS_ISSUER, var::WS_AUDIENCE, var::WS_JWKS_URL] {
        assert_eq!(
            set.get(v).cloned().unwrap_or_default(),
            ["WsAuthorizerFunction"],
            "{v}"
        );
    }
    let function = block("Resources", "WsAuthorizerFunction");
    assert!(
        function
            .iter()
            .any(|l| l
                .contains("{{resolve:secretsmanager:${WebSocketTokenSecretArn}:SecretString:::${WebSocketTokenSecretVersion}}}")),
        "the shared token comes from Secrets Manager only"
    );
    // Closed unless configured: no issuer and no shared token by default.
    for p in [
        "WebSocketIssuer",
        "WebSocketJwksUrl",
        "WebSocketTokenSecretArn",
    ] {
        assert_eq!(
            value(&block("Parameters", p), "Default"),
            Some("\"\""),
            "{p}"
        );
    }
}

#[test]
fn both_apis_are_throttled_by_parameters() {
    let api = block("Resources", "TransactionsApi");
    assert_eq!(
        value(&api, "ThrottlingRateLimit"),
        Some("!Ref ApiThrottlingRateLimit")
    );
    assert_eq!(
        value(&api, "ThrottlingBurstLimit"),
        Some("!Ref ApiThrottlingBurstLimit")
    );
    let stage = block("Resources", "WebSocketStage");
    assert_eq!(
        value(&stage, "ThrottlingRateLimit"),
        Some("!Ref WebSocketThrottlingRateLimit")
    );
    assert_eq!(
        value(&stage, "ThrottlingBurstLimit"),
        Some("!Ref WebSocketThrottlingBurstLimit")
    );
    for p in [
        "ApiThrottlingRateLimit",
        "ApiThrottlingBurstLimit",
        "WebSocketThrottlingRateLimit",
        "WebSocketThrottlingBurstLimit",
    ] {
        let lines = block("Parameters", p);
        let default: u64 = value(&lines, "Default")
            .and_then(|d| d.parse().ok())
            .unwrap_or_else(|| panic!("{p}: a numeric default"));
        assert!(default > 0, "{p}: open by default");
        assert_eq!(
            value(&lines, "MinValue"),
            Some("0"),
            "{p}: 0 is the emergency stop"
        );
    }
}

#[test]
fn the_completers_filter_names_the_mark_and_the_status_the_code_writes() {
    let lines = block("Resources", "SweeperFunction");
    let pattern = lines
        .iter()
        .find_map(|l| l.trim().strip_prefix("- Pattern: "))
        .expect("the AskedRecoveries mapping's filter")
        .trim_matches('\'');
    let filter: serde_json::Value = serde_json::from_str(pattern).expect("a JSON pattern");
    let image = &filter["dynamodb"]["NewImage"];
    assert_eq!(
        image[twopc_core::layout::STATUS]["S"],
        serde_json::json!([twopc_core::status::TxStatus::Staging.as_str()]),
        "{filter}"
    );
    assert_eq!(
        image[twopc_core::layout::RECOVERY_ASKED]["N"],
        serde_json::json!([{"exists": true}]),
        "{filter}"
    );
    let stream = lines
        .iter()
        .any(|l| l.trim() == "Stream: !GetAtt TransactionsTable.StreamArn");
    assert!(
        stream,
        "the completer reads the transactions table's stream"
    );
}

#[test]
fn every_function_can_be_pointed_at_local_emulators() {
    // `sam local --env-vars` sets only what the template declares; empty is unset in AWS.
    let set = variables_set();
    let globals = block("Globals", "Function");
    for v in [var::DYNAMODB_ENDPOINT, var::LAMBDA_ENDPOINT] {
        assert_eq!(
            set.get(v).cloned(),
            Some(vec!["Function".to_owned()]),
            "{v}"
        );
        assert_eq!(value(&globals, v), Some("\"\""), "{v} is empty in AWS");
    }
}

/// `sam build` never deploys a stale binary: SAM's build cache keys each function on its
/// `CodeUri` folder (`crates/<function>`), so a change to a library crate alone (core, dynamo,
/// runtime) would leave every function "cached". Each build is cargo's, whose own cache is
/// exact.
#[test]
fn sam_build_does_not_use_its_folder_keyed_cache() {
    let config = include_str!("../../samconfig.toml");
    let build: Vec<&str> = config
        .lines()
        .skip_while(|l| l.trim() != "[default.build.parameters]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter(|l| is_content(l))
        .collect();
    let setting = |name: &str| {
        build.iter().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == name).then(|| v.trim())
        })
    };
    assert_eq!(
        setting("cached"),
        Some("false"),
        "samconfig.toml: {build:?}"
    );
}
