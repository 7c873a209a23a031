//! The corpus's history file: one run's log as the store keeps it, a record per line.
//!
//! ```text
//! # what the history is (any number of comment lines)
//! run 01KB2X8D3S8C9J6Y5P7M4N2Q1R
//! 0 02c0ffee…   (sequence number, then the stored record in hex)
//! ```
//!
//! Beside it, `NAME.state.json` is the state the run folded to when it was recorded (the
//! `Run` as JSON).

use std::path::{Path, PathBuf};

use runledger::domain::RunId;

/// One recorded history.
pub struct History {
    pub name: String,
    pub run_id: RunId,
    /// The records in sequence order, as the store keeps them.
    pub records: Vec<Vec<u8>>,
    /// The recorded state (JSON).
    pub state: serde_json::Value,
}

pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/histories")
}

/// Every history of the corpus, by name.
pub fn read_all() -> Vec<History> {
    read_all_in(&dir())
}

/// Every history in `dir`, by name.
pub fn read_all_in(dir: &Path) -> Vec<History> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("tests/fixtures/histories")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".hist").map(str::to_string)
        })
        .collect();
    names.sort();
    names.iter().map(|n| read(dir, n)).collect()
}

fn read(dir: &Path, name: &str) -> History {
    let path = dir.join(format!("{name}.hist"));
    let text = std::fs::read_to_string(&path).expect("history");
    let mut run_id = None;
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        if let Some(id) = line.strip_prefix("run ") {
            run_id = Some(id.parse().unwrap_or_else(|_| panic!("{}: run id", at())));
            continue;
        }
        let (seq, hex) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("{}: `SEQ HEX`", at()));
        assert_eq!(
            seq.parse::<usize>().ok(),
            Some(records.len()),
            "{}: records in sequence order",
            at()
        );
        records.push(from_hex(hex).unwrap_or_else(|| panic!("{}: hex", at())));
    }
    let state = std::fs::read_to_string(dir.join(format!("{name}.state.json")))
        .expect("state.json beside the history");
    History {
        name: name.to_string(),
        run_id: run_id.unwrap_or_else(|| panic!("{name}: no `run` line")),
        records,
        state: serde_json::from_str(&state).expect("state JSON"),
    }
}

/// Writes a history and its state into the corpus, unless one of that name exists (the
/// corpus is never rewritten: a history is what some build recorded). Returns whether it
/// wrote.
pub fn write_new(
    name: &str,
    about: &[&str],
    run_id: RunId,
    records: &[Vec<u8>],
    state: &str,
) -> bool {
    write_new_in(&dir(), name, about, run_id, records, state)
}

/// `write_new` into `dir`.
pub fn write_new_in(
    dir: &Path,
    name: &str,
    about: &[&str],
    run_id: RunId,
    records: &[Vec<u8>],
    state: &str,
) -> bool {
    let hist = dir.join(format!("{name}.hist"));
    if hist.exists() {
        return false;
    }
    std::fs::create_dir_all(dir).expect("mkdir");
    let mut text = String::new();
    for line in about {
        text.push_str(&format!("# {line}\n"));
    }
    text.push_str(&format!("run {run_id}\n"));
    for (seq, record) in records.iter().enumerate() {
        text.push_str(&format!("{seq} {}\n", to_hex(record)));
    }
    write(&hist, &text);
    write(
        &dir.join(format!("{name}.state.json")),
        &format!("{state}\n"),
    );
    true
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
