//! Builds DynamoDB expressions with every name and value behind a placeholder: nothing from a
//! request is ever spliced into expression text.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// Placeholders for one request.
#[derive(Default, Debug)]
pub struct Expr {
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Expr {
    /// A new, empty set of placeholders.
    pub fn new() -> Self {
        Self::default()
    }

    /// The placeholder (`#nK`) for an attribute name; the same name gets the same placeholder.
    pub fn name(&mut self, name: &str) -> String {
        if let Some((ph, _)) = self.names.iter().find(|(_, n)| n.as_str() == name) {
            return ph.clone();
        }
        let ph = format!("#n{}", self.names.len());
        self.names.insert(ph.clone(), name.to_owned());
        ph
    }

    /// A path `#a.#b` of names.
    pub fn path(&mut self, names: &[&str]) -> String {
        names
            .iter()
            .map(|n| self.name(n))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The placeholder (`:vK`) for a value.
    pub fn value(&mut self, v: AttributeValue) -> String {
        let ph = format!(":v{}", self.values.len());
        self.values.insert(ph.clone(), v);
        ph
    }

    /// The name map, or None if empty (the SDK rejects empty maps).
    pub fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    /// The value map, or None if empty.
    pub fn values(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}

/// `SET a, b REMOVE c, d` from clause lists.
pub fn update_expression(set: &[String], remove: &[String]) -> String {
    update_with_add(set, remove, &[])
}

/// `SET a, b REMOVE c ADD d :one` from clause lists (empty ones left out).
pub fn update_with_add(set: &[String], remove: &[String], add: &[String]) -> String {
    [("SET", set), ("REMOVE", remove), ("ADD", add)]
        .iter()
        .filter(|(_, clauses)| !clauses.is_empty())
        .map(|(word, clauses)| format!("{word} {}", clauses.join(", ")))
        .collect::<Vec<_>>()
        .join(" ")
}
