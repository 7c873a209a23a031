//! The layering `docs/architecture.md` describes, checked on the source: the HTTP layer talks
//! to runs through `Runs` and its narrow handles, never to the store; the CLI shares formats
//! with the HTTP layer through `format`, never by importing it.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
                .path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The files under `src/<folder>` that mention `forbidden`, with the first line that does.
fn mentions(folder: &str, forbidden: &str) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(folder);
    let files = sources(&dir);
    assert!(!files.is_empty(), "no sources under {}", dir.display());
    files
        .iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let (n, line) = text
                .lines()
                .enumerate()
                .find(|(_, line)| line.contains(forbidden))?;
            Some(format!("{}:{}: {}", path.display(), n + 1, line.trim()))
        })
        .collect()
}

#[test]
fn http_does_not_reach_into_the_store() {
    let found = mentions("http", "crate::store");
    assert!(
        found.is_empty(),
        "src/http talks to runs through `Runs` and its handles, not the store:\n{}",
        found.join("\n")
    );
}

#[test]
fn cli_does_not_import_http() {
    let found = mentions("cli", "crate::http");
    assert!(
        found.is_empty(),
        "src/cli shares formats with the API through `format`, not by importing `http`:\n{}",
        found.join("\n")
    );
}
