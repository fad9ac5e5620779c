//! `template.yaml`'s grants held to the AWS calls the functions made (`twopc_runtime::record`):
//! each recorded (role, action, resource) must be granted to every function of the template
//! that acts as that role, the resource followed through the function's `Environment` (or the
//! coordinator's, for `TWOPC_SERVICES`: recovery finishes the coordinator's transactions) to
//! its logical id; and each granted (action, resource) that no call exercised must carry a
//! comment naming the action, above its statement or on its line, saying why it is there.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use twopc_function::var;
use twopc_runtime::config::Role;
use twopc_runtime::record::Caller;

use crate::template::{Template, indent, is_content, substitute, value};

/// One line of the record.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordLine {
    /// Who made it (`twopc_runtime::record::Caller::as_str`).
    pub role: String,
    /// The IAM action it needs.
    pub action: String,
    /// How the configuration named its resource.
    pub resource: BTreeSet<String>,
    /// Its name, when nothing named it.
    #[serde(default)]
    pub unnamed: Option<String>,
}

/// Every call of the record in `folder` (each process's file), once each.
pub fn read_record(folder: &Path) -> Result<BTreeSet<RecordLine>, String> {
    let entries = std::fs::read_dir(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    let mut calls = BTreeSet::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let call: RecordLine = serde_json::from_str(line)
                .map_err(|e| format!("{}: {e}: {line}", path.display()))?;
            calls.insert(call);
        }
    }
    Ok(calls)
}

/// One granted action on one resource (a logical id, with `/index/NAME` or an API's route).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The statement's `Sid`.
    pub sid: String,
    /// The IAM action.
    pub action: String,
    /// The resource, as the checker names it (`AccountsTable`, `AccountsTable/index/NAME`,
    /// `WebSocketApi/WebSocketStage/POST/@connections/*`).
    pub resource: String,
    /// The comments above the statement and on the action's line.
    pub why: String,
}

/// A function of the template.
#[derive(Clone, Debug)]
pub struct Function {
    /// Its logical id.
    pub id: String,
    /// The roles it acts as (the sweeper is the completer too).
    pub roles: Vec<&'static str>,
    /// What its `Policies` grant.
    pub grants: Vec<Grant>,
}

/// The resource of a `Resource:` value, as the checker names it.
fn logical(resource: &str) -> String {
    let r = resource
        .trim()
        .trim_start_matches("!GetAtt ")
        .trim_start_matches("!Sub ")
        .trim_matches('"');
    if let Some(arn) = r.strip_prefix("arn:") {
        // arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${Api}/${Stage}/...
        let path = arn.rsplit(':').next().unwrap_or_default();
        return substitute(path, str::to_owned);
    }
    substitute(r, |inner| inner.trim_end_matches(".Arn").to_owned())
        .trim_end_matches(".Arn")
        .to_owned()
}

/// The grants of a function's `Policies`.
fn grants(lines: &[&str]) -> Vec<Grant> {
    let Some(start) = lines.iter().position(|l| l.trim() == "Policies:") else {
        return vec![];
    };
    let depth = indent(lines[start]);
    let body: Vec<&str> = lines[start + 1..]
        .iter()
        .take_while(|l| !is_content(l) || indent(l) > depth)
        .copied()
        .collect();
    let mut out = vec![];
    let mut i = 0;
    while i < body.len() {
        let Some(sid) = body[i].trim().strip_prefix("- Sid: ") else {
            i += 1;
            continue;
        };
        let above: Vec<&str> = body[..i]
            .iter()
            .rev()
            .take_while(|l| l.trim().starts_with('#'))
            .map(|l| l.trim())
            .collect();
        let statement_depth = indent(body[i]);
        let end = body[i + 1..]
            .iter()
            .position(|l| is_content(l) && indent(l) <= statement_depth)
            .map_or(body.len(), |p| i + 1 + p);
        let statement = &body[i..end];
        let list = |key: &str| -> Vec<(String, String)> {
            let Some(at) = statement.iter().position(|l| {
                l.trim()
                    .trim_start_matches("- ")
                    .starts_with(&format!("{key}:"))
            }) else {
                return vec![];
            };
            let (code, comment) = split_comment(statement[at]);
            let inline = code
                .trim()
                .trim_start_matches("- ")
                .trim_start_matches(&format!("{key}:"))
                .trim();
            if !inline.is_empty() {
                return vec![(inline.to_owned(), comment.to_owned())];
            }
            statement[at + 1..]
                .iter()
                .take_while(|l| !is_content(l) || l.trim().starts_with("- "))
                .filter(|l| is_content(l))
                .map(|l| {
                    let (code, comment) = split_comment(l);
                    (
                        code.trim().trim_start_matches("- ").to_owned(),
                        comment.to_owned(),
                    )
                })
                .collect()
        };
        let above = above.join(" ");
        for (action, comment) in list("Action") {
            for (resource, _) in list("Resource") {
                out.push(Grant {
                    sid: sid.trim().to_owned(),
                    action: action.clone(),
                    resource: logical(&resource),
                    why: format!("{above} {comment}"),
                });
            }
        }
        i = end;
    }
    out
}

/// A line's code and its trailing comment (` # ...`).
fn split_comment(line: &str) -> (&str, &str) {
    match line.find(" #") {
        Some(i) => (&line[..i], &line[i + 2..]),
        None => (line, ""),
    }
}

impl Template<'_> {
    /// The functions, their roles and grants.
    pub fn functions(&self) -> Vec<Function> {
        self.resources_of("AWS::Serverless::Function")
            .into_iter()
            .map(|id| {
                let lines = self.lines_of("Resources", &id);
                let binary = value(&self.block("Resources", &id), "Binary")
                    .unwrap_or_default()
                    .to_owned();
                let role = Role::ALL.into_iter().find(|r| r.function() == binary);
                let mut roles: Vec<&'static str> =
                    role.map(|r| Caller::from(r).as_str()).into_iter().collect();
                if role == Some(Role::Sweeper) {
                    roles.push(Caller::Completer.as_str());
                }
                Function {
                    grants: grants(&lines),
                    id,
                    roles,
                }
            })
            .collect()
    }

    /// A variable's value for a function: its own, else the Globals'.
    fn variable(&self, function: &str, name: &str) -> Option<String> {
        let all = self.variables();
        let of = |owner: &str| {
            all.iter()
                .find(|(o, n, _)| *o == owner && *n == name)
                .map(|(_, _, v)| (*v).to_owned())
        };
        of(function).or_else(|| of("Function"))
    }

    /// The logical resources a recorded resource is for `function` (empty: the deployed
    /// function is not configured so, and never makes that call).
    pub fn resolve(&self, function: &str, resource: &str) -> BTreeSet<String> {
        let (base, suffix) = resource
            .find('/')
            .map_or((resource, ""), |i| (&resource[..i], &resource[i..]));
        let (name, part) = base.split_once('.').unwrap_or((base, ""));
        let found: BTreeSet<String> = if name == var::SERVICES {
            self.services(function, part)
        } else if name == var::LOCK_TABLES {
            match self.variable(function, name) {
                None => BTreeSet::new(),
                Some(_) => {
                    let json = self.folded_sub(function, name, str::to_owned);
                    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&json)
                        .map(|tables| tables.keys().cloned().collect())
                        .unwrap_or_default()
                }
            }
        } else if name == var::WEBSOCKET_ENDPOINT {
            // !Sub https://${WebSocketApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}/${WebSocketStage}
            self.variable(function, name)
                .and_then(|v| {
                    let api = v.split("${").nth(1)?.split('}').next()?.to_owned();
                    let stage = v.rsplit("${").next()?.split('}').next()?.to_owned();
                    Some(format!("{api}/{stage}"))
                })
                .into_iter()
                .collect()
        } else {
            self.variable(function, name)
                .and_then(|v| v.strip_prefix("!Ref ").map(str::to_owned))
                .into_iter()
                .collect()
        };
        let suffix = if suffix.ends_with("/@connections") {
            format!("{suffix}/*")
        } else {
            suffix.to_owned()
        };
        found.into_iter().map(|r| format!("{r}{suffix}")).collect()
    }

    /// The tables (`direct`) or functions (`lambda`) of `TWOPC_SERVICES`: the function's own,
    /// else the coordinator's.
    fn services(&self, function: &str, transport: &str) -> BTreeSet<String> {
        let owner = if self.variable(function, var::SERVICES).is_some() {
            function.to_owned()
        } else {
            match self
                .variables()
                .into_iter()
                .find(|(_, n, _)| *n == var::SERVICES)
            {
                Some((owner, _, _)) => owner.to_owned(),
                None => return BTreeSet::new(),
            }
        };
        let json = self.folded_sub(&owner, var::SERVICES, |r| {
            r.trim_end_matches(".Arn").to_owned()
        });
        let services: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&json).unwrap_or_default();
        let field = if transport == "direct" {
            "table"
        } else {
            "function"
        };
        services
            .values()
            .filter(|s| s["target"]["transport"] == transport)
            .filter_map(|s| s["target"][field].as_str().map(str::to_owned))
            .collect()
    }
}

/// What the check found.
#[derive(Debug, Default)]
pub struct GrantsReport {
    /// Recorded calls the template does not grant.
    pub missing: Vec<String>,
    /// Grants no call exercised and no comment explains.
    pub unexplained: Vec<String>,
    /// Calls on a resource no variable named (the test's configuration lacks one).
    pub unnamed: Vec<String>,
    /// Calls of roles no function of the template has.
    pub unknown_roles: Vec<String>,
    /// Calls in a configuration the template does not deploy (e.g. a service reached `direct`
    /// in a test that the template reaches over Lambda): not held to it.
    pub not_deployed: Vec<String>,
    /// Grants no call exercised, explained by their comments.
    pub explained: Vec<String>,
}

impl GrantsReport {
    /// Whether the template grants every call.
    pub fn grants_every_call(&self) -> bool {
        self.missing.is_empty() && self.unnamed.is_empty() && self.unknown_roles.is_empty()
    }
}

impl fmt::Display for GrantsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (title, lines) in [
            ("recorded but not granted", &self.missing),
            (
                "granted, exercised by no test, and no comment naming the action says why",
                &self.unexplained,
            ),
            ("called on a resource no variable named", &self.unnamed),
            ("called by a role no function has", &self.unknown_roles),
            (
                "not held (configured so in a test, not in the template)",
                &self.not_deployed,
            ),
            ("granted, exercised by no test, explained", &self.explained),
        ] {
            if !lines.is_empty() {
                writeln!(f, "{title}:")?;
                for l in lines {
                    writeln!(f, "  {l}")?;
                }
            }
        }
        Ok(())
    }
}

/// Holds the template's grants to `calls`.
pub fn check(template: &Template<'_>, calls: &BTreeSet<RecordLine>) -> GrantsReport {
    let functions = template.functions();
    let mut report = GrantsReport::default();
    let mut exercised: BTreeSet<(String, String, String)> = BTreeSet::new();
    for call in calls {
        if let Some(name) = &call.unnamed {
            report
                .unnamed
                .push(format!("{} {} on {name}", call.role, call.action));
            continue;
        }
        let acting: Vec<&Function> = functions
            .iter()
            .filter(|f| f.roles.contains(&call.role.as_str()))
            .collect();
        if acting.is_empty() {
            report.unknown_roles.push(format!("{call:?}"));
        }
        for f in acting {
            let targets: BTreeSet<String> = call
                .resource
                .iter()
                .flat_map(|r| template.resolve(&f.id, r))
                .collect();
            if targets.is_empty() {
                report.not_deployed.push(format!(
                    "{} ({}) {} on {:?}",
                    f.id, call.role, call.action, call.resource
                ));
            }
            for target in targets {
                let granted = f
                    .grants
                    .iter()
                    .any(|g| g.action == call.action && g.resource == target);
                if !granted {
                    report.missing.push(format!(
                        "{} ({}) calls {} on {target} (recorded as {:?})",
                        f.id, call.role, call.action, call.resource
                    ));
                }
                exercised.insert((f.id.clone(), call.action.clone(), target));
            }
        }
    }
    for f in &functions {
        for g in &f.grants {
            if exercised.contains(&(f.id.clone(), g.action.clone(), g.resource.clone())) {
                continue;
            }
            let line = format!("{} {}: {} on {}", f.id, g.sid, g.action, g.resource);
            if g.why.contains(&g.action) {
                report.explained.push(line);
            } else {
                report.unexplained.push(line);
            }
        }
    }
    report.missing.sort();
    report.missing.dedup();
    report.not_deployed.sort();
    report.not_deployed.dedup();
    report
}
