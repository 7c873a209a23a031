//! The terminal client's commands: `run`, `runs …`, `login` and `logout`. They talk to a server
//! through its public API alone (`remote`), with the server and key `profile` resolves, and
//! print for a person on a terminal (tables, dimmed notes, a progress line) and for a program
//! otherwise (tab-separated lines, or the API's JSON with `--json`). Each returns the process's
//! exit code: a run's outcome (0, 1, 2) where the command waits for one, else 0; failures are
//! `remote::Error`s, whose codes never collide with an outcome.

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use eventsource_stream::{EventStreamError, Eventsource as _};
use futures_util::StreamExt as _;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::profile;
use super::remote::{self, Error, Remote, Transcript};
use super::terminal::{self, printable, Origin};
use crate::commands::{ApiArgs, RunsCmd};

/// How often `--wait` and a follower of a server without the transcript stream ask again.
const POLL: Duration = Duration::from_millis(500);

/// A transcript stream that dropped this many times in a row, without an entry between, is
/// given up.
const MAX_RECONNECTS: u32 = 10;

/// Transcript entries asked for per JSON page.
const PAGE_ENTRIES: u32 = 1000;

const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// `runledger run PROMPT`.
pub fn run(
    api: &ApiArgs,
    prompt: &str,
    environment: Option<&str>,
    model: Option<&str>,
    title: Option<&str>,
    follow: bool,
    wait: bool,
) -> anyhow::Result<u8> {
    let remote = connect(api)?;
    block_on(async {
        let mut config = serde_json::Map::new();
        if let Some(env) = environment {
            config.insert("environment_id".into(), json!(env));
        }
        if let Some(model) = model {
            config.insert("model_id".into(), json!(model));
        }
        let mut body = json!({ "prompt": prompt, "config": config });
        if let Some(title) = title {
            body["title"] = json!(title);
        }
        let created = remote.post("/api/v1/agent/runs", &body).await?;
        let id = created["run_id"]
            .as_str()
            .ok_or_else(|| Error::Protocol("the server's answer names no run_id".into()))?
            .to_string();
        print_line(&id)?;
        // A run has a session link once it has started: `--follow` and `--wait` name it then.
        let mut link = Link { shown: false };
        link.show(&remote, &id).await;
        if follow {
            let followups = std::io::stdin().is_terminal().then(read_followups);
            let state = follow_transcript(&remote, &id, followups, Some(&mut link)).await?;
            Ok(outcome(&id, &state))
        } else if wait {
            let state = wait_for(&remote, &id, &mut link).await?;
            Ok(outcome(&id, &state))
        } else {
            Ok(0)
        }
    })
}

/// `runledger runs …`.
pub fn runs(api: &ApiArgs, command: &RunsCmd) -> anyhow::Result<u8> {
    let remote = connect(api)?;
    block_on(async {
        match command {
            RunsCmd::List {
                states,
                environment,
                name,
                creator,
                source,
                model,
                since,
                until,
                search,
                limit,
                cursor,
                json,
            } => {
                let mut query: Vec<(&str, String)> =
                    states.iter().map(|s| ("state", s.to_uppercase())).collect();
                let now = time::OffsetDateTime::now_utc();
                for (field, value) in [
                    ("environment_id", environment.clone()),
                    ("name", name.clone()),
                    ("creator", creator.clone()),
                    ("source", source.clone()),
                    ("model_id", model.clone()),
                    ("created_after", since.as_deref().map(|t| when(t, now))),
                    ("created_before", until.as_deref().map(|t| when(t, now))),
                    ("q", search.clone()),
                    ("limit", limit.map(|n| n.to_string())),
                    ("cursor", cursor.clone()),
                ] {
                    if let Some(value) = value {
                        query.push((field, value));
                    }
                }
                let page = remote.get("/api/v1/agent/runs", &query).await?;
                if *json {
                    print_line(&terminal::json(&page))?;
                } else {
                    print_list(&page)?;
                }
                Ok(0)
            }
            RunsCmd::Get { run_id, json } => {
                let run = remote.get(&run_path(run_id), &[]).await?;
                if *json {
                    print_line(&terminal::json(&run))?;
                } else {
                    print_run(&run)?;
                }
                Ok(0)
            }
            RunsCmd::Logs { run_id, follow } => {
                if *follow {
                    let state = follow_transcript(&remote, run_id, None, None).await?;
                    Ok(outcome(run_id, &state))
                } else {
                    print_transcript(&remote, run_id).await?;
                    Ok(0)
                }
            }
            RunsCmd::Followup {
                run_id,
                message,
                mode,
            } => {
                let reply = remote
                    .post(
                        &format!("{}/followups", run_path(run_id)),
                        &json!({ "message": message, "mode": mode }),
                    )
                    .await?;
                eprintln!(
                    "sent the follow-up to run {run_id}; it is {}",
                    reply["state"].as_str().unwrap_or("?")
                );
                Ok(0)
            }
            RunsCmd::Cancel { run_id } => {
                remote
                    .post(&format!("{}/cancel", run_path(run_id)), &json!({}))
                    .await?;
                eprintln!("cancelled run {run_id}");
                Ok(0)
            }
            RunsCmd::RevokeLink { run_id } => {
                let run = remote
                    .post(
                        &format!("{}/session-link/revoke", run_path(run_id)),
                        &json!({}),
                    )
                    .await?;
                eprintln!("revoked every session link of run {run_id} handed out so far");
                match run["session_link"].as_str() {
                    Some(link) => println!("{link}"),
                    None => {
                        eprintln!("the run has no session yet: its first link comes when it starts")
                    }
                }
                Ok(0)
            }
            RunsCmd::Events { run_id, json } => {
                print_events(&remote, run_id, *json).await?;
                Ok(0)
            }
        }
    })
}

/// `runledger login`.
pub fn login(api: &ApiArgs) -> anyhow::Result<u8> {
    let saved = profile::load()?.unwrap_or_default();
    let server = api.server.clone().or(saved.server).ok_or_else(|| {
        Error::Config("no server: pass --server URL or set RUNLEDGER_SERVER".into())
    })?;
    let key = match &api.api_key {
        Some(key) => key.clone(),
        None => read_key()?,
    };
    let key = key.trim().to_string();
    if key.is_empty() {
        return Err(Error::Config("no API key given".into()).into());
    }
    // Saved absolute: later commands run from other directories.
    let ca_cert = api
        .ca_cert
        .clone()
        .or(saved.ca_cert)
        .map(|path| std::path::absolute(&path).unwrap_or(path));
    let target = remote::Target {
        server: server.trim_end_matches('/').to_string(),
        key,
        ca_cert,
    };
    let remote = Remote::new(&target)?;
    block_on(async {
        Ok(remote
            .get("/api/v1/agent/runs", &[("limit", "1".to_string())])
            .await?)
    })?;
    let path = profile::save(&profile::Profile {
        server: Some(target.server.clone()),
        api_key: Some(target.key),
        ca_cert: target.ca_cert,
    })?;
    eprintln!(
        "logged in to {}; saved the key in {}",
        target.server,
        path.display()
    );
    Ok(0)
}

/// `runledger logout`.
pub fn logout() -> anyhow::Result<u8> {
    match profile::remove()? {
        Some(path) => eprintln!("removed {}", path.display()),
        None => eprintln!(
            "not logged in (no profile at {})",
            profile::path()?.display()
        ),
    }
    Ok(0)
}

/// The key, from a terminal without echo, else the first line of stdin.
fn read_key() -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        Ok(rpassword::prompt_password("API key: ").context("cannot read the key")?)
    } else {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the key from stdin")?;
        Ok(line)
    }
}

/// One line on stdout. Unlike `println!`, a closed stdout (`| head`) is an error to report,
/// not a panic.
fn print_line(text: &dyn std::fmt::Display) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

fn connect(api: &ApiArgs) -> Result<Remote, Error> {
    let target = profile::target(
        api.server.as_deref(),
        api.api_key.as_deref(),
        api.ca_cert.as_deref(),
    )?;
    Remote::new(&target)
}

fn block_on<T>(work: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the client's runtime")?
        .block_on(work)
}

/// The path of a run. An id is a ULID: anything else is sent escaped and answered 404.
fn run_path(id: &str) -> String {
    let escaped: String = url::form_urlencoded::byte_serialize(id.as_bytes()).collect();
    format!("/api/v1/agent/runs/{escaped}")
}

/// The exit code of a run that ended in `state`.
fn outcome(id: &str, state: &str) -> u8 {
    match state {
        "SUCCEEDED" => 0,
        "FAILED" => {
            eprintln!("run {id} FAILED");
            1
        }
        "CANCELLED" => {
            eprintln!("run {id} was CANCELLED");
            2
        }
        other => {
            eprintln!(
                "run {id} ended in an unknown state {:?}",
                printable(other, Origin::Field)
            );
            remote::exit::PROTOCOL
        }
    }
}

fn terminal(state: &str) -> bool {
    matches!(state, "SUCCEEDED" | "FAILED" | "CANCELLED")
}

/// The run's session link, printed on stderr once the run has one.
struct Link {
    shown: bool,
}

impl Link {
    async fn show(&mut self, remote: &Remote, id: &str) {
        if !self.shown {
            // Only a convenience: a failed look-up shows nothing.
            if let Ok(run) = remote.get(&run_path(id), &[]).await {
                self.show_of(&run);
            }
        }
    }

    fn show_of(&mut self, run: &Value) {
        if let (false, Some(link)) = (self.shown, run["session_link"].as_str()) {
            self.shown = true;
            eprintln!("session: {}", printable(link, Origin::Field));
        }
    }
}

/// Polls the run until it is terminal; on a terminal stderr, one line says its state and how
/// long the wait has lasted.
async fn wait_for(remote: &Remote, id: &str, link: &mut Link) -> anyhow::Result<String> {
    let progress = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut failures = 0;
    loop {
        match remote.get(&run_path(id), &[]).await {
            Ok(run) => {
                failures = 0;
                let state = run["state"].as_str().unwrap_or("").to_string();
                if !link.shown && run["session_link"].is_string() {
                    if progress {
                        eprint!("\r\x1b[2K");
                    }
                    link.show_of(&run);
                }
                if progress {
                    eprint!(
                        "\r\x1b[2K{id}  {}  {}",
                        printable(&state, Origin::Field),
                        short_duration(started.elapsed())
                    );
                }
                if terminal(&state) {
                    if progress {
                        eprintln!();
                    }
                    return Ok(state);
                }
            }
            // A server restarting or a dropped connection: ask again, for a while.
            Err(e) if e.is_transient() && failures < MAX_RECONNECTS => failures += 1,
            Err(e) => {
                if progress {
                    eprintln!();
                }
                return Err(e.into());
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Lines typed on stdin, read on a thread of their own (stdin has no async reader that works
/// on every kind of file), until end of input.
fn read_followups() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if !line.trim().is_empty() && tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next line typed, or never when there is no reader or it has ended.
async fn next_followup(followups: &mut Option<mpsc::UnboundedReceiver<String>>) -> String {
    if let Some(rx) = followups {
        if let Some(line) = rx.recv().await {
            return line;
        }
        *followups = None;
    }
    std::future::pending().await
}

async fn send_followup(remote: &Remote, id: &str, message: &str, out: &Printer) {
    let sent = remote
        .post(
            &format!("{}/followups", run_path(id)),
            &json!({ "message": message }),
        )
        .await;
    match sent {
        Ok(reply) => out.note(&format!(
            "follow-up sent; the run is {}",
            reply["state"].as_str().unwrap_or("?")
        )),
        Err(e) => out.note(&format!("the follow-up was not sent: {e}")),
    }
}

/// Prints a run's transcript from the start until the run is terminal and its output drained;
/// returns the terminal state. Reads the transcript's event stream, resuming after the last
/// entry printed when the connection drops; from a server that answers the transcript with
/// JSON pages only, it polls the pages instead.
async fn follow_transcript(
    remote: &Remote,
    id: &str,
    mut followups: Option<mpsc::UnboundedReceiver<String>>,
    mut link: Option<&mut Link>,
) -> anyhow::Result<String> {
    let mut out = Printer::new();
    let mut last_id: Option<String> = None;
    let mut retry = Duration::from_secs(2);
    let mut failures = 0;
    loop {
        let answer = remote.transcript(id, 0, last_id.as_deref()).await;
        let response = match answer {
            Ok(Transcript::Events(response)) => response,
            Ok(Transcript::Page(first)) => {
                return poll_transcript(remote, id, first, &mut out, followups, link).await
            }
            Err(e) if e.is_transient() && failures < MAX_RECONNECTS => {
                failures += 1;
                tokio::time::sleep(retry).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let mut events = bounded_lines(response).eventsource();
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                line = next_followup(&mut followups) => {
                    send_followup(remote, id, &line, &out).await;
                    continue;
                }
            };
            let event = match event {
                Some(Ok(event)) => event,
                Some(Err(EventStreamError::Transport(e)))
                    if e.kind() == std::io::ErrorKind::InvalidData =>
                {
                    return Err(Error::Protocol(e.to_string()).into())
                }
                Some(Err(EventStreamError::Utf8(_) | EventStreamError::Parser(_))) => {
                    return Err(Error::Protocol(
                        "the transcript stream is not a valid event stream".into(),
                    )
                    .into())
                }
                // A dropped connection or a read timeout: resume after the last entry.
                Some(Err(EventStreamError::Transport(_))) | None => break,
            };
            if let Some(r) = event.retry {
                retry = r.min(Duration::from_secs(30));
            }
            match event.event.as_str() {
                "entry" => {
                    failures = 0;
                    let entry: Value = serde_json::from_str(&event.data).map_err(|_| {
                        Error::Protocol(format!(
                            "a transcript entry of the stream is not JSON: {:?}",
                            event.data.chars().take(80).collect::<String>()
                        ))
                    })?;
                    if let Some(link) = link.as_deref_mut() {
                        link.show(remote, id).await;
                    }
                    out.entry(&entry)?;
                    if !event.id.is_empty() {
                        last_id = Some(event.id);
                    }
                }
                "end" => {
                    let end: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
                    return Ok(end["state"].as_str().unwrap_or("").to_string());
                }
                "error" => {
                    let e: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
                    return Err(Error::Refused {
                        status: 500,
                        detail: e["detail"].as_str().unwrap_or(&event.data).to_string(),
                    }
                    .into());
                }
                // Events a later server may add.
                _ => {}
            }
        }
        failures += 1;
        if failures > MAX_RECONNECTS {
            return Err(Error::Unreachable {
                url: remote.url(&format!("{}/transcript", run_path(id)), &[]),
                reason: format!("the stream dropped {MAX_RECONNECTS} times in a row"),
            }
            .into());
        }
        tokio::time::sleep(retry).await;
    }
}

/// The longest line of an event stream read: an entry holds at most 16 KiB of text plus a
/// secret's length, which JSON escaping can make six times longer. A longer line is not
/// runledger's, and the parser would buffer it whole.
const MAX_EVENT_LINE: usize = 1024 * 1024;

/// The stream's bytes, failing with `InvalidData` once a line exceeds `MAX_EVENT_LINE`.
fn bounded_lines(
    response: reqwest::Response,
) -> impl futures_util::Stream<Item = std::io::Result<impl AsRef<[u8]>>> {
    let mut line = 0usize;
    response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        line = match chunk.iter().rposition(|b| *b == b'\n') {
            Some(end) => chunk.len() - end - 1,
            None => line + chunk.len(),
        };
        if line > MAX_EVENT_LINE {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the transcript stream sent a line longer than {} KiB",
                    MAX_EVENT_LINE / 1024
                ),
            ));
        }
        Ok(chunk)
    })
}

/// Follows a transcript by polling its JSON pages (a server without the transcript stream).
/// The run is over when a page of a terminal run reaches the end of the file and one more
/// page, asked after it, is empty: output written before the run became terminal is then in.
async fn poll_transcript(
    remote: &Remote,
    id: &str,
    mut page: Value,
    out: &mut Printer,
    mut followups: Option<mpsc::UnboundedReceiver<String>>,
    mut link: Option<&mut Link>,
) -> anyhow::Result<String> {
    let mut offset;
    let mut ended_once = false;
    loop {
        let entries = page["entries"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if let (Some(link), false) = (link.as_deref_mut(), entries.is_empty()) {
            link.show(remote, id).await;
        }
        for entry in entries {
            out.entry(entry)?;
        }
        offset = next_offset(&page)?;
        let has_more = page["has_more"].as_bool().unwrap_or(false);
        let state = page["state"].as_str().unwrap_or("");
        if !has_more || entries.is_empty() {
            if terminal(state) && entries.is_empty() {
                if ended_once {
                    return Ok(state.to_string());
                }
                ended_once = true;
            } else {
                ended_once = false;
                tokio::select! {
                    _ = tokio::time::sleep(POLL) => {}
                    line = next_followup(&mut followups) => {
                        send_followup(remote, id, &line, out).await;
                    }
                }
            }
        }
        page = transcript_page(remote, id, offset).await?;
    }
}

async fn transcript_page(remote: &Remote, id: &str, offset: u64) -> Result<Value, Error> {
    remote
        .get(
            &format!("{}/transcript", run_path(id)),
            &[
                ("offset", offset.to_string()),
                ("limit", PAGE_ENTRIES.to_string()),
            ],
        )
        .await
}

fn next_offset(page: &Value) -> Result<u64, Error> {
    page["next_offset"]
        .as_u64()
        .ok_or_else(|| Error::Protocol("a transcript page without next_offset".into()))
}

/// `runs logs` without `-f`: the transcript as it is now, page after page.
async fn print_transcript(remote: &Remote, id: &str) -> anyhow::Result<()> {
    let mut out = Printer::new();
    let mut offset = 0;
    loop {
        let page = transcript_page(remote, id, offset).await?;
        let entries = page["entries"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        for entry in entries {
            out.entry(entry)?;
        }
        let next = next_offset(&page)?;
        // An empty page with more bytes after it is an entry being written: the end for now.
        if !page["has_more"].as_bool().unwrap_or(false) || entries.is_empty() || next <= offset {
            return Ok(());
        }
        offset = next;
    }
}

/// Writes transcript entries where they belong: the agent's stdout and follow-ups to stdout,
/// its stderr to stderr, runledger's notes (`system`, the presets' readable `agent` lines) to
/// stderr, dimmed on a terminal and marked `[system]` otherwise. Every text goes through
/// `terminal::printable`: control characters escaped, and an agent's line that begins like the
/// CLI's own `[system]` lines marked, so that neither can act on or pass for the CLI.
struct Printer {
    dim: bool,
    /// Whether the next entry of stdout (`[0]`) and of stderr (`[1]`) starts a line: an entry
    /// that is `continued` goes on in the next one.
    at_line_start: [bool; 2],
}

impl Printer {
    fn new() -> Printer {
        Printer {
            dim: std::io::stderr().is_terminal(),
            at_line_start: [true; 2],
        }
    }

    fn entry(&mut self, entry: &Value) -> anyhow::Result<()> {
        let text = entry["text"].as_str().unwrap_or("");
        let continued = entry["continued"].as_bool().unwrap_or(false);
        let end = if continued { "" } else { "\n" };
        match entry["stream"].as_str().unwrap_or("") {
            "stdout" | "followup" => {
                let text = printable(text, agent_origin(self.at_line_start[0]));
                self.at_line_start[0] = !continued;
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())?;
                out.write_all(end.as_bytes())?;
                out.flush()?;
            }
            "stderr" => {
                let text = printable(text, agent_origin(self.at_line_start[1]));
                self.at_line_start[1] = !continued;
                let mut err = std::io::stderr().lock();
                err.write_all(text.as_bytes())?;
                err.write_all(end.as_bytes())?;
            }
            stream => {
                // The first line is the CLI's own, behind its marker; the lines after it can
                // quote the agent (a failure's last lines of stderr, an assistant's reply).
                let text = printable(text, Origin::AgentRest);
                let mut err = std::io::stderr().lock();
                if self.dim {
                    write!(err, "{DIM}{text}{RESET}{end}")?;
                } else {
                    let stream = printable(stream, Origin::Field);
                    write!(err, "[{stream}] {text}{end}")?;
                }
            }
        }
        Ok(())
    }

    fn note(&self, text: &str) {
        let text = printable(text, Origin::AgentRest);
        if self.dim {
            eprintln!("{DIM}{text}{RESET}");
        } else {
            eprintln!("[runledger] {text}");
        }
    }
}

/// How an agent's entry is printed: from the start of a line, or going on with one.
fn agent_origin(at_line_start: bool) -> Origin {
    if at_line_start {
        Origin::AgentLine
    } else {
        Origin::AgentRest
    }
}

/// `runs events`: every page of the history; with `json`, one document shaped as a page.
async fn print_events(remote: &Remote, id: &str, as_json: bool) -> anyhow::Result<()> {
    let mut events = Vec::new();
    let mut after: Option<u64> = None;
    let mut first = Value::Null;
    loop {
        let query: Vec<(&str, String)> = after
            .map(|seq| vec![("after_seq", seq.to_string())])
            .unwrap_or_default();
        let page = remote
            .get(&format!("{}/events", run_path(id)), &query)
            .await?;
        let got = page["events"]
            .as_array()
            .ok_or_else(|| Error::Protocol("an events page without events".into()))?;
        if !as_json {
            print_event_lines(got)?;
        } else {
            events.extend(got.iter().cloned());
        }
        if first.is_null() {
            first = page.clone();
        }
        match page["next"].as_u64() {
            Some(next) if Some(next) != after => after = Some(next),
            _ => break,
        }
    }
    if as_json {
        first["events"] = Value::Array(events);
        if let Some(page) = first.as_object_mut() {
            page.remove("next");
        }
        print_line(&terminal::json(&first))?;
    }
    Ok(())
}

fn print_event_lines(events: &[Value]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    for e in events {
        writeln!(
            out,
            "{:>4}  {}  {:<16}  {}",
            e["seq"],
            field(e, "at"),
            field(e, "type"),
            terminal::json(&e["data"])
        )?;
    }
    Ok(())
}

/// A list page: a table on a terminal, tab-separated lines otherwise; the next page's cursor
/// on stderr.
fn print_list(page: &Value) -> anyhow::Result<()> {
    let runs = page["runs"]
        .as_array()
        .ok_or_else(|| Error::Protocol("a list answer without runs".into()))?;
    let now = time::OffsetDateTime::now_utc();
    let mut out = std::io::stdout().lock();
    if std::io::stdout().is_terminal() {
        let mut rows = vec![[
            "ID".to_string(),
            "STATE".into(),
            "TITLE".into(),
            "AGE".into(),
            "DURATION".into(),
            "ENVIRONMENT".into(),
        ]];
        for run in runs {
            rows.push([
                field(run, "run_id"),
                field(run, "state"),
                clip(&single_line(&field(run, "title")), 40),
                age(run, now),
                duration(run, now),
                field(&run["agent_config"], "environment_id"),
            ]);
        }
        write_table(&mut out, &rows)?;
        if runs.is_empty() {
            writeln!(out, "(no runs)")?;
        }
    } else {
        for run in runs {
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}",
                field(run, "run_id"),
                field(run, "state"),
                single_line(&field(run, "title")),
                field(run, "created_at"),
                field(&run["agent_config"], "environment_id"),
            )?;
        }
    }
    if let Some(cursor) = page["page_info"]["next_cursor"].as_str() {
        eprintln!("more: --cursor {cursor}");
    }
    Ok(())
}

fn print_run(run: &Value) -> anyhow::Result<()> {
    let now = time::OffsetDateTime::now_utc();
    let config = &run["agent_config"];
    let mut lines: Vec<(&str, String)> = vec![
        ("id", field(run, "run_id")),
        ("state", field(run, "state")),
        ("title", single_line(&field(run, "title"))),
        ("environment", field(config, "environment_id")),
        ("model", field(config, "model_id")),
        (
            "created",
            format!("{} ({} ago)", field(run, "created_at"), age(run, now)),
        ),
        ("updated", field(run, "updated_at")),
        ("duration", duration(run, now)),
        (
            "creator",
            format!(
                "{} ({})",
                field(&run["creator"], "display_name"),
                field(&run["creator"], "uid")
            ),
        ),
        ("source", field(run, "source")),
    ];
    if let Some(message) = run["status_message"]["message"].as_str() {
        lines.push(("status", single_line(message)));
    }
    if let Some(link) = run["session_link"].as_str() {
        lines.push(("session", printable(link, Origin::Field).into_owned()));
    }
    lines.push(("prompt", single_line(&field(run, "prompt"))));
    let mut out = std::io::stdout().lock();
    for (name, value) in lines {
        writeln!(out, "{:<12} {value}", format!("{name}:"))?;
    }
    Ok(())
}

/// A string field of an answer, as it may be printed (`terminal::printable`).
fn field(v: &Value, name: &str) -> String {
    printable(v[name].as_str().unwrap_or(""), Origin::Field).into_owned()
}

/// Tabs and line breaks become spaces, other control characters escapes: one record per line,
/// one field per column.
fn single_line(text: &str) -> String {
    printable(text, Origin::Field).replace(['\t', '\n'], " ")
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max - 1).collect::<String>())
    }
}

fn write_table(out: &mut impl std::io::Write, rows: &[[String; 6]]) -> std::io::Result<()> {
    let mut widths = [0; 6];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                line.extend(std::iter::repeat_n(' ', w - cell.chars().count() + 2));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

fn parse_time(text: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}

fn age(run: &Value, now: time::OffsetDateTime) -> String {
    parse_time(&field(run, "created_at"))
        .map(|at| short_duration((now - at).try_into().unwrap_or_default()))
        .unwrap_or_default()
}

/// How long the run has run: from its start to its last change when it is over, to now while
/// it runs.
fn duration(run: &Value, now: time::OffsetDateTime) -> String {
    let Some(start) = run["started_at"].as_str().and_then(parse_time) else {
        return String::new();
    };
    let end = if terminal(run["state"].as_str().unwrap_or("")) {
        parse_time(&field(run, "updated_at")).unwrap_or(now)
    } else {
        now
    };
    short_duration((end - start).try_into().unwrap_or_default())
}

/// `42s`, `5m3s`, `2h5m`, `3d4h`.
fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

/// A `--since`/`--until` value: an age (`30m`, `12h`, `7d`, `45s`) is turned into the time that
/// long before `now`; anything else is sent as it is (RFC 3339, which the server checks).
fn when(text: &str, now: time::OffsetDateTime) -> String {
    let text = text.trim();
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        "w" => 7 * 86400,
        _ => return text.to_string(),
    };
    match number.parse::<i64>() {
        Ok(n) if n >= 0 => {
            let at = now - time::Duration::seconds(n.saturating_mul(seconds));
            at.format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_else(|_| text.to_string())
        }
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_become_times_and_other_values_pass_through() {
        let now = time::macros::datetime!(2026-11-26 12:00:00 UTC);
        assert_eq!(when("30m", now), "2026-11-26T11:30:00Z");
        assert_eq!(when("2d", now), "2026-11-24T12:00:00Z");
        assert_eq!(when("2026-01-01T00:00:00Z", now), "2026-01-01T00:00:00Z");
        assert_eq!(when("soon", now), "soon");
        assert_eq!(when("-3h", now), "-3h");
    }

    #[test]
    fn durations_are_short() {
        assert_eq!(short_duration(Duration::from_secs(42)), "42s");
        assert_eq!(short_duration(Duration::from_secs(303)), "5m3s");
        assert_eq!(short_duration(Duration::from_secs(7500)), "2h5m");
        assert_eq!(
            short_duration(Duration::from_secs(3 * 86400 + 4 * 3600)),
            "3d4h"
        );
    }

    #[test]
    fn a_table_aligns_its_columns_and_a_title_keeps_to_one_line() {
        let cell = |s: &str| s.to_string();
        let rows = [
            [
                cell("ID"),
                cell("STATE"),
                cell("TITLE"),
                cell("AGE"),
                cell("D"),
                cell("ENV"),
            ],
            [
                cell("01M"),
                cell("QUEUED"),
                single_line("a\tb\nc"),
                cell("5s"),
                cell(""),
                cell("x"),
            ],
        ];
        let mut out = Vec::new();
        write_table(&mut out, &rows).expect("write");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "ID   STATE   TITLE  AGE  D  ENV\n01M  QUEUED  a b c  5s      x\n"
        );
        assert_eq!(clip("abcdef", 4), "abc…");
    }

    #[test]
    fn run_ids_are_escaped_in_paths() {
        assert_eq!(run_path("../admin"), "/api/v1/agent/runs/..%2Fadmin");
    }
}
