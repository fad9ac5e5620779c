//! The import check: inside `crates/core` and `crates/dynamo`, modules import each other
//! without a loop, so each crate is a stack of floors (vocabulary at the bottom, rules above,
//! drivers and adapters on top) that can be read from the ground up.
//!
//! The check reads the sources: a node is a module under the crate root (a file `src/x.rs`
//! or a directory `src/x/` with its `mod.rs`); a submodule counts as its parent (`rules/prepare.rs`
//! is `rules`), so a directory module may use its own parts freely. An edge `a → b` is a path
//! `crate::b…` written in `a`'s production code: `use crate::b::…`, `use crate::{b::…}`, or a
//! path inline (`crate::b::Seen`); a name the crate root re-exports (`crate::DynamoItems`)
//! counts as the module it comes from. Comments (doc links included), string literals and
//! `#[cfg(test)]` items are not read: a test may reach anywhere, and a doc may point upward.
//! The check fails naming one loop, each step with the file and line that makes it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One import: from a module to another, where it is written.
#[derive(Clone, Debug)]
struct Import {
    to: String,
    file: String,
    line: usize,
}

/// The module graph of one crate: every module, and its imports of the others.
#[derive(Debug, Default)]
struct Graph {
    modules: BTreeMap<String, Vec<Import>>,
}

impl Graph {
    /// Edges as module → set of modules.
    fn edges(&self) -> BTreeMap<&str, BTreeSet<&str>> {
        self.modules
            .iter()
            .map(|(m, imports)| {
                let to = imports
                    .iter()
                    .map(|i| i.to.as_str())
                    .filter(|t| *t != m && self.modules.contains_key(*t))
                    .collect();
                (m.as_str(), to)
            })
            .collect()
    }

    /// One loop, as its modules in order (the first repeated at the end), if there is one.
    fn cycle(&self) -> Option<Vec<String>> {
        let edges = self.edges();
        // 0: not visited, 1: on the current path, 2: done.
        let mut mark: BTreeMap<&str, u8> = edges.keys().map(|m| (*m, 0)).collect();
        let mut path: Vec<&str> = vec![];
        fn visit<'a>(
            m: &'a str,
            edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
            mark: &mut BTreeMap<&'a str, u8>,
            path: &mut Vec<&'a str>,
        ) -> Option<Vec<String>> {
            mark.insert(m, 1);
            path.push(m);
            for &n in &edges[m] {
                match mark[n] {
                    1 => {
                        let start = path.iter().position(|p| *p == n).unwrap_or(0);
                        let mut cycle: Vec<String> =
                            path[start..].iter().map(|s| s.to_string()).collect();
                        cycle.push(n.to_string());
                        return Some(cycle);
                    }
                    0 => {
                        if let Some(c) = visit(n, edges, mark, path) {
                            return Some(c);
                        }
                    }
                    _ => {}
                }
            }
            path.pop();
            mark.insert(m, 2);
            None
        }
        let roots: Vec<&str> = edges.keys().copied().collect();
        for m in roots {
            if mark[m] == 0
                && let Some(c) = visit(m, &edges, &mut mark, &mut path)
            {
                return Some(c);
            }
        }
        None
    }

    /// The floors, from the ground up: a module's floor is one above the highest it imports.
    /// `None` if there is a loop.
    fn floors(&self) -> Option<Vec<Vec<String>>> {
        let edges = self.edges();
        let mut floor: BTreeMap<&str, usize> = BTreeMap::new();
        while floor.len() < edges.len() {
            let before = floor.len();
            for (m, to) in &edges {
                if !floor.contains_key(m) && to.iter().all(|t| floor.contains_key(t)) {
                    let f = to.iter().map(|t| floor[t] + 1).max().unwrap_or(0);
                    floor.insert(m, f);
                }
            }
            if floor.len() == before {
                return None;
            }
        }
        let mut floors: Vec<Vec<String>> = vec![];
        for (m, f) in floor {
            if floors.len() <= f {
                floors.resize(f + 1, vec![]);
            }
            floors[f].push(m.to_string());
        }
        Some(floors)
    }

    /// Where `from` imports `to` (the first place).
    fn site(&self, from: &str, to: &str) -> Option<&Import> {
        self.modules.get(from)?.iter().find(|i| i.to == to)
    }
}

/// The source with comments, string and character literals blanked (newlines kept, so line
/// numbers still hold).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r' && matches!(next, Some('#' | '"')) && !ident_before(&c, i) {
            // A raw string: r"…", r#"…"#.
            let mut hashes = 0;
            let mut j = i + 1;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &c[i..j.min(c.len())] {
                blank(&mut out, ch);
            }
            i = j;
        } else if c[i] == '"' {
            blank(&mut out, c[i]);
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\''); anything else after a quote is a lifetime.
            let mut j = i + 1;
            if c.get(j) == Some(&'\\') {
                j += 2;
            } else {
                j += 1;
            }
            while j < c.len() && c[j] != '\'' {
                j += 1;
            }
            for &ch in &c[i..(j + 1).min(c.len())] {
                blank(&mut out, ch);
            }
            i = j + 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn ident_before(c: &[char], i: usize) -> bool {
    i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')
}

/// The stripped source with every `#[cfg(test)]` item blanked (the attribute up to the end of
/// the item: its `;`, or the brace that closes its first `{`). Also the names of the modules
/// so declared, whose own files are then not read.
fn without_tests(src: &str) -> (String, Vec<String>) {
    const ATTR: &str = "#[cfg(test)]";
    let mut out: Vec<char> = src.chars().collect();
    let text: String = out.iter().collect();
    let mut test_mods = vec![];
    let mut from = 0;
    while let Some(found) = text[from..].find(ATTR) {
        let start_byte = from + found;
        let start = text[..start_byte].chars().count();
        let mut j = start + ATTR.chars().count();
        let mut depth = 0usize;
        let mut end = out.len();
        while j < out.len() {
            match out[j] {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = j + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = j + 1;
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let item: String = out[start..end].iter().collect();
        let words: Vec<&str> = item
            .split(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        if let Some(p) = words.iter().position(|w| *w == "mod")
            && item.trim_end().ends_with(';')
            && let Some(name) = words.get(p + 1)
        {
            test_mods.push(name.to_string());
        }
        for ch in &mut out[start..end] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
        from = start_byte + ATTR.len();
    }
    (out.into_iter().collect(), test_mods)
}

/// The first segments of every `crate::` path in `code`, with their line numbers:
/// `crate::a::X` → `a`; `crate::{a::X, b}` → `a`, `b`.
fn crate_paths(code: &str) -> Vec<(String, usize)> {
    let mut found = vec![];
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(k) = code[from..].find("crate::") {
        let at = from + k;
        from = at + "crate::".len();
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue; // `twopc_crate::` and the like
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = code[from..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // The top-level items of the group: split at depth-0 commas.
            let mut depth = 0;
            let mut item = String::new();
            let mut items = vec![];
            for ch in group.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(std::mem::take(&mut item));
                        continue;
                    }
                    _ => {}
                }
                item.push(ch);
            }
            items.push(item);
            for item in items {
                let first = first_ident(item.trim_start());
                if !first.is_empty() && first != "self" {
                    found.push((first.to_string(), line));
                }
            }
        } else {
            let first = first_ident(rest);
            if !first.is_empty() {
                found.push((first.to_string(), line));
            }
        }
    }
    found
}

fn first_ident(s: &str) -> &str {
    let end = s
        .find(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// What the crate root re-exports: `pub use items::DynamoItems;` → `DynamoItems` → `items`.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for stmt in lib.split(';') {
        let stmt = stmt.trim();
        let Some(path) = stmt.strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim().trim_start_matches("self::");
        let module = first_ident(path);
        let rest = &path[module.len()..];
        let inner = rest.trim_start_matches("::");
        let inner = inner.trim_start_matches('{').trim_end_matches('}');
        for name in inner.split(',') {
            let name = name.rsplit("::").next().unwrap_or("").trim();
            let name = name.rsplit(" as ").next().unwrap_or(name).trim();
            if !name.is_empty() {
                names.insert(name.to_string(), module.to_string());
            }
        }
    }
    names
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, files);
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
}

/// The module graph of the crate whose sources are under `src`.
fn graph(src: &Path) -> Graph {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("the crate's lib.rs");
    let (lib_code, _) = without_tests(&strip(&lib));
    let reexports = root_reexports(&lib_code);
    let mut files = vec![];
    rust_files(src, &mut files);
    let mut graph = Graph::default();
    let mut skipped: BTreeSet<PathBuf> = BTreeSet::new();
    let mut read = vec![];
    for file in &files {
        let rel = file.strip_prefix(src).expect("under src");
        let parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        if matches!(parts.as_slice(), [only] if only == "lib" || only == "main") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("a source file");
        let (code, test_mods) = without_tests(&strip(&text));
        // `#[cfg(test)] mod x;` in `a.rs` or `a/mod.rs` names `a/x.rs` or `a/x/`.
        let own_dir = if parts.last().is_some_and(|p| p == "mod") {
            file.parent().expect("a directory").to_path_buf()
        } else {
            file.with_extension("")
        };
        for m in test_mods {
            skipped.insert(own_dir.join(format!("{m}.rs")));
            skipped.insert(own_dir.join(&m));
        }
        read.push((
            file.clone(),
            parts[0].clone(),
            rel.display().to_string(),
            code,
        ));
    }
    for (file, module, rel, code) in read {
        if skipped
            .iter()
            .any(|s| file == *s || (s.is_dir() && file.starts_with(s)))
        {
            continue;
        }
        let imports = graph.modules.entry(module.clone()).or_default();
        for (first, line) in crate_paths(&code) {
            let to = reexports.get(&first).cloned().unwrap_or(first);
            imports.push(Import {
                to,
                file: format!("{}/{rel}", src.display()),
                line,
            });
        }
    }
    graph
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// Fails naming the loop, if the crate at `crates/<name>` has one; else shows its floors.
fn assert_no_loop(name: &str) {
    let src = workspace().join("crates").join(name).join("src");
    let root = format!("{}/", workspace().display());
    let graph = graph(&src);
    assert!(
        graph.modules.len() > 3,
        "found only {:?} in {}",
        graph.modules.keys(),
        src.display()
    );
    if let Some(cycle) = graph.cycle() {
        let mut msg = format!("crates/{name} has an import loop: {}\n", cycle.join(" → "));
        for step in cycle.windows(2) {
            let site = graph.site(&step[0], &step[1]).expect("the import");
            let file = site.file.strip_prefix(&root).unwrap_or(&site.file);
            let _ = writeln!(msg, "  {} → {}: {file}:{}", step[0], step[1], site.line);
        }
        panic!("{msg}");
    }
    let floors = graph.floors().expect("no loop, so floors");
    println!("crates/{name}, from the ground floor up:");
    for (i, f) in floors.iter().enumerate() {
        println!("  {i}: {}", f.join(", "));
    }
}

#[test]
fn core_modules_import_each_other_without_a_loop() {
    assert_no_loop("core");
}

#[test]
fn dynamo_modules_import_each_other_without_a_loop() {
    assert_no_loop("dynamo");
}

// The check itself, on sources written here.

fn graph_of(name: &str, files: &[(&str, &str)]) -> Graph {
    let dir = std::env::temp_dir().join(format!("twopc-imports-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("a directory");
        std::fs::write(&p, text).expect("a file");
    }
    let g = graph(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    g
}

#[test]
fn a_loop_through_a_group_an_inline_path_and_a_root_reexport_is_found() {
    let g = graph_of(
        "loop",
        &[
            (
                "lib.rs",
                "pub mod a; pub mod b; pub mod c;\npub use c::Thing;",
            ),
            ("a.rs", "use crate::{b::{X, Y}, ids};\n"),
            ("b.rs", "fn f() -> crate::Thing { todo!() }\n"),
            ("c/mod.rs", "mod part;\n"),
            (
                "c/part.rs",
                "// crate::z only in a comment\nuse crate::a::Z;\n",
            ),
        ],
    );
    let cycle = g.cycle().expect("a → b → c → a");
    assert_eq!(cycle.len(), 4, "{cycle:?}");
    assert_eq!(cycle.first(), cycle.last());
    let site = g.site("c", "a").expect("c/part.rs imports a");
    assert_eq!((site.file.ends_with("c/part.rs"), site.line), (true, 2));
    assert!(g.floors().is_none());
}

#[test]
fn comments_strings_and_tests_make_no_edges() {
    let g = graph_of(
        "clean",
        &[
            ("lib.rs", "pub mod a; pub mod b;"),
            ("a.rs", "use crate::b::X;\n"),
            (
                "b.rs",
                "/// [`crate::a::Y`]\n/* crate::a */ const S: &str = \"crate::a\";\n\
             const R: &str = r#\"crate::a\"#; fn f<'a>(x: &'a str) -> char { '\"' }\n\
             #[cfg(test)]\nmod tests { use crate::a::Y; }\n",
            ),
        ],
    );
    assert_eq!(g.cycle(), None);
    assert_eq!(
        g.floors(),
        Some(vec![vec!["b".to_string()], vec!["a".to_string()]])
    );
}
