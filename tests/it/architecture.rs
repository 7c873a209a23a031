//! The walls between the crates are their `Cargo.toml` files: a crate can name only the crates
//! it depends on, so an import across a wall does not compile. These tests keep the manifests
//! themselves to the layering `docs/architecture.md` describes, so a wall cannot be taken down
//! by adding a dependency line: the domain stays pure, HTTP reaches runs only through the
//! handles of `runledger-runs`, and the command line works on a stopped store or over HTTP.

use std::collections::BTreeSet;
use std::path::Path;

/// Each crate, lowest first, and the workspace crates it may depend on.
const LAYERS: &[(&str, &[&str])] = &[
    ("domain", &[]),
    ("base", &["domain"]),
    ("config", &["domain", "base"]),
    ("store", &["domain", "base", "config"]),
    ("projection", &["domain", "base", "config", "store"]),
    ("format", &["domain", "base", "store"]),
    ("exec", &["domain", "base", "config", "store"]),
    (
        "runs",
        &[
            "domain",
            "base",
            "config",
            "store",
            "projection",
            "format",
            "exec",
        ],
    ),
    ("http", &["domain", "base", "config", "format", "runs"]),
    (
        "cli",
        &["domain", "base", "config", "store", "projection", "format"],
    ),
];

/// What the pure core may use: no async runtime, actor system, storage, encoding or HTTP.
const DOMAIN_MAY_USE: &[&str] = &["serde", "ulid", "thiserror"];

/// The dependencies (normal ones, not dev- or build-) a crate's manifest names.
fn dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", manifest.display()));
    let doc: toml::Table = text
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    doc.get("dependencies")
        .and_then(|d| d.as_table())
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default()
}

fn crate_manifest(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates")
        .join(name)
        .join("Cargo.toml")
}

#[test]
fn every_crate_is_listed_once() {
    let listed: BTreeSet<&str> = LAYERS.iter().map(|(name, _)| *name).collect();
    assert_eq!(listed.len(), LAYERS.len(), "a crate is listed twice");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let listed: BTreeSet<String> = listed.into_iter().map(String::from).collect();
    assert_eq!(present, listed, "crates/ and LAYERS name other crates");
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let mut wrong = Vec::new();
    for (name, allowed) in LAYERS {
        for dep in dependencies(&crate_manifest(name)) {
            let Some(internal) = dep.strip_prefix("runledger") else {
                continue;
            };
            let internal = internal.trim_start_matches('-');
            if !allowed.contains(&internal) {
                wrong.push(format!("runledger-{name} → {dep}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies against the layering of tests/it/architecture.rs:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_domain_uses_nothing_async_stored_encoded_or_networked() {
    let extra: Vec<String> = dependencies(&crate_manifest("domain"))
        .into_iter()
        .filter(|d| !DOMAIN_MAY_USE.contains(&d.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "runledger-domain is pure; it may use only {DOMAIN_MAY_USE:?}, not {extra:?}"
    );
}

#[test]
fn http_reaches_runs_only_through_the_handles_and_the_cli_not_at_all() {
    let http = dependencies(&crate_manifest("http"));
    for wall in [
        "runledger-store",
        "runledger-projection",
        "runledger-exec",
        "sled",
    ] {
        assert!(!http.contains(wall), "runledger-http depends on {wall}");
    }
    let cli = dependencies(&crate_manifest("cli"));
    for wall in ["runledger-runs", "runledger-http", "actix", "actix-web"] {
        assert!(!cli.contains(wall), "runledger-cli depends on {wall}");
    }
}

#[test]
fn the_handles_lend_http_no_store() {
    // `runledger-runs` re-exports a little vocabulary of the crates below it for HTTP (the
    // query types, a transcript entry); re-exporting the store or the executor would hand HTTP
    // what its manifest keeps from it.
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/runs/src/lib.rs");
    let text = std::fs::read_to_string(&lib).expect("runs/src/lib.rs");
    for wall in [
        "pub use runledger_store",
        "pub use runledger_exec as",
        "pub use runledger_projection as",
        "pub use runledger_exec::*",
        "pub use runledger_projection::*",
    ] {
        assert!(!text.contains(wall), "{}: `{wall}`", lib.display());
    }
}

#[test]
fn http_holds_narrow_handles_never_the_runs_service() {
    // `Runs` reaches every part of the live service; HTTP's `AppState` holds one small handle
    // per concern instead (`runledger_runs::actor::handles`), so a handler can do only what its
    // handle offers.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/http/src");
    let mut files = Vec::new();
    crate::common::rust_files(&dir, &mut files);
    let mut found = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("a source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let named = code.match_indices("Runs").any(|(at, _)| {
                // As a path, a type or an imported name; not inside a string.
                let before = code[..at].trim_end();
                let after = code[at + 4..].chars().next();
                let ident = after.is_some_and(|c| c.is_alphanumeric() || c == '_');
                let as_code = ["::", ":", "&", "(", "<", "{", ","]
                    .iter()
                    .any(|p| before.ends_with(p));
                as_code && !ident
            });
            if named {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "HTTP names `Runs`:\n{}", found.join("\n"));
}
