//! The docs cite code by path (`crates/exec/src/launch.rs`, or within a crate `exec/safe_fs.rs`,
//! `http/validate/`), and a restructuring that moves a file leaves such a citation pointing at
//! nothing. Every Rust file or folder a doc names in backticks must exist.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn walk(dir: &Path, root: &Path, files: &mut BTreeSet<String>, dirs: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == ".git" || name == "node_modules" {
            continue;
        }
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        if path.is_dir() {
            dirs.insert(rel);
            walk(&path, root, files, dirs);
        } else {
            files.insert(rel);
        }
    }
}

/// The paths a doc cites in backticks: a Rust file (with or without `::item` after it) or a
/// folder written with its trailing slash.
fn cited(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for span in text.split('`').skip(1).step_by(2) {
        let path = span.split("::").next().unwrap_or("");
        let plain = !path.is_empty()
            && path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
        let folder = path.ends_with('/') && path.matches('/').count() >= 2;
        if plain && (path.ends_with(".rs") || folder) {
            out.push(path.trim_end_matches('/').to_string());
        }
    }
    out
}

#[test]
fn every_rust_file_or_folder_a_doc_cites_exists() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let (mut files, mut dirs) = (BTreeSet::new(), BTreeSet::new());
    walk(&root, &root, &mut files, &mut dirs);
    let exists = |cite: &str| {
        if files.contains(cite) || dirs.contains(cite) {
            return true;
        }
        // Within a crate: `exec/safe_fs.rs` is `crates/exec/src/safe_fs.rs`; a shorter name
        // (`command/setup.rs`) is any path that ends with it.
        let (first, rest) = cite.split_once('/').unwrap_or((cite, ""));
        let in_crate = format!("crates/{first}/src/{rest}");
        let suffix = format!("/{cite}");
        files.contains(&in_crate)
            || dirs.contains(&in_crate)
            || files
                .iter()
                .chain(dirs.iter())
                .any(|p| p.ends_with(&suffix))
    };
    let mut docs = vec![root.join("README.md")];
    let (mut doc_files, mut doc_dirs) = (BTreeSet::new(), BTreeSet::new());
    walk(&root.join("docs"), &root, &mut doc_files, &mut doc_dirs);
    docs.extend(
        doc_files
            .iter()
            .filter(|f| f.ends_with(".md"))
            .map(|f| root.join(f)),
    );
    let mut missing = Vec::new();
    for doc in &docs {
        let text =
            std::fs::read_to_string(doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
        for cite in cited(&text) {
            // sled's own folders inside a data directory, and what a build or a test writes
            // under `target/`: not source.
            if cite.starts_with("sled/") || cite.starts_with("target/") {
                continue;
            }
            if !exists(&cite) {
                let shown = doc.strip_prefix(&root).unwrap_or(doc).display().to_string();
                missing.push(format!("{shown}: `{cite}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs cite paths that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn citations_are_read_as_paths_with_items_and_folders() {
    let text = "see `exec/safe_fs.rs`, `store/run_log.rs::append`, `http/validate/`, \
                `runs`, `a.rs b`, `Some(x)`";
    assert_eq!(
        cited(text),
        vec!["exec/safe_fs.rs", "store/run_log.rs", "http/validate"]
    );
}
