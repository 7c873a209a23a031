//! Time travel from the terminal: `runs get ID --at N` (the run right after its event N),
//! `runs events ID --states` (each event with the fields of the run it changed) and `runs diff
//! ID_A ID_B` (two histories side by side, aligned by sequence number, with the fields in which
//! the states after each pair of events differ). All of it through the server's
//! `GET /agent/runs/{id}?as_of_seq=` and `…/states`, a page at a time; nothing is folded here.

use std::collections::VecDeque;
use std::io::Write as _;

use serde_json::{json, Value};

use crate::remote::{Error, Remote};
use crate::terminal;

use super::api::{print_line, run_path};
use super::show::print_run;

/// States asked for per page (the server's most).
const PAGE: &str = "1000";

/// Fields of a run's JSON that differ between any two runs and say nothing of their histories;
/// `diff` leaves them out.
const IDENTITY: [&str; 4] = ["run_id", "task_id", "session_id", "session_link"];

/// `runs get ID --at N`.
pub(super) async fn print_at(
    remote: &Remote,
    id: &str,
    seq: u64,
    as_json: bool,
) -> anyhow::Result<()> {
    let run = remote
        .get(&run_path(id), &[("as_of_seq", seq.to_string())])
        .await?;
    if as_json {
        print_line(&terminal::json(&run))?;
    } else {
        eprintln!("run {id} as it was right after its event {seq}");
        print_run(&run)?;
    }
    Ok(())
}

/// The pages of one run's states, fetched as they are read.
struct States<'a> {
    remote: &'a Remote,
    path: String,
    buffered: VecDeque<Value>,
    cursor: Option<String>,
    done: bool,
}

impl<'a> States<'a> {
    fn new(remote: &'a Remote, id: &str) -> States<'a> {
        States {
            remote,
            path: format!("{}/states", run_path(id)),
            buffered: VecDeque::new(),
            cursor: None,
            done: false,
        }
    }

    /// The next state, `None` after the last.
    async fn next(&mut self) -> Result<Option<Value>, Error> {
        if self.buffered.is_empty() && !self.done {
            let mut query = vec![("limit", PAGE.to_string())];
            if let Some(cursor) = &self.cursor {
                query.push(("cursor", cursor.clone()));
            }
            let mut page = self.remote.get(&self.path, &query).await?;
            let Value::Array(states) = page["states"].take() else {
                return Err(Error::Protocol("a states page without states".into()));
            };
            let next = page["page_info"]["next_cursor"]
                .as_str()
                .map(str::to_string);
            // A cursor that does not move would page forever.
            self.done = next.is_none() || next == self.cursor || states.is_empty();
            self.cursor = next;
            self.buffered.extend(states);
        }
        Ok(self.buffered.pop_front())
    }
}

/// `runs events ID --states`: each event with the fields it changed; with `--json`, the states
/// as one document (`run_id`, `states`).
pub(super) async fn print_states(remote: &Remote, id: &str, as_json: bool) -> anyhow::Result<()> {
    let mut states = States::new(remote, id);
    let mut all = Vec::new();
    while let Some(state) = states.next().await? {
        if as_json {
            all.push(state);
            continue;
        }
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{:>4}  {}  {:<18}  {}",
            state["seq"],
            field(&state, "at"),
            field(&state, "type"),
            names(&state["changed"]).join(", ")
        )?;
    }
    if as_json {
        print_line(&terminal::json(&json!({ "run_id": id, "states": all })))?;
    }
    Ok(())
}

/// `runs diff ID_A ID_B`: the two histories aligned by sequence number; for each pair the
/// event types and the run's fields that differ in the states after them (a missing event
/// shows as `-`, and its pair's fields are all those of the other state).
pub(super) async fn print_diff(
    remote: &Remote,
    a: &str,
    b: &str,
    as_json: bool,
) -> anyhow::Result<()> {
    // Both runs must exist (and be the key's team's) before anything is printed.
    remote.get(&run_path(a), &[]).await?;
    remote.get(&run_path(b), &[]).await?;
    let (mut left, mut right) = (States::new(remote, a), States::new(remote, b));
    let mut rows = Vec::new();
    let mut out_rows = 0usize;
    loop {
        let (x, y) = (left.next().await?, right.next().await?);
        if x.is_none() && y.is_none() {
            break;
        }
        let row = aligned(x.as_ref(), y.as_ref());
        if as_json {
            rows.push(row);
        } else {
            let mut out = std::io::stdout().lock();
            if out_rows == 0 {
                writeln!(out, "SEQ   {:<18}  {:<18}  DIFFERING FIELDS", "A", "B")?;
            }
            let differs = names(&row["differs"]);
            writeln!(
                out,
                "{:>4}  {:<18}  {:<18}  {}",
                row["seq"],
                field(&row, "type_a"),
                field(&row, "type_b"),
                if differs.is_empty() {
                    "=".to_string()
                } else {
                    differs.join(", ")
                }
            )?;
            out_rows += 1;
        }
    }
    if as_json {
        print_line(&terminal::json(
            &json!({ "run_a": a, "run_b": b, "events": rows }),
        ))?;
    }
    Ok(())
}

/// One aligned pair as `{seq, type_a, type_b, differs}`.
fn aligned(a: Option<&Value>, b: Option<&Value>) -> Value {
    let seq = a.or(b).map_or(Value::Null, |s| s["seq"].clone());
    let kind = |s: Option<&Value>| s.map_or(Value::Null, |s| s["type"].clone());
    let empty = serde_json::Map::new();
    let x = a.and_then(|s| s["state"].as_object()).unwrap_or(&empty);
    let y = b.and_then(|s| s["state"].as_object()).unwrap_or(&empty);
    let mut differs: Vec<&String> = x
        .keys()
        .chain(y.keys().filter(|k| !x.contains_key(*k)))
        .filter(|k| !IDENTITY.contains(&k.as_str()) && x.get(*k) != y.get(*k))
        .collect();
    differs.sort();
    json!({ "seq": seq, "type_a": kind(a), "type_b": kind(b), "differs": differs })
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .map(|s| terminal::printable(s, terminal::Origin::Field).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn field(value: &Value, name: &str) -> String {
    match value[name].as_str() {
        Some(text) => terminal::printable(text, terminal::Origin::Field).into_owned(),
        None => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_names_the_fields_that_differ_but_not_the_ids() {
        let a = json!({"seq": 3, "type": "Failed", "state": {"run_id": "A", "state": "FAILED",
            "title": "t", "status_message": {"message": "boom"}}});
        let b = json!({"seq": 3, "type": "Succeeded", "state": {"run_id": "B",
            "state": "SUCCEEDED", "title": "t"}});
        assert_eq!(
            aligned(Some(&a), Some(&b)),
            json!({"seq": 3, "type_a": "Failed", "type_b": "Succeeded",
                   "differs": ["state", "status_message"]})
        );
        assert_eq!(
            aligned(None, Some(&b)),
            json!({"seq": 3, "type_a": null, "type_b": "Succeeded",
                   "differs": ["state", "title"]})
        );
    }
}
