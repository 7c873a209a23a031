//! The command line's part in the admin audit log: `runledger audit --admin`, which reads the
//! log from a running server (`GET /api/v1/audit/admin`, every page, oldest page last) and
//! prints one line per record (or its JSON with `--json`); and `cli_origin`, the actor context
//! the offline commands (`keys`, `teams`, `secrets` on a stopped store) record with their acts.
//! It never opens the store to read the log: the server holds it, and an admin key decides.

use anyhow::Context as _;
use serde_json::Value;

use runledger_domain::{Channel, Origin};

use crate::commands::ApiArgs;
use crate::profile;
use crate::remote::{self, Remote};
use crate::terminal::{self, printable};

/// The filters of `runledger audit --admin`.
#[derive(Debug, Clone, Default)]
pub struct AdminFilters {
    pub types: Vec<String>,
    pub actor: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub json: bool,
}

/// Who did an act on a stopped store with the command line: no key (none is needed there), the
/// process's user id, and `command` as the cause.
pub(crate) fn cli_origin(command: &str) -> Origin {
    use std::os::unix::fs::MetadataExt as _;
    let uid = std::fs::metadata("/proc/self")
        .map(|m| format!("uid {}", m.uid()))
        .unwrap_or_else(|_| "an unknown uid".into());
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .map(|u| format!(" (USER={u})"))
        .unwrap_or_default();
    Origin {
        channel: Channel::Cli,
        cause: Some(format!(
            "`runledger {command}` on the stopped store, by {uid}{user}"
        )),
        user_agent: Some(format!("runledger/{}", env!("CARGO_PKG_VERSION"))),
        ..Origin::default()
    }
}

/// `runledger audit --admin`: every record the filters keep, newest first.
pub fn audit_admin(api: &ApiArgs, filters: &AdminFilters) -> anyhow::Result<u8> {
    let target = profile::target(
        api.server.as_deref(),
        api.api_key.as_deref(),
        api.ca_cert.as_deref(),
    )?;
    let remote = Remote::new(&target)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the client's runtime")?;
    runtime.block_on(async {
        let mut query: Vec<(&str, String)> =
            filters.types.iter().map(|t| ("type", t.clone())).collect();
        for (field, value) in [
            ("actor", &filters.actor),
            ("since", &filters.since),
            ("until", &filters.until),
        ] {
            if let Some(value) = value {
                query.push((field, value.clone()));
            }
        }
        query.push(("limit", "1000".into()));
        loop {
            let page = remote.get("/api/v1/audit/admin", &query).await?;
            let items = page["items"].as_array().ok_or_else(|| {
                remote::Error::Protocol("the server's answer has no items".into())
            })?;
            for item in items {
                let line = if filters.json {
                    terminal::json(item)
                } else {
                    describe(item)
                };
                print_line(&line)?;
            }
            match page["page_info"]["next_cursor"].as_str() {
                Some(cursor) => {
                    query.retain(|(k, _)| *k != "cursor");
                    query.push(("cursor", cursor.to_string()));
                }
                None => break,
            }
        }
        Ok(0)
    })
}

/// One line of text for a record: its number, time, type, who did it and what.
fn describe(item: &Value) -> String {
    let s = |v: &Value| printable(v.as_str().unwrap_or(""), terminal::Origin::Field).into_owned();
    let origin = &item["origin"];
    let who = match origin["key"].as_object() {
        Some(key) => format!(
            "{} key {} ({})",
            s(&origin["channel"]),
            s(&key["id"]),
            s(&key["name"])
        ),
        None => format!("{} ({})", s(&origin["channel"]), s(&origin["cause"])),
    };
    let data = &item["data"];
    let what = match item["type"].as_str().unwrap_or("") {
        "KeyCreated" | "KeyRevoked" => format!(
            "key {} ({}) of team {}",
            s(&data["key_id"]),
            s(&data["name"]),
            s(&data["team"])
        ),
        "TeamCreated" => format!("team {}", s(&data["name"])),
        "SecretRotated" => format!("secret {}", s(&data["name"])),
        "ServerStarted" | "ServerStopped" => format!(
            "version {} config sha256 {}",
            s(&data["version"]),
            s(&data["config_sha256"])
        ),
        "IndexRebuilt" => format!(
            "{} runs, {} events{}",
            data["runs"],
            data["events"],
            if data["accepted_loss"] == true {
                ", accepting lost writes"
            } else {
                ""
            }
        ),
        _ => terminal::json(data),
    };
    format!(
        "{:>6}  {}  {:<14}  {what}  by {who}",
        item["seq"].as_u64().unwrap_or(0),
        s(&item["at"]),
        s(&item["type"]),
    )
}

fn print_line(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}
