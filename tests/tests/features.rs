//! `make run` builds `twopc` alone (`cargo build -p twopc`), `make test` the whole workspace with
//! its tests. Cargo unifies each dependency's features over the packages one command builds, so
//! a crate the workspace builds with more features than `twopc` asks for is compiled twice, with
//! everything above it: a tokio feature only the bench's tests asked for once cost ~6 minutes of
//! a CI run on 2 cores. This holds the two feature sets equal (crates/twopc/Cargo.toml says how).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Every package of a `cargo tree` with its features: `name version` → each feature set it is
/// built with (a build dependency's can differ from a normal one's).
fn features(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root)
        .args(["tree", "--locked", "--offline", "--prefix", "none"])
        .args(["--format", "{p}|{f}"])
        .args(args)
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut tree = BTreeMap::<String, BTreeSet<String>>::new();
    let text = String::from_utf8(out.stdout).expect("utf-8");
    for (p, f) in text
        .lines()
        .filter_map(|l| l.trim_end_matches(" (*)").split_once('|'))
    {
        // A workspace crate's `{p}` carries its path: keep name and version.
        let p = p.split(" (").next().unwrap_or(p);
        tree.entry(p.to_owned()).or_default().insert(f.to_owned());
    }
    tree
}

#[test]
fn twopc_alone_builds_its_dependencies_with_the_workspace_test_builds_features() {
    // GIVEN the packages `cargo build -p twopc` compiles, with their features
    let alone = features(&["-p", "twopc", "--edges", "normal,build"]);
    // AND the same packages as `cargo build --workspace --tests` compiles them
    let workspace = features(&["--workspace", "--edges", "normal,build,dev"]);

    // THEN each has the same features in both: one compiled variant serves both commands
    assert!(
        alone.len() > 100,
        "{} packages: not twopc's tree",
        alone.len()
    );
    let differ: Vec<String> = alone
        .iter()
        .filter(|(p, f)| workspace.get(*p) != Some(f))
        .map(|(p, f)| format!("{p}: {f:?} alone, {:?} in the workspace", workspace.get(p)))
        .collect();
    assert!(
        differ.is_empty(),
        "give twopc these features (crates/twopc/Cargo.toml):\n{}",
        differ.join("\n")
    );
}
