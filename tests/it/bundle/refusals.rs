//! `import --run` refuses, naming what is wrong and writing nothing: a run the store holds, an
//! edited event (with the manifest recomputed), a state the events do not fold to, a section
//! whose bytes are not the manifest's, a path for a name, sizes that lie, a content whose
//! bytes are not its address, and a truncated file. The good bundle imports afterwards, so
//! none of them left the run behind.

use serde_json::Value;

use super::support::{assemble, assemble_with, import, parse, section, source, target, Parts};

/// Writes `bytes` as a bundle file in `dir` and imports it into `store`: the stderr of a
/// refusal (the test fails if it is imported).
fn refused(store: &std::path::Path, dir: &std::path::Path, name: &str, bytes: &[u8]) -> String {
    let file = dir.join(name);
    std::fs::write(&file, bytes).expect("write");
    let (ok, err) = import(store, &file, &[]);
    assert!(!ok, "{name} was imported: {err}");
    assert!(
        err.contains("Nothing was imported") || err.contains("nothing was imported"),
        "{name}: {err}"
    );
    err
}

/// The first event line of `events.jsonl` with its prompt changed.
fn edit_prompt(parts: &mut Parts) {
    let events = section(parts, "events.jsonl");
    let text = String::from_utf8(events.clone()).expect("utf-8");
    assert!(text.contains("make the data"));
    *events = text
        .replacen("make the data", "make the DATA", 1)
        .into_bytes();
}

#[tokio::test]
async fn an_import_refuses_what_is_not_the_run_as_exported_and_writes_nothing() {
    let src = source().await;
    let out = tempfile::tempdir().expect("tempdir");
    let good = out.path().join("good.bundle");
    let (ok, err) = src.export(&good);
    assert!(ok, "{err}");
    let bytes = std::fs::read(&good).expect("bundle");

    // The run's own store holds it already.
    let (ok, err) = import(src.dir.path(), &good, &[]);
    assert!(!ok);
    assert!(
        err.contains(&format!("already holds run {}", src.id)),
        "{err}"
    );

    let (store, _) = target().await;
    let store = store.path();

    // An edited event, the manifest recomputed: the state no longer folds from it.
    let mut parts = parse(&bytes);
    edit_prompt(&mut parts);
    let err = refused(store, out.path(), "edited.bundle", &assemble(&parts));
    assert!(
        err.contains("do not fold to the state") && err.contains("prompt"),
        "{err}"
    );

    // The event and the state edited alike: the hash chain names the event.
    let mut parts = parse(&bytes);
    edit_prompt(&mut parts);
    let state = section(&mut parts, "state.json");
    let text = String::from_utf8(state.clone()).expect("utf-8");
    *state = text
        .replacen("make the data", "make the DATA", 1)
        .into_bytes();
    let edited = assemble(&parts);
    let err = refused(store, out.path(), "chain.bundle", &edited);
    assert!(err.contains("does not verify: event 0"), "{err}");

    // A section changed without the manifest: named.
    let mut tampered = bytes.clone();
    let at = tampered.len() - 1_000_000;
    tampered[at] ^= 1;
    let err = refused(store, out.path(), "tampered.bundle", &tampered);
    assert!(
        err.contains("does not have the SHA-256 the manifest gives it"),
        "{err}"
    );

    // A path as a section's name.
    let mut parts = parse(&bytes);
    parts.sections[3].0 = "../../transcripts/evil.jsonl".into();
    let err = refused(store, out.path(), "path.bundle", &assemble(&parts));
    assert!(err.contains("never a path"), "{err}");
    assert!(!store.join("transcripts/evil.jsonl").exists());

    // A size that lies: larger than the file.
    let parts = parse(&bytes);
    let lying = assemble_with(&parts, |manifest| {
        manifest["sections"][4]["size"] = Value::from(1u64 << 40);
    });
    let err = refused(store, out.path(), "oversize.bundle", &lying);
    assert!(err.contains("but the file holds"), "{err}");

    // A section line that disagrees with the manifest.
    let lying = assemble_with(&parts, |manifest| {
        let size = manifest["sections"][1]["size"].as_u64().expect("size");
        manifest["sections"][1]["size"] = Value::from(size - 1);
    });
    let err = refused(store, out.path(), "line.bundle", &lying);
    assert!(err.contains("where the manifest gives"), "{err}");

    // A content whose bytes are not its address (the manifest recomputed from the bytes).
    let mut parts = parse(&bytes);
    let content = parts
        .sections
        .iter_mut()
        .find(|(n, _)| n.starts_with("content/"))
        .expect("a content");
    content.1[0] ^= 1;
    let err = refused(store, out.path(), "address.bundle", &assemble(&parts));
    assert!(err.contains("another sha256 than its name"), "{err}");

    // Truncated.
    let err = refused(
        store,
        out.path(),
        "short.bundle",
        &bytes[..bytes.len() - 5000],
    );
    assert!(err.contains("truncated"), "{err}");

    // Not a bundle at all.
    let err = refused(
        store,
        out.path(),
        "other.bundle",
        b"{\"record\":\"backup\"}\n",
    );
    assert!(err.contains("not a runledger bundle"), "{err}");

    // None of them left anything: the good bundle imports, and only once.
    let (ok, err) = import(store, &good, &[]);
    assert!(ok, "{err}");
    let (ok, err) = import(store, &good, &[]);
    assert!(!ok && err.contains("already holds run"), "{err}");

    // --unverified imports the edited chain and records that it did.
    let (store2, _) = target().await;
    let file = out.path().join("chain.bundle");
    let (ok, err) = import(store2.path(), &file, &["--unverified"]);
    assert!(ok, "{err}");
    assert!(
        err.contains("WARNING") && err.contains("does not verify"),
        "{err}"
    );
    let (ok, out_text, err) = crate::common::cli(
        &[
            "verify",
            "--config",
            super::support::path_str(&store2.path().join("runledger.toml")),
            "--data-dir",
            super::support::path_str(&store2.path().join("data")),
        ],
        &[],
    );
    let said = format!("{out_text}{err}");
    assert!(said.contains("did not verify"), "{ok} {said}");
}
