//! Every AWS request a function makes, recorded when `TWOPC_RECORD_AWS_CALLS` names a folder
//! (unset in AWS): [`Aws`](crate::Aws), the one loader every function builds its clients
//! from, adds a [`Recorder`] to each client's configuration. A request is written once per
//! process and distinct [`RecordedCall`]: who made it ([`Caller`]), the IAM action it needs and the
//! resource, said by the variable that named it (`TWOPC_TRANSACTIONS_TABLE`, a direct table
//! of `TWOPC_SERVICES`, ...), never by its name, so that `tests/tests/grants.rs` can follow
//! `template.yaml`'s `Environment` to the logical resource and hold the function's
//! `Policies` to every call the suites made.
//!
//! `TWOPC_RECORD_AWS_CALLS=-` writes the lines to standard error instead, each after
//! [`STDERR_PREFIX`]: how `make sam-local` reads them out of Lambda's container.
//!
//! A resource is one of: `VAR` (the table or delivery stream the variable names),
//! `TWOPC_SERVICES.direct` (a table a service reaches `direct`), `TWOPC_SERVICES.lambda` (a
//! participant function), `…/index/NAME` (an index of it) and
//! `TWOPC_WEBSOCKET_ENDPOINT/METHOD/@connections` (the management API's connections).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, Metadata};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use serde::Serialize;
use serde_json::Value;

use crate::config::Role;
use twopc_function::var;

mod names;

pub(crate) use names::DIRECT;
use names::{LAMBDA, ResourceNames, dynamodb_actions};

/// What starts each recorded line on standard error (`TWOPC_RECORD_AWS_CALLS=-`).
pub(crate) const STDERR_PREFIX: &str = "twopc-aws-call ";

/// Who makes a call: a function of `template.yaml`, or the completer (the sweeper function
/// invoked by the transactions table's stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Caller {
    /// The coordinator function (and the participants it reaches `direct`, in its process).
    Coordinator,
    /// A participant function.
    Participant,
    /// The sweeper function's scheduled pass.
    Sweeper,
    /// The sweeper function on the transactions table's stream.
    Completer,
    /// The stream processor function.
    StreamProcessor,
    /// The WebSocket routes' function.
    Connections,
    /// The WebSocket `$connect` authorizer.
    WsAuthorizer,
}

impl Caller {
    /// Every caller.
    pub const ALL: [Caller; 7] = [
        Caller::Coordinator,
        Caller::Participant,
        Caller::Sweeper,
        Caller::Completer,
        Caller::StreamProcessor,
        Caller::Connections,
        Caller::WsAuthorizer,
    ];

    /// Its name in the record.
    pub fn as_str(self) -> &'static str {
        match self {
            Caller::Completer => "completer",
            Caller::Coordinator => Role::Coordinator.function(),
            Caller::Participant => Role::Participant.function(),
            Caller::Sweeper => Role::Sweeper.function(),
            Caller::StreamProcessor => Role::StreamProcessor.function(),
            Caller::Connections => Role::Connections.function(),
            Caller::WsAuthorizer => Role::WsAuthorizer.function(),
        }
    }
}

impl From<Role> for Caller {
    fn from(role: Role) -> Caller {
        match role {
            Role::Coordinator => Caller::Coordinator,
            Role::Participant => Caller::Participant,
            Role::Sweeper => Caller::Sweeper,
            Role::StreamProcessor => Caller::StreamProcessor,
            Role::Connections => Caller::Connections,
            Role::WsAuthorizer => Caller::WsAuthorizer,
        }
    }
}

/// One recorded call: one line of the record.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RecordedCall {
    /// [`Caller::as_str`].
    pub role: &'static str,
    /// The service, as IAM prefixes its actions (`dynamodb`, `lambda`, ...).
    pub service: String,
    /// The API operation (`TransactWriteItems`, `Invoke`, ...).
    pub operation: String,
    /// The IAM action it needs (one per item kind of a `TransactWriteItems`).
    pub action: String,
    /// Every way the configuration named the resource (see the module's map).
    pub resource: BTreeSet<String>,
    /// The resource's name, when no variable named it (the check refuses such a call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unnamed: Option<String>,
}

/// The interceptor: records each request of a client before it goes on the wire. Clones share
/// the record of what this process already wrote.
#[derive(Clone, Debug)]
pub(crate) struct Recorder {
    caller: Caller,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// This process's file of the record; `None`: standard error.
    file: Option<PathBuf>,
    names: ResourceNames,
    written: Mutex<BTreeSet<RecordedCall>>,
}

impl Recorder {
    /// Records into a file of this process in `folder` (`-`: standard error), naming
    /// resources as `resources` do (each with the variable that named it), the calls of
    /// `caller`.
    pub(crate) fn new(
        folder: &Path,
        resources: Vec<(String, &'static str)>,
        caller: Caller,
    ) -> Recorder {
        let file = (folder != Path::new("-"))
            .then(|| folder.join(format!("calls-{}.jsonl", std::process::id())));
        Recorder {
            caller,
            shared: Arc::new(Shared {
                file,
                names: ResourceNames::of(resources),
                written: Mutex::new(BTreeSet::new()),
            }),
        }
    }

    /// The same record, for the calls of another caller in this process.
    pub(crate) fn acting_as(&self, caller: Caller) -> Recorder {
        Recorder {
            caller,
            shared: self.shared.clone(),
        }
    }

    /// What one request needs: one call, or one per item of a transaction or batch.
    fn calls(&self, service: &str, operation: &str, request: &HttpRequest) -> Vec<RecordedCall> {
        let body = || -> Value {
            serde_json::from_slice(request.body().bytes().unwrap_or_default()).unwrap_or_default()
        };
        let names = &self.shared.names;
        let call = |prefix: &str, action: &str, (resource, unnamed)| RecordedCall {
            role: self.caller.as_str(),
            service: prefix.to_owned(),
            operation: operation.to_owned(),
            action: format!("{prefix}:{action}"),
            resource,
            unnamed,
        };
        match service {
            "DynamoDB" => dynamodb_actions(operation, &body())
                .into_iter()
                .map(|(action, table, index)| {
                    call(
                        "dynamodb",
                        &action,
                        names.resource(&table, index.as_deref()),
                    )
                })
                .collect(),
            "Firehose" => {
                let stream = body()["DeliveryStreamName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                vec![call("firehose", operation, names.resource(&stream, None))]
            }
            // Every invoke is a participant call: its function is a participant service's
            // target, named by the coordinator's `TWOPC_SERVICES` (the sweeper reads it from
            // the record the coordinator wrote).
            "Lambda" => {
                let action = if operation == "Invoke" {
                    "InvokeFunction"
                } else {
                    operation
                };
                vec![call("lambda", action, ([LAMBDA.to_owned()].into(), None))]
            }
            // The client is built for the one endpoint the variable names.
            "ApiGatewayManagementApi" => {
                let route = format!(
                    "{}/{}/@connections",
                    var::WEBSOCKET_ENDPOINT,
                    request.method()
                );
                vec![call(
                    "execute-api",
                    "ManageConnections",
                    ([route].into(), None),
                )]
            }
            other => vec![call(
                &other.to_lowercase(),
                operation,
                (BTreeSet::new(), Some(request.uri().to_owned())),
            )],
        }
    }

    /// Appends the calls this process has not written yet to its file.
    fn write(&self, calls: Vec<RecordedCall>) -> Result<(), BoxError> {
        let mut written = self
            .shared
            .written
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let prefix = if self.shared.file.is_some() {
            ""
        } else {
            STDERR_PREFIX
        };
        let mut lines = String::new();
        for call in calls {
            if !written.contains(&call) {
                lines.push_str(prefix);
                lines.push_str(&serde_json::to_string(&call)?);
                lines.push('\n');
                written.insert(call);
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        let Some(file) = &self.shared.file else {
            std::io::stderr().lock().write_all(lines.as_bytes())?;
            return Ok(());
        };
        if let Some(folder) = file.parent() {
            std::fs::create_dir_all(folder)?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)?
            .write_all(lines.as_bytes())?;
        Ok(())
    }
}

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "twopc AWS call recorder"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(metadata) = cfg.load::<Metadata>() else {
            return Err("recording AWS calls: the request carries no operation metadata".into());
        };
        let calls = self.calls(metadata.service(), metadata.name(), context.request());
        // A call that cannot be recorded fails: a record with holes would prove nothing.
        self.write(calls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use serde_json::json;

    fn config() -> crate::config::SweeperSettings {
        let services = json!({
            "accounts": {"target": {"transport": "direct", "table": "t-accounts"},
                         "key": {"hash": {"name": "id", "type": "S"}}},
            "wallets": {"target": {"transport": "lambda", "function": "wallets-fn"},
                        "key": {"hash": {"name": "id", "type": "S"}}},
        })
        .to_string();
        let locks = r#"{"t-accounts": {"hash": {"name": "id", "type": "S"}}}"#;
        crate::config::SweeperSettings::from_lookup(|name| match name {
            var::TRANSACTIONS_TABLE => Some("t-tx".to_owned()),
            var::SERVICES => Some(services.clone()),
            var::LOCK_TABLES => Some(locks.to_owned()),
            _ => None,
        })
        .expect("config")
    }

    fn request(body: &Value) -> HttpRequest {
        let mut r = HttpRequest::empty();
        *r.body_mut() = aws_smithy_types::body::SdkBody::from(body.to_string());
        r
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_native_transaction_needs_each_items_action_on_its_table_named_by_its_variable() {
        let r = Recorder::new(
            Path::new("unused"),
            config().resources(),
            Caller::Coordinator,
        );
        let body = json!({"TransactItems": [
            {"Put": {"TableName": "t-tx"}},
            {"Update": {"TableName": "t-accounts"}},
            {"ConditionCheck": {"TableName": "elsewhere"}},
        ]});
        let calls = r.calls("DynamoDB", "TransactWriteItems", &request(&body));
        let seen: Vec<_> = calls
            .iter()
            .map(|c| (c.action.as_str(), c.resource.clone(), c.unnamed.clone()))
            .collect();
        assert_eq!(
            seen,
            [
                ("dynamodb:PutItem", set(&["TWOPC_TRANSACTIONS_TABLE"]), None),
                (
                    "dynamodb:UpdateItem",
                    set(&["TWOPC_LOCK_TABLES", "TWOPC_SERVICES.direct"]),
                    None
                ),
                (
                    "dynamodb:ConditionCheckItem",
                    set(&[]),
                    Some("elsewhere".to_owned())
                ),
            ]
        );
        assert!(calls.iter().all(|c| c.role == "coordinator"));
    }

    #[test]
    fn an_index_query_an_invoke_and_a_push_are_named_by_their_variables() {
        let r = Recorder::new(Path::new("unused"), config().resources(), Caller::Sweeper);
        let query = json!({"TableName": "t-tx", "IndexName": "pending-by-deadline"});
        let calls = r.calls("DynamoDB", "Query", &request(&query));
        assert_eq!(
            calls[0].resource,
            set(&["TWOPC_TRANSACTIONS_TABLE/index/pending-by-deadline"])
        );
        let calls = r.calls("Lambda", "Invoke", &request(&json!({})));
        assert_eq!(
            (calls[0].action.as_str(), &calls[0].resource),
            ("lambda:InvokeFunction", &set(&["TWOPC_SERVICES.lambda"]))
        );
        let mut post = request(&json!({}));
        post.set_method("POST").expect("a method");
        let calls = r.acting_as(Caller::StreamProcessor).calls(
            "ApiGatewayManagementApi",
            "PostToConnection",
            &post,
        );
        assert_eq!(
            (calls[0].role, calls[0].action.as_str(), &calls[0].resource),
            (
                "stream-processor",
                "execute-api:ManageConnections",
                &set(&["TWOPC_WEBSOCKET_ENDPOINT/POST/@connections"])
            )
        );
    }

    #[test]
    fn each_distinct_call_is_written_once_per_process() {
        let folder =
            std::env::temp_dir().join(format!("twopc-record-{}", twopc_core::ids::TxId::random()));
        let r = Recorder::new(&folder, config().resources(), Caller::Coordinator);
        let get = json!({"TableName": "t-tx"});
        for _ in 0..3 {
            r.write(r.calls("DynamoDB", "GetItem", &request(&get)))
                .expect("written");
        }
        let completer = r.acting_as(Caller::Completer);
        completer
            .write(completer.calls("DynamoDB", "GetItem", &request(&get)))
            .expect("written");
        let file = r.shared.file.clone().expect("a file");
        let text = std::fs::read_to_string(file).expect("the record");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect();
        assert_eq!(lines.len(), 2, "one line per caller: {text}");
        assert_eq!(
            lines[0],
            json!({"role": "coordinator", "service": "dynamodb", "operation": "GetItem",
                   "action": "dynamodb:GetItem", "resource": ["TWOPC_TRANSACTIONS_TABLE"]})
        );
        assert_eq!(lines[1]["role"], "completer");
        let _ = std::fs::remove_dir_all(folder);
    }
}
