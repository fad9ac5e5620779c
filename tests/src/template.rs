//! `template.yaml` read as text, line by line (no YAML crate: CloudFormation's `!Ref`/`!Sub`
//! tags trip most of them), for the suites that hold it to the code (`tests/template.rs`) and
//! to the recorded calls (`tests/grants.rs`). The layout it relies on is the template's own:
//! two-space indentation, resources at level 1, one `key: value` per line.

use std::collections::BTreeMap;

/// The repository's `template.yaml`.
pub const TEMPLATE: &str = include_str!("../../template.yaml");

/// A template's text.
#[derive(Clone, Copy, Debug)]
pub struct Template<'a> {
    /// Its text.
    pub text: &'a str,
}

/// How deep a line is indented.
pub fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Whether a line says something (not blank, not a comment).
pub fn is_content(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && !t.starts_with('#')
}

/// `key: value` pairs of a block, in order (a leading `- ` is dropped).
pub fn pairs<'a>(lines: &[&'a str]) -> Vec<(&'a str, &'a str)> {
    lines
        .iter()
        .filter_map(|l| {
            let t = l.trim().trim_start_matches("- ");
            let (k, v) = t.split_once(':')?;
            Some((k.trim(), v.trim()))
        })
        .collect()
}

/// The first value of `key` in a block.
pub fn value<'a>(lines: &[&'a str], key: &str) -> Option<&'a str> {
    pairs(lines)
        .into_iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

impl<'a> Template<'a> {
    /// The repository's template.
    pub const fn repo() -> Template<'static> {
        Template { text: TEMPLATE }
    }

    /// Every line of a top-level section's entry (`Resources:` → `  Name:`), comments
    /// included, without its header.
    pub fn lines_of(&self, section: &str, name: &str) -> Vec<&'a str> {
        let lines: Vec<&str> = self.text.lines().collect();
        let start = lines
            .iter()
            .position(|l| *l == format!("{section}:"))
            .unwrap_or_else(|| panic!("no {section} section"));
        let header = format!("  {name}:");
        let from = lines[start..]
            .iter()
            .position(|l| *l == header)
            .map(|i| start + i + 1)
            .unwrap_or_else(|| panic!("no {section}.{name} in template.yaml"));
        lines[from..]
            .iter()
            .take_while(|l| !is_content(l) || indent(l) > 2)
            .copied()
            .collect()
    }

    /// The content lines of a top-level section's entry, without its header.
    pub fn block(&self, section: &str, name: &str) -> Vec<&'a str> {
        self.lines_of(section, name)
            .into_iter()
            .filter(|l| is_content(l))
            .collect()
    }

    /// The resources of a type, in the template's order.
    pub fn resources_of(&self, kind: &str) -> Vec<String> {
        let type_line = format!("Type: {kind}");
        let mut names = vec![];
        let mut current = None;
        let mut in_resources = false;
        for l in self.text.lines() {
            if indent(l) == 0 && is_content(l) {
                in_resources = l == "Resources:";
                continue;
            }
            if in_resources && indent(l) == 2 && is_content(l) {
                current = l.trim().strip_suffix(':').map(str::to_owned);
            }
            if in_resources && indent(l) == 4 && l.trim() == type_line {
                names.extend(current.clone());
            }
        }
        names
    }

    /// Environment variables set anywhere in the template: the keys of `Variables:` blocks,
    /// with the entries that set them (`Function` for Globals).
    pub fn variables_set(&self) -> BTreeMap<String, Vec<String>> {
        let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (owner, name, _) in self.variables() {
            found
                .entry(name.to_owned())
                .or_default()
                .push(owner.to_owned());
        }
        found
    }

    /// Every (entry, variable, value) of the `Variables:` blocks (a folded value as its first
    /// line, e.g. `!Sub >-`).
    pub fn variables(&self) -> Vec<(&'a str, &'a str, &'a str)> {
        let mut found = vec![];
        let lines: Vec<&str> = self.text.lines().collect();
        let mut owner = "";
        for (i, l) in lines.iter().enumerate() {
            if indent(l) == 2 && is_content(l) {
                owner = l.trim().trim_end_matches(':');
            }
            if l.trim() == "Variables:" {
                let depth = indent(l);
                for v in lines[i + 1..]
                    .iter()
                    .filter(|v| is_content(v))
                    .take_while(|v| indent(v) > depth)
                    .filter(|v| indent(v) == depth + 2)
                {
                    if let Some((k, value)) = v.trim().split_once(':') {
                        found.push((owner, k, value.trim()));
                    }
                }
            }
        }
        found
    }

    /// A `NAME: !Sub >-` folded value of a resource, its `${...}` replaced by `sub`.
    pub fn folded_sub(&self, resource: &str, name: &str, sub: impl Fn(&str) -> String) -> String {
        let lines = self.block("Resources", resource);
        let start = lines
            .iter()
            .position(|l| l.trim() == format!("{name}: !Sub >-"))
            .unwrap_or_else(|| panic!("{resource} sets no folded {name}"));
        let depth = indent(lines[start]);
        let text = lines[start + 1..]
            .iter()
            .take_while(|l| indent(l) > depth)
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join(" ");
        substitute(&text, sub)
    }
}

/// `text` with each `${...}` replaced by `sub` of what is inside.
pub fn substitute(text: &str, sub: impl Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let Some(end) = rest[i..].find('}').map(|e| e + i) else {
            break;
        };
        out.push_str(&sub(&rest[i + 2..end]));
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}
