//! `runledger replay --check`: every run's state folded anew from its events by this build and
//! compared, field by field, with the state the store recorded for it (its row in the read
//! index, written by whichever build applied the events), each difference printed as run,
//! field, stored value, rebuilt value. It is the check an operator runs after an upgrade: a
//! change to the fold or to a record decoder that alters a past run shows here by name. It
//! writes nothing but what opening a store as the server does writes (the catch-up of runs a
//! crash left behind), and refuses an index of another layout, whose rows this build cannot
//! read (the server's next start rebuilds those).

use std::time::Instant;

use anyhow::bail;
use serde_json::Value;

use runledger_domain::{Run, RunId, Timestamp};
use runledger_projection::{Index, LAYOUT_VERSION};
use runledger_store::{self as store, Store};

use crate::commands::Cli;
use crate::open::{held, open_salvage, require_store};

/// A value printed longer than this is cut (a prompt of 60 KB would bury the report).
const SHOWN: usize = 160;

/// One field whose stored and rebuilt values differ; `field` is a path into the state as JSON
/// (`usage.executions[1].tokens.input`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDifference {
    pub field: String,
    pub stored: String,
    pub rebuilt: String,
}

/// The fields in which `rebuilt` differs from `stored`, in the order of their names; empty when
/// they are equal. A field absent on one side reads `(absent)`.
pub fn field_differences(stored: &Run, rebuilt: &Run) -> Vec<FieldDifference> {
    let mut out = Vec::new();
    if stored != rebuilt {
        compare_json("", &as_json(stored), &as_json(rebuilt), &mut out);
        if out.is_empty() {
            // Ids are 128-bit numbers, which JSON values hold only approximately: a
            // difference there (or anywhere JSON cannot show) is still reported.
            out.push(FieldDifference {
                field: "(a field JSON cannot show exactly)".into(),
                stored: cut(format!("{stored:?}")),
                rebuilt: cut(format!("{rebuilt:?}")),
            });
        }
    }
    out
}

/// A state as a JSON value. Through text, because a run's 128-bit ids make a direct
/// `to_value` fail; plain structs and maps always serialise.
fn as_json(run: &Run) -> Value {
    serde_json::to_string(run)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null)
}

/// The differences between two JSON values, named by their path under `at`: objects field by
/// field, arrays element by element (a length that differs is named once, as `field.len`).
pub fn compare_json(at: &str, a: &Value, b: &Value, out: &mut Vec<FieldDifference>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut names: Vec<&String> = x.keys().collect();
            names.extend(y.keys().filter(|k| !x.contains_key(*k)));
            for name in names {
                let path = if at.is_empty() {
                    name.clone()
                } else {
                    format!("{at}.{name}")
                };
                match (x.get(name), y.get(name)) {
                    (Some(p), Some(q)) => compare_json(&path, p, q, out),
                    (p, q) => out.push(FieldDifference {
                        field: path,
                        stored: p.map_or_else(|| "(absent)".to_string(), shown),
                        rebuilt: q.map_or_else(|| "(absent)".to_string(), shown),
                    }),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                out.push(FieldDifference {
                    field: format!("{at}.len"),
                    stored: x.len().to_string(),
                    rebuilt: y.len().to_string(),
                });
            }
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                compare_json(&format!("{at}[{i}]"), p, q, out);
            }
        }
        (p, q) if p != q => out.push(FieldDifference {
            field: at.to_string(),
            stored: shown(p),
            rebuilt: shown(q),
        }),
        _ => {}
    }
}

/// A value as the report prints it: its JSON, cut to `SHOWN` characters.
fn shown(v: &Value) -> String {
    cut(v.to_string())
}

/// `text` cut to `SHOWN` characters, saying how long it was.
fn cut(text: String) -> String {
    match text.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}… ({} bytes)", &text[..cut], text.len()),
        None => text,
    }
}

/// What `--check` found.
#[derive(Debug, Default)]
pub struct Checked {
    pub runs: u64,
    pub events: u64,
    /// Each run whose stored state differs, with its differences; or a run the index lacks
    /// (an empty list), or one whose log does not fold to a run (`rebuilt` "(no run)").
    pub differing: Vec<(RunId, Vec<FieldDifference>)>,
}

/// Folds every run of the log and compares it with its row.
pub fn check_runs(store: &Store, index: &Index) -> anyhow::Result<Checked> {
    let mut checked = Checked::default();
    for id in store.runs_created_since(Timestamp(0))? {
        checked.runs += 1;
        let mut rebuilt: Option<Run> = None;
        for e in store.run_events(id, 0) {
            let e = e?;
            checked.events += 1;
            rebuilt = runledger_domain::evolve(rebuilt, id, &e.event, e.at);
        }
        let stored = index.get(id)?;
        let differences = match (&stored, &rebuilt) {
            (Some(s), Some(r)) => field_differences(s, r),
            (None, Some(_)) => vec![FieldDifference {
                field: "(run)".into(),
                stored: "(absent from the index)".into(),
                rebuilt: "(a run)".into(),
            }],
            (Some(_), None) => vec![FieldDifference {
                field: "(run)".into(),
                stored: "(a run)".into(),
                rebuilt: "(no run: its first event admits none)".into(),
            }],
            (None, None) => Vec::new(),
        };
        if !differences.is_empty() {
            checked.differing.push((id, differences));
        }
    }
    Ok(checked)
}

/// `runledger replay --check`.
pub fn replay_check(cli: &Cli, cache_mb: u64) -> anyhow::Result<()> {
    let mut config = cli.load_config(None)?;
    config.cache_bytes = cache_mb * 1024 * 1024;
    require_store(&config)?;
    {
        let probe = open_salvage(&config)?;
        if probe.lost_writes().is_some() {
            bail!("the store lost acknowledged writes; `runledger replay` (without --check) accepts the loss");
        }
        // Another layout's rows do not decode as this build's states, and opening the index
        // as below would rebuild it from the log, leaving nothing recorded to compare with.
        if !Index::layout_is_current(probe.db())? {
            bail!(
                "the read index is of another layout than this build's ({LAYOUT_VERSION}): its \
                 states cannot be read by this build; `runledger replay` or the server's next \
                 start rebuilds it from the log (the corpus test of `docs/debugging.md` is the \
                 check of a fold change across layouts)"
            );
        }
    }
    let options = store::Options {
        cache_bytes: config.cache_bytes,
        accept_lost_writes: false,
    };
    let (store, index) = match runledger_projection::open(&config.data_dir, &options) {
        Err(runledger_projection::Error::Store(store::Error::Locked(dir))) => {
            return Err(held(&dir))
        }
        other => other?,
    };
    let started = Instant::now();
    let checked = check_runs(&store, &index)?;
    let differing = checked.differing.len();
    for (id, differences) in &checked.differing {
        for d in differences {
            println!(
                "run {id}: {}: stored {}, rebuilt {}",
                d.field, d.stored, d.rebuilt
            );
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "checked {} events of {} runs in {secs:.2} s: {differing} runs differ",
        checked.events, checked.runs
    );
    if differing > 0 {
        bail!(
            "{differing} runs' recorded states differ from what this build folds from their \
             events (above: run, field, stored value, rebuilt value)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_names_its_field_and_both_values() {
        let stored = runledger_domain::sample_run(3);
        let mut rebuilt = stored.clone();
        assert!(field_differences(&stored, &rebuilt).is_empty());
        rebuilt.executions += 1;
        rebuilt.prompt = "p".repeat(1_000);
        let found = field_differences(&stored, &rebuilt);
        let fields: Vec<&str> = found.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(fields, ["executions", "prompt"], "{found:?}");
        assert_eq!(found[0].stored, stored.executions.to_string());
        assert_eq!(found[0].rebuilt, (stored.executions + 1).to_string());
        assert!(found[1].rebuilt.ends_with("… (1002 bytes)"), "{found:?}");
    }

    #[test]
    fn arrays_and_nested_fields_are_named_by_their_path() {
        let mut out = Vec::new();
        let a = serde_json::json!({"usage": {"executions": [{"cpu": 1}, {"cpu": 2}]}, "x": 1});
        let b = serde_json::json!({"usage": {"executions": [{"cpu": 1}, {"cpu": 3}, {"cpu": 4}]}});
        compare_json("", &a, &b, &mut out);
        let fields: Vec<&str> = out.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(
            fields,
            ["usage.executions.len", "usage.executions[1].cpu", "x"]
        );
        assert_eq!(out[2].rebuilt, "(absent)");
    }
}
