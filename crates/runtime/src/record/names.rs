//! What a request touches: the variables of a configuration that named each resource
//! ([`ResourceNames`]), and the IAM actions and tables of a DynamoDB request ([`dynamodb_actions`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// The variables that named each resource of a configuration, by the resource's name.
#[derive(Clone, Debug, Default)]
pub(super) struct ResourceNames(BTreeMap<String, BTreeSet<String>>);

/// How `TWOPC_SERVICES` names a table reached `direct`, and a participant function.
pub(crate) const DIRECT: &str = "TWOPC_SERVICES.direct";
pub(super) const LAMBDA: &str = "TWOPC_SERVICES.lambda";

impl ResourceNames {
    pub(super) fn of(resources: Vec<(String, &'static str)>) -> ResourceNames {
        let mut names = ResourceNames::default();
        for (name, by) in resources {
            names.add(&name, by);
        }
        names
    }

    fn add(&mut self, name: &str, by: &str) {
        if !name.is_empty() {
            self.0
                .entry(name.to_owned())
                .or_default()
                .insert(by.to_owned());
        }
    }

    /// How `name` (with `index`, an index of it) was named; its name when nothing named it.
    pub(super) fn resource(
        &self,
        name: &str,
        index: Option<&str>,
    ) -> (BTreeSet<String>, Option<String>) {
        let suffix = index.map(|i| format!("/index/{i}")).unwrap_or_default();
        match self.0.get(name) {
            Some(vars) => (vars.iter().map(|v| format!("{v}{suffix}")).collect(), None),
            None => (BTreeSet::new(), Some(format!("{name}{suffix}"))),
        }
    }
}

/// The IAM action (without its prefix), table and index of each write or read of a DynamoDB
/// request: the items of `TransactWriteItems` each need their own kind's action.
pub(super) fn dynamodb_actions(
    operation: &str,
    body: &Value,
) -> Vec<(String, String, Option<String>)> {
    let table = |v: &Value| v["TableName"].as_str().unwrap_or_default().to_owned();
    let items = |key: &str| body[key].as_array().cloned().unwrap_or_default();
    match operation {
        "TransactWriteItems" => items("TransactItems")
            .iter()
            .flat_map(|item| {
                [
                    ("Put", "PutItem"),
                    ("Update", "UpdateItem"),
                    ("Delete", "DeleteItem"),
                    ("ConditionCheck", "ConditionCheckItem"),
                ]
                .into_iter()
                .filter(|(kind, _)| item.get(*kind).is_some())
                .map(|(kind, action)| (action.to_owned(), table(&item[kind]), None))
            })
            .collect(),
        "TransactGetItems" => items("TransactItems")
            .iter()
            .map(|item| ("GetItem".to_owned(), table(&item["Get"]), None))
            .collect(),
        "BatchWriteItem" | "BatchGetItem" => body["RequestItems"]
            .as_object()
            .map(|tables| {
                tables
                    .keys()
                    .map(|t| (operation.to_owned(), t.clone(), None))
                    .collect()
            })
            .unwrap_or_default(),
        _ => vec![(
            operation.to_owned(),
            table(body),
            body["IndexName"].as_str().map(str::to_owned),
        )],
    }
}
