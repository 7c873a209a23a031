//! The `command` harness (and the presets built on it): runs an agent as a child process.
//!
//! One execution: make the run's workspace (fresh until the environment's `setup` commands
//! have succeeded once for the run), write the MCP config file, create the report file
//! (`report.rs`, read every 500 ms and at the end), start the argv with the `RUNLEDGER_*`
//! variables, hand it follow-ups on stdin as JSON lines, and stream its stdout and
//! stderr to the transcript as they arrive. Memory is bounded whatever the agent prints: output
//! moves through fixed-size buffers and a bounded channel, so a fast writer is slowed to the
//! speed of the transcript file instead of filling memory. The exit status decides the outcome;
//! cancellation and `max_runtime_secs` stop the whole process tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::cgroup::Leaf;
use super::lines::{Piece, Splitter, Tail};
use super::observe::{self, Observer};
use super::presets::{self, Values};
use super::process::{self, Marker, EXECUTION_VAR, INSTANCE_VAR, RUN_VAR};
use super::report::{self, Reports};
use super::safe_fs::{self, Links, Owner};
use super::sandbox::{Launcher, Plan};
use super::transcript::{Entry, Redactor, Writer};
use super::{Artifacts, Assignment, Control, Deliveries, Supervision};
use crate::domain::{ExecutionUsage, Followup, StatusMessage};
use crate::harness::{AgentPermissions, Harness, Sandbox};

/// The most bytes a preset's prompt argument gets: below Linux's 128 KiB limit of one argument
/// (`MAX_ARG_STRLEN`), with room for an option name in front.
const ARG_BYTES: usize = 120 * 1024;

/// The directory under a Slurm environment's `workspace_root` that holds each run's own files
/// (home, MCP file, reports, step files), on the filesystem the nodes share.
pub const SHARED_FILES: &str = ".runledger-files";
/// The `PATH` of every agent whose environment sets none in its `env`.
pub const AGENT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Bytes asked for per read of an agent's stdout or stderr.
const CHUNK: usize = 8 * 1024;
/// How long writing one follow-up to an agent's stdin may take.
const STDIN_WRITE_LIMIT: Duration = Duration::from_secs(5);

/// How an execution ended: `None` when it was stopped by a cancel.
pub(super) type Outcome = Option<Result<(), StatusMessage>>;

fn internal(message: String) -> StatusMessage {
    tracing::error!(%message, "agent execution failed inside the service");
    StatusMessage {
        message,
        error_code: Some("internal_error".into()),
        retryable: Some(true),
    }
}

/// The whole environment of every process of the execution (setup commands included). Nothing
/// else of the server's environment is passed on: it can hold cloud credentials or the
/// server's own keys.
fn variables(
    job: &Assignment,
    sup: &Supervision,
    mcp_config: &Path,
    home: &Path,
    workspace: &Path,
    report_file: &Path,
) -> BTreeMap<String, String> {
    let run = &job.run;
    let config = &run.config;
    let environment = &job.environment;
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let server = |name: &str| std::env::var(name).ok();
    // A fixed PATH, never the server's (which may lead into root's home: `/root/.cargo/bin`);
    // the environment's own `env.PATH` replaces it below.
    vars.insert("PATH".into(), AGENT_PATH.into());
    vars.insert("HOME".into(), home.display().to_string());
    vars.insert("USER".into(), sup.sandboxes.user_name());
    for name in ["LANG", "TERM"] {
        if let Some(value) = server(name) {
            vars.insert(name.into(), value);
        }
    }
    for name in &environment.inherit_env {
        if let Some(value) = server(name) {
            vars.insert(name.clone(), value);
        }
    }
    vars.extend(preset_variables(environment, home));
    // The environment's own `env` can override a preset's defaults.
    vars.extend(environment.env.clone());
    for name in &environment.secrets {
        if let Some(secret) = sup.secrets.get(name) {
            vars.insert(name.clone(), secret.value.expose().to_string());
        }
    }
    let mut set = |k: &str, v: String| {
        vars.insert(k.to_string(), v);
    };
    set(RUN_VAR, run.id.to_string());
    set(INSTANCE_VAR, sup.instance.clone());
    set("RUNLEDGER_PROMPT", run.prompt.clone());
    set("RUNLEDGER_TITLE", run.title.clone());
    // Unset config fields are present and empty, so agents need not tell the two apart.
    for (name, value) in [
        ("RUNLEDGER_MODEL_ID", &config.model_id),
        ("RUNLEDGER_BASE_PROMPT", &config.base_prompt),
        ("RUNLEDGER_SKILL_SPEC", &config.skill_spec),
        ("RUNLEDGER_CONFIG_NAME", &config.name),
    ] {
        set(name, value.clone().unwrap_or_default());
    }
    set("RUNLEDGER_MCP_CONFIG", mcp_config.display().to_string());
    // Present and empty for a run without attachments, like the unset config fields.
    set(
        "RUNLEDGER_ATTACHMENTS_DIR",
        if run.attachments.is_empty() {
            String::new()
        } else {
            super::attachments::dir(workspace).display().to_string()
        },
    );
    set(report::VAR, report_file.display().to_string());
    set(EXECUTION_VAR, job.execution.to_string());
    set(
        "RUNLEDGER_AGENT_PERMISSIONS",
        environment.agent_permissions.as_str().to_string(),
    );
    set(
        "RUNLEDGER_FOLLOWUP",
        job.resumed_by
            .as_ref()
            .map(|f| f.message.clone())
            .unwrap_or_default(),
    );
    vars
}

/// What a preset's CLI needs in its environment: where its per-run configuration lives (in
/// the run's private home, never the workspace), its model endpoint, and, inside runledger's
/// sandbox, that it may skip its own permission prompts.
fn preset_variables(env: &crate::config::Environment, home: &Path) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    let mut set = |k: &str, v: &str| {
        vars.insert(k.to_string(), v.to_string());
    };
    let url = env.model_base_url.as_deref();
    match env.harness {
        Harness::Claude => {
            // Claude Code refuses bypassPermissions as root unless told it is in a sandbox;
            // runledger's sandbox is that boundary.
            if env.sandbox == Some(Sandbox::Bwrap) {
                set("IS_SANDBOX", "1");
            }
            set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
            set("DISABLE_AUTOUPDATER", "1");
            if let Some(url) = url {
                set("ANTHROPIC_BASE_URL", url);
            }
        }
        Harness::Codex => {
            // Outside any TMPDIR: Codex's own sandbox helper fails under one.
            set("CODEX_HOME", &home.join(".codex").display().to_string());
        }
        Harness::Gemini => {
            set("GEMINI_CLI_HOME", &home.display().to_string());
            if let Some(url) = url {
                set("GOOGLE_GEMINI_BASE_URL", url);
            }
        }
        Harness::Command | Harness::Demo => {}
    }
    if env.harness != Harness::Command {
        set("NO_COLOR", "1");
    }
    vars
}

/// MCP credential values shorter than this are not redacted from the transcript: replacing
/// every occurrence of a one- or two-letter value would garble the output and hide nothing.
const MCP_REDACTED_MIN_BYTES: usize = 8;

/// The run's MCP credential values (as put back for the agent), named `mcp.SERVER.env.NAME` and
/// `mcp.SERVER.headers.NAME`, for the transcript's redactor: an agent that prints its MCP
/// configuration does not show the values to the readers of its transcript.
fn mcp_credentials(job: &Assignment) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    for (server, s) in &job.run.config.mcp_servers {
        for (kind, values) in [("env", &s.env), ("headers", &s.headers)] {
            for (name, value) in values {
                if value.len() >= MCP_REDACTED_MIN_BYTES {
                    out.push((format!("mcp.{server}.{kind}.{name}"), value.as_str()));
                }
            }
        }
    }
    out
}

/// `{"mcpServers": {...}}` in the shape agent CLIs read (stdio or http servers). A preset's
/// CLI gets only the servers it can use (`usable_mcp`); a command agent gets every entry.
fn mcp_json(job: &Assignment) -> serde_json::Value {
    let preset = job.environment.harness.is_preset();
    let servers: serde_json::Map<String, serde_json::Value> = job
        .run
        .config
        .mcp_servers
        .iter()
        .filter(|(_, s)| !preset || s.command.is_some() || s.url.is_some())
        .map(|(name, s)| {
            let value = if let Some(command) = &s.command {
                serde_json::json!({ "type": "stdio", "command": command, "args": s.args, "env": s.env })
            } else if let Some(url) = &s.url {
                serde_json::json!({ "type": "http", "url": url, "headers": s.headers })
            } else {
                serde_json::json!({ "warp_id": s.warp_id })
            };
            (name.clone(), value)
        })
        .collect();
    serde_json::json!({ "mcpServers": servers })
}

/// The command for one process of the execution, from its launcher. `read_only_workspace`: the
/// agent of a read-only preset run (`presets::read_only_workspace`); setup always writes.
fn command(
    x: &Execution<'_>,
    program: &str,
    args: &[String],
    read_only_workspace: bool,
) -> Command {
    let plan = Plan {
        program: program.to_string(),
        args: args.to_vec(),
        cwd: x.workspace.clone(),
        read_only_workspace,
        env: x.vars.clone(),
        writable: vec![x.home.clone(), x.report_path.clone()],
        readable: vec![x.mcp_path.clone()],
        network: x.job.environment.network,
        cgroups: x.leaf.as_ref().map(|l| l.procs()).unwrap_or_default(),
        user: x.sup.sandboxes.agent_user().cloned(),
    };
    let mut cmd = x.launcher().command(&plan);
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so the whole tree can be signalled at once.
        .process_group(0)
        .kill_on_drop(false);
    cmd
}

/// Streams a child's output to the transcript, keeping the tail of stderr, and hands a
/// preset's whole output lines to its observer.
struct Output {
    rx: mpsc::Receiver<(&'static str, Piece)>,
    stderr_tail: Tail,
    observer: Option<Observer>,
    stdout_line: Line,
    stderr_line: Line,
    /// Per stream (stdout, stderr): the end of its last `continued` piece, held back from the
    /// transcript until the stream's next piece, so that a secret's value printed across the
    /// cut between two entries is whole in one entry when the redactor sees it.
    held: [String; 2],
}

/// The most bytes of one output line that are reassembled for the observer; a longer line
/// (no CLI event is that large) is skipped rather than held in memory.
const LINE_LIMIT: usize = 4 * 1024 * 1024;

/// Reassembles whole lines from the pieces `lines.rs` cut (a piece may hold several lines,
/// and a long line is spread over `continued` pieces).
#[derive(Default)]
struct Line {
    carry: String,
    overflow: bool,
}

impl Line {
    fn feed(&mut self, piece: &Piece, mut each: impl FnMut(&str)) {
        let text = piece.text.as_str();
        let (whole, rest) = if piece.continued {
            match text.rfind('\n') {
                Some(i) => (Some(&text[..i]), &text[i + 1..]),
                None => (None, text),
            }
        } else {
            (Some(text), "")
        };
        if let Some(whole) = whole {
            let mut lines = whole.split('\n');
            if let Some(first) = lines.next() {
                if !self.overflow && self.carry.len() + first.len() <= LINE_LIMIT {
                    self.carry.push_str(first);
                    each(&self.carry);
                }
                self.carry.clear();
                self.overflow = false;
            }
            for line in lines {
                each(line);
            }
        }
        if !self.overflow {
            if self.carry.len() + rest.len() > LINE_LIMIT {
                self.carry.clear();
                self.overflow = true;
            } else {
                self.carry.push_str(rest);
            }
        }
    }
}

/// Reads one stream and hands its pieces (`lines.rs`) to the supervising loop.
fn pump(
    stream: &'static str,
    mut reader: impl AsyncRead + Unpin + Send + 'static,
    tx: mpsc::Sender<(&'static str, Piece)>,
) {
    tokio::spawn(async move {
        let mut splitter = Splitter::default();
        let mut buf = vec![0u8; CHUNK];
        let mut pieces = Vec::new();
        loop {
            let n = match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            splitter.push(&buf[..n], &mut pieces);
            for piece in pieces.drain(..) {
                if tx.send((stream, piece)).await.is_err() {
                    return;
                }
            }
        }
        if let Some(piece) = splitter.finish() {
            let _ = tx.send((stream, piece)).await;
        }
    });
}

impl Output {
    fn start(child: &mut Child, observer: Option<Observer>) -> Output {
        // Bounded: a fast writer waits for the transcript instead of filling memory.
        let (tx, rx) = mpsc::channel(16);
        if let Some(out) = child.stdout.take() {
            pump("stdout", out, tx.clone());
        }
        if let Some(err) = child.stderr.take() {
            pump("stderr", err, tx);
        }
        Output {
            rx,
            stderr_tail: Tail::default(),
            observer,
            stdout_line: Line::default(),
            stderr_line: Line::default(),
            held: Default::default(),
        }
    }

    fn record(
        &mut self,
        writer: &mut Writer,
        execution: u32,
        stream: &'static str,
        piece: Piece,
    ) -> std::io::Result<()> {
        let mut readable = Vec::new();
        if let Some(observer) = self.observer.as_mut() {
            if stream == "stdout" {
                self.stdout_line
                    .feed(&piece, |l| readable.extend(observer.stdout_line(l)));
            } else {
                self.stderr_line.feed(&piece, |l| observer.stderr_line(l));
            }
        }
        let at = crate::clock::now();
        let held = &mut self.held[usize::from(stream == "stderr")];
        let mut text = std::mem::take(held);
        text.push_str(&piece.text);
        if piece.continued {
            // Moving bytes from the end of a continued entry to the start of the next one of
            // the same stream keeps what a reader rebuilds (a continued entry adds no newline).
            let mut cut = text.len().saturating_sub(writer.redaction_window());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            *held = text.split_off(cut);
        }
        if stream == "stderr" {
            // What a failure's message quotes is what the transcript holds: redacted, with a
            // value cut between two pieces whole (see `held`), before the tail cuts lines.
            self.stderr_tail.push(&Piece {
                text: writer.redactor().apply(&text).into_owned(),
                continued: piece.continued,
            });
        }
        if !text.is_empty() || !piece.continued {
            writer.append(&Entry {
                at,
                execution,
                stream: stream.into(),
                text,
                continued: piece.continued,
            })?;
        }
        // After the raw line it was read from, so a reader sees both in order.
        for text in readable {
            writer.append(&Entry {
                at,
                execution,
                stream: "agent".into(),
                text,
                continued: false,
            })?;
        }
        Ok(())
    }

    /// Drains what is left after the process exited (bounded in time: a background child may
    /// keep the pipe open until the tree is stopped).
    async fn drain(&mut self, writer: &mut Writer, execution: u32) -> std::io::Result<()> {
        let deadline = tokio::time::sleep(Duration::from_secs(2));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                item = self.rx.recv() => match item {
                    Some((stream, piece)) => self.record(writer, execution, stream, piece)?,
                    None => return Ok(()),
                },
                _ = &mut deadline => return Ok(()),
            }
        }
    }

    fn tail(&self) -> String {
        self.stderr_tail.text()
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        _ => "an unknown status".into(),
    }
}

fn failure(
    what: &str,
    status: std::process::ExitStatus,
    tail: &str,
    code: Option<&str>,
) -> StatusMessage {
    let mut message = format!("{what} exited with {}", describe(status));
    if !tail.is_empty() {
        message.push_str("; last lines of stderr:\n");
        message.push_str(tail);
    }
    StatusMessage {
        message,
        error_code: code.map(str::to_string),
        retryable: Some(false),
    }
}

/// A follow-up as a line for the agent's stdin: a user message of Claude Code's streaming
/// input, or the command harness's documented JSON line.
fn followup_line(harness: Harness, followup: &Followup) -> String {
    if harness == Harness::Claude {
        return presets::claude_message(&followup.message);
    }
    // Written by hand to keep the documented key order: type, message, mode.
    let message = serde_json::Value::String(followup.message.clone());
    format!(
        "{{\"type\":\"followup\",\"message\":{message},\"mode\":\"{}\"}}\n",
        followup.mode.as_str()
    )
}

/// Writes a line to the agent's stdin; whether it was written.
async fn write_line(stdin: &mut Option<ChildStdin>, line: &str) -> bool {
    let Some(pipe) = stdin.as_mut() else {
        return false;
    };
    // An agent that closed its stdin no longer takes follow-ups; that is not a failure. One
    // that never reads it would fill the pipe and block this write — and with it the whole
    // supervision loop (output, cancel, deadline) — so the write gets a time limit, after which
    // stdin is given up.
    let write = async {
        pipe.write_all(line.as_bytes()).await?;
        pipe.flush().await
    };
    match tokio::time::timeout(STDIN_WRITE_LIMIT, write).await {
        Ok(Ok(())) => true,
        Ok(Err(_)) | Err(_) => {
            *stdin = None;
            false
        }
    }
}

enum Ended {
    Exited(std::process::ExitStatus),
    Stopped,
    TimedOut,
}

/// Claude Code's streaming input: the user messages written to its stdin (the turn's prompt
/// first, then follow-ups), the ones it echoed as it took them, and the turns it ended.
#[derive(Default)]
struct StreamInput {
    written: u32,
    echoed: u32,
    turns: u32,
}

impl StreamInput {
    /// Follow-ups written that the CLI has not (yet) taken.
    fn unconfirmed(&self) -> u32 {
        self.written
            .saturating_sub(1)
            .saturating_sub(self.echoed.saturating_sub(1))
    }

    /// Takes what the observer saw: returns how many more follow-ups the CLI took, and
    /// whether its input should end now (a turn ended with everything written taken, or in
    /// an error, after which nothing more is given to it).
    fn observe(&mut self, observer: &Observer) -> (u32, bool) {
        let echoed = observer.echoed();
        // The first echo is the turn's prompt, not a follow-up.
        let took = echoed
            .saturating_sub(1)
            .saturating_sub(self.echoed.saturating_sub(1));
        self.echoed = echoed;
        let (turns, failed) = observer.turns_ended();
        let turn_ended = turns > self.turns;
        self.turns = turns;
        (took, turn_ended && (failed || self.echoed >= self.written))
    }
}

/// What a child is supervised with: the run's transcript, its control channel, follow-ups not
/// yet handed over, and the execution's deadline.
struct Watch<'a> {
    job: &'a Assignment,
    writer: &'a mut Writer,
    control: &'a mut mpsc::UnboundedReceiver<Control>,
    pending: &'a mut Vec<Followup>,
    deliveries: &'a Deliveries,
    /// The execution's report file, looked at every `report::POLL`.
    reports: &'a mut Option<Reports>,
    artifacts: &'a Artifacts,
    /// Where a preset's session id is kept, written as soon as the CLI reports it, so that a
    /// follow-up can resume the session even when the server dies during the turn.
    session_path: &'a Path,
    deadline: tokio::time::Instant,
}

/// Waits for a child while serving control messages and the deadline. Follow-ups go to
/// `stdin` when there is one, otherwise they wait in `pending`.
async fn supervise(
    child: &mut Child,
    output: &mut Output,
    stdin: &mut Option<ChildStdin>,
    input: &mut Option<StreamInput>,
    w: &mut Watch<'_>,
) -> std::io::Result<Ended> {
    let (job, deadline) = (w.job, w.deadline);
    let mut session_kept = false;
    let mut look = tokio::time::interval(report::POLL);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            status = child.wait() => return Ok(Ended::Exited(status?)),
            _ = look.tick() => {
                collect_reports(w.reports, false, w.writer, job.execution, w.artifacts).await;
            }
            Some((stream, piece)) = output.rx.recv() => {
                output.record(w.writer, job.execution, stream, piece)?;
                if !session_kept {
                    if let Some(id) = output.observer.as_ref().and_then(Observer::session) {
                        session_kept = true;
                        // `finish` tries again and says so in the transcript if it fails.
                        let _ = write_private(w.session_path, id.as_bytes(), None);
                    }
                }
                if let (Some(st), Some(observer)) = (input.as_mut(), output.observer.as_ref()) {
                    let (took, end_input) = st.observe(observer);
                    if took > 0 {
                        w.deliveries.took(took);
                        w.writer.append(&Entry {
                            at: crate::clock::now(),
                            execution: job.execution,
                            stream: "system".into(),
                            text: format!("{took} follow-up(s) reached the agent during its turn"),
                            continued: false,
                        })?;
                    }
                    if end_input {
                        // Claude Code ends once its input ends and it has done what it read.
                        *stdin = None;
                    }
                }
            }
            message = w.control.recv() => match message {
                Some(Control::Followup(f)) => {
                    w.writer.append(&Entry {
                        at: crate::clock::now(),
                        execution: job.execution,
                        stream: "followup".into(),
                        text: format!("({}) {}", f.mode.as_str(), f.message),
                        continued: false,
                    })?;
                    if write_line(stdin, &followup_line(job.environment.harness, &f)).await {
                        match input.as_mut() {
                            // Taken once the CLI echoes it.
                            Some(st) => st.written += 1,
                            None => w.deliveries.took(1),
                        }
                    } else {
                        // Not taken now: it waits for a next turn, or for the next execution.
                        w.pending.push(f);
                    }
                }
                Some(Control::Stop) | None => return Ok(Ended::Stopped),
            },
            _ = tokio::time::sleep_until(deadline) => return Ok(Ended::TimedOut),
        }
    }
}

/// Takes what the agent appended to its report file (`report.rs`, off the async executor):
/// each artifact goes to `artifacts`, each refused line is a line of the transcript.
async fn collect_reports(
    slot: &mut Option<Reports>,
    at_end: bool,
    writer: &mut Writer,
    execution: u32,
    artifacts: &Artifacts,
) {
    let Some(mut reports) = slot.take() else {
        return;
    };
    let polled = tokio::task::spawn_blocking(move || {
        let outcomes = reports.poll(at_end);
        (reports, outcomes)
    })
    .await;
    let outcomes = match polled {
        Ok((reports, outcomes)) => {
            *slot = Some(reports);
            outcomes
        }
        Err(e) => {
            // Not looked at again: a panic would only repeat.
            tracing::error!(error = %e, "reading an agent's report file failed");
            return;
        }
    };
    for outcome in outcomes {
        match outcome {
            Ok(artifact) => artifacts.reported(artifact),
            Err(reason) => {
                let _ = writer.append(&Entry {
                    at: crate::clock::now(),
                    execution,
                    stream: "system".into(),
                    text: format!("[runledger] {} refused: {reason}", report::VAR),
                    continued: false,
                });
            }
        }
    }
}

/// Writes a file only its owner can read (MCP configs can hold credentials), given to
/// `owner`: `path` is in the run's agent files, a directory only the server can write, and the
/// file is replaced, never written through.
fn write_private(path: &Path, contents: &[u8], owner: Option<Owner>) -> Result<(), safe_fs::Error> {
    let (dir, name) = split(path)?;
    safe_fs::Dir::open(dir)?.replace(name, contents, 0o600, owner)
}

/// The directory and the name of `path`, a file the server writes.
fn split(path: &Path) -> Result<(&Path, &str), safe_fs::Error> {
    match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(dir), Some(name)) => Ok((dir, name)),
        _ => Err(safe_fs::Error::Refused {
            path: path.to_path_buf(),
            why: "it is not a file in a directory",
        }),
    }
}

fn private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

/// Objects are merged key by key; anything else in `ours` replaces what was there.
fn merge(into: &mut serde_json::Value, ours: &serde_json::Value) {
    match (into.as_object_mut(), ours.as_object()) {
        (Some(into), Some(ours)) => {
            for (k, v) in ours {
                merge(into.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        _ => *into = ours.clone(),
    }
}

/// The MCP servers of the run that a preset's CLI can use, and the names of those it cannot
/// (a `warp_id` entry names a server of the original platform, which no CLI can reach).
fn usable_mcp(job: &Assignment) -> (Vec<(&String, &crate::domain::McpServer)>, Vec<String>) {
    let mut usable = Vec::new();
    let mut unusable = Vec::new();
    for (name, server) in &job.run.config.mcp_servers {
        if server.command.is_some() || server.url.is_some() {
            usable.push((name, server));
        } else {
            unusable.push(name.clone());
        }
    }
    (usable, unusable)
}

/// Writes what a preset's CLI reads at start into the run's private home, after setup (so a
/// setup command's own settings there are kept and extended) and never into the workspace:
/// Codex's `config.toml` (model provider, MCP servers), Gemini CLI's `settings.json` (auth
/// type, MCP servers). Claude Code gets its MCP servers with `--mcp-config`.
///
/// The home is the agent's, kept between executions: everything in it is reached through
/// `safe_fs`, so a link, a FIFO or a hard link the agent left at these names is refused, never
/// followed (`docs/security.md`, "Paths the agent controls").
fn write_cli_config(x: &Execution<'_>) -> Result<(), safe_fs::Error> {
    let env = &x.job.environment;
    let (servers, _) = usable_mcp(x.job);
    let owner = x.sup.sandboxes.owner();
    let config_dir = |name: &str| -> Result<safe_fs::Dir, safe_fs::Error> {
        let dir = safe_fs::Dir::open(&x.home)?.make_dir(name, 0o700)?;
        dir.set_owner(owner)?;
        Ok(dir)
    };
    match env.harness {
        Harness::Codex => {
            let dir = config_dir(".codex")?;
            let file = "config.toml";
            let mut config: toml::Table = dir
                .read(Path::new(file), Links::Refused)?
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|t| t.parse().ok())
                .unwrap_or_default();
            codex_config(&mut config, env.model_base_url.as_deref(), servers);
            dir.replace(file, config.to_string().as_bytes(), 0o600, owner)
        }
        Harness::Gemini => {
            let dir = config_dir(".gemini")?;
            let file = "settings.json";
            let mut settings = dir
                .read(Path::new(file), Links::Refused)?
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .filter(serde_json::Value::is_object)
                .unwrap_or_else(|| serde_json::json!({}));
            let mut ours = serde_json::json!({});
            // An API key (GEMINI_API_KEY) unless setup chose another auth type.
            if !settings["security"]["auth"]["selectedType"].is_string() {
                ours["security"] = serde_json::json!({"auth": {"selectedType": "gemini-api-key"}});
            }
            let mut mcp = serde_json::Map::new();
            for (name, server) in servers {
                let entry = if let Some(command) = &server.command {
                    serde_json::json!({"command": command, "args": server.args, "env": server.env})
                } else {
                    serde_json::json!({"httpUrl": server.url, "headers": server.headers})
                };
                mcp.insert(name.clone(), entry);
            }
            if !mcp.is_empty() {
                ours["mcpServers"] = serde_json::Value::Object(mcp);
            }
            // Merged into what is there, keeping everything else.
            merge(&mut settings, &ours);
            dir.replace(file, settings.to_string().as_bytes(), 0o600, owner)
        }
        Harness::Claude | Harness::Command | Harness::Demo => Ok(()),
    }
}

/// Codex's `config.toml` with runledger's model provider (for `model_base_url`) and the run's
/// MCP servers.
fn codex_config(
    config: &mut toml::Table,
    model_base_url: Option<&str>,
    servers: Vec<(&String, &crate::domain::McpServer)>,
) {
    if let Some(url) = model_base_url {
        let mut provider = toml::Table::new();
        provider.insert("name".into(), "runledger model_base_url".into());
        provider.insert("base_url".into(), url.into());
        provider.insert("env_key".into(), "OPENAI_API_KEY".into());
        provider.insert("wire_api".into(), "responses".into());
        provider.insert("supports_websockets".into(), false.into());
        let providers = config
            .entry("model_providers")
            .or_insert_with(|| toml::Table::new().into());
        if let Some(providers) = providers.as_table_mut() {
            providers.insert("runledger".into(), provider.into());
        }
        config.insert("model_provider".into(), "runledger".into());
    }
    let mut mcp = toml::Table::new();
    for (name, server) in servers {
        let mut entry = toml::Table::new();
        if let Some(command) = &server.command {
            entry.insert("command".into(), command.clone().into());
            entry.insert("args".into(), server.args.clone().into());
            let vars: toml::Table = server
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into()))
                .collect();
            entry.insert("env".into(), vars.into());
        } else if let Some(url) = &server.url {
            entry.insert("url".into(), url.clone().into());
            let headers: toml::Table = server
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into()))
                .collect();
            entry.insert("http_headers".into(), headers.into());
        }
        mcp.insert(name.clone(), entry.into());
    }
    if !mcp.is_empty() {
        config.insert("mcp_servers".into(), mcp.into());
    }
}

/// The session a preset's CLI reported in an earlier execution of the run.
fn saved_session(x: &Execution<'_>) -> Option<String> {
    let (dir, name) = split(&x.session_path).ok()?;
    let bytes = safe_fs::Dir::open(dir)
        .ok()?
        .read(Path::new(name), Links::Allowed)
        .ok()??;
    let text = String::from_utf8(bytes).ok()?;
    let id = text.trim();
    observe::is_session_id(id).then(|| id.to_string())
}

/// The prompt a preset's CLI is given, and the session it continues: the run's prompt (a
/// skill-only run names its skill) in a new session; a follow-up in the session the CLI
/// reported; or, when no session is known (the CLI never reported one), the task and the
/// follow-up together in a new session, so the agent still has both.
/// The base prompt a preset's CLI gets for `job` in `workspace`: the report protocol, the
/// run's attachments, the run's own base prompt.
fn preset_base_prompt(job: &Assignment, workspace: &Path) -> String {
    let names: Vec<&str> = job
        .run
        .attachments
        .iter()
        .map(|a| a.file_name.as_str())
        .collect();
    let dir = super::attachments::dir(workspace);
    presets::base_prompt(
        job.run.config.base_prompt.as_deref().unwrap_or(""),
        &presets::attachments_prompt(&dir.display().to_string(), &names),
    )
}

fn prompt_values(
    job: &Assignment,
    workspace: &Path,
    session: Option<String>,
) -> (String, Option<String>) {
    let run = &job.run;
    let prompt = if run.prompt.trim().is_empty() {
        format!(
            "Run the skill {}.",
            run.config.skill_spec.as_deref().unwrap_or("")
        )
    } else {
        run.prompt.clone()
    };
    match (&job.resumed_by, session) {
        // A command agent reads its follow-up from RUNLEDGER_FOLLOWUP; its argv is the run's.
        _ if !job.environment.harness.is_preset() => (prompt, None),
        (Some(f), Some(id)) => (f.message.clone(), Some(id)),
        (Some(f), None) => {
            // One argument may hold at most 128 KiB (Linux's MAX_ARG_STRLEN): a task and a
            // follow-up of the largest sizes would not fit, so the task gives way.
            // Codex and Gemini CLI get the base prompt in the same argument.
            let base = match job.environment.harness {
                Harness::Codex | Harness::Gemini => preset_base_prompt(job, workspace).len(),
                _ => 0,
            };
            let room = ARG_BYTES.saturating_sub(f.message.len() + base + 64);
            let task = if prompt.len() > room {
                let mut end = room;
                while !prompt.is_char_boundary(end) {
                    end -= 1;
                }
                format!("{}…", &prompt[..end])
            } else {
                prompt
            };
            (format!("{task}\n\nFollow-up: {}", f.message), None)
        }
        (None, _) => (prompt, None),
    }
}

/// One execution, once prepared: where it works and what its processes get.
struct Execution<'a> {
    job: &'a Assignment,
    sup: &'a Supervision,
    launcher: &'a dyn Launcher,
    /// On Slurm: the launcher of the execution's job steps, used instead of `launcher`.
    steps: Option<super::slurm::StepLauncher>,
    marker: Marker,
    writer: Writer,
    redactor: Redactor,
    workspace: PathBuf,
    home: PathBuf,
    mcp_path: PathBuf,
    /// The execution's `RUNLEDGER_REPORT` file.
    report_path: PathBuf,
    reports: Option<Reports>,
    /// Where the artifacts the agent reported are handed.
    artifacts: Artifacts,
    setup_done: PathBuf,
    /// Where the session id a preset's CLI reported is kept across executions and restarts.
    session_path: PathBuf,
    needs_setup: bool,
    vars: BTreeMap<String, String>,
    deadline: tokio::time::Instant,
    control: mpsc::UnboundedReceiver<Control>,
    /// Follow-ups not yet handed to the agent, oldest first.
    pending: Vec<Followup>,
    /// Where the agent's taking of follow-ups is reported.
    deliveries: Deliveries,
    /// Follow-ups written to Claude Code's input that it had not taken when it ended.
    unconfirmed: u32,
    /// The execution's cgroup, when its environment sets limits or the host accounts CPU.
    leaf: Option<Leaf>,
    /// What the CLI's turns of this execution reported, added up.
    usage: observe::Usage,
}

impl Execution<'_> {
    /// What starts the execution's processes: its job steps on Slurm, else the sandbox.
    fn launcher(&self) -> &dyn Launcher {
        match &self.steps {
            Some(steps) => steps,
            None => self.launcher,
        }
    }

    fn system(&mut self, text: String) {
        let _ = self.writer.append(&Entry {
            at: crate::clock::now(),
            execution: self.job.execution,
            stream: "system".into(),
            text,
            continued: false,
        });
    }

    /// How a failure is recorded: a limit the execution hit is named first, and the message
    /// (which may quote the agent's stderr, and goes to the event log) is redacted like the
    /// transcript.
    fn failed(&self, mut message: StatusMessage) -> StatusMessage {
        if let Some(limit) = self.leaf.as_ref().and_then(Leaf::exceeded) {
            message.message = format!("{limit}; {}", message.message);
        }
        message.message = self.redactor.apply(&message.message).into_owned();
        message
    }
}

/// Runs one execution of a command-harness agent: prepare, setup, start, supervise, finish.
/// Returns its outcome and what it used (`None` when nothing is known).
pub(super) async fn run(
    job: &Assignment,
    sup: &Supervision,
    control: mpsc::UnboundedReceiver<Control>,
    deliveries: Deliveries,
    artifacts: Artifacts,
) -> (Outcome, Option<ExecutionUsage>) {
    // Everything of the run is its user's, made from here on.
    let sup = &match sup.for_run(job.run.id).await {
        Ok(sup) => sup,
        Err(message) => return (Some(Err(no_agent_user(message))), None),
    };
    let mut x = match prepare(job, sup, control, deliveries, artifacts) {
        Ok(x) => x,
        Err(message) => return (Some(Err(message)), None),
    };
    let outcome = execute(&mut x).await;
    if let Some(steps) = &x.steps {
        steps.clean();
    }
    // Every process of the execution has ended: what it appended last is read now, before
    // its usage and its end are reported.
    collect_reports(
        &mut x.reports,
        true,
        &mut x.writer,
        job.execution,
        &x.artifacts,
    )
    .await;
    if let (Some(Err(_)), Some(limit)) = (&outcome, x.leaf.as_ref().and_then(Leaf::exceeded)) {
        x.system(limit);
    }
    let outcome = outcome.map(|r| r.map_err(|m| x.failed(m)));
    // Every process of the execution has been stopped by now, so the cgroup's counter is the
    // whole tree's CPU time.
    let cpu = x.leaf.as_ref().and_then(Leaf::cpu_time);
    if let Some(leaf) = x.leaf.take() {
        leaf.remove().await;
    }
    let usage = super::usage::execution_usage(
        &x.usage,
        job.run.config.model_id.as_deref(),
        cpu,
        &sup.prices,
    );
    (outcome, usage)
}

/// How a run that cannot have a user of its own fails: before anything of it is made, with the
/// reason (the range is used up, or the store failed).
fn no_agent_user(message: String) -> StatusMessage {
    tracing::error!(%message, "a run cannot have an agent uid");
    StatusMessage {
        message: format!("no user to run the agent as: {message}"),
        error_code: Some("environment_setup_failed".into()),
        retryable: Some(false),
    }
}

/// Setup (until it has succeeded once), then the agent, to its end. A preset's CLI takes no
/// input during a turn, so follow-ups sent meanwhile are delivered as the next turn of the
/// same session as soon as the turn ends.
async fn execute(x: &mut Execution<'_>) -> Outcome {
    if x.needs_setup {
        match checkout(x).await {
            Ok(()) => {}
            Err(Some(message)) => return Some(Err(message)),
            Err(None) => return None,
        }
        if let Some(ended) = setup(x).await {
            return ended;
        }
    }
    // After setup, which starts from an empty workspace, and before the agent.
    let placed = super::attachments::place(
        &x.job.run,
        &x.workspace,
        &x.sup.content,
        x.sup.sandboxes.owner(),
    );
    match placed {
        Ok(names) if !names.is_empty() => x.system(format!(
            "attachments written to {}: {}",
            super::attachments::dir(&x.workspace).display(),
            names.join(", ")
        )),
        Ok(_) => {}
        Err(super::attachments::Error::Path(e)) => {
            return Some(Err(unsafe_path("cannot place the run's attachments", e)))
        }
        Err(e) => return Some(Err(internal(e.to_string()))),
    }
    let harness = x.job.environment.harness;
    if harness.is_preset() {
        let (_, unusable) = usable_mcp(x.job);
        for name in unusable {
            x.system(format!(
                "MCP server {name:?} is left out: it names a server by warp_id, which the {} CLI \
                 cannot reach (give it a command or a url)",
                harness_name(harness)
            ));
        }
        if let Err(e) = write_cli_config(x) {
            return Some(Err(unsafe_path(
                "cannot write the CLI's configuration in the run's home",
                e,
            )));
        }
    }
    let mut next_turn: Option<String> = None;
    loop {
        let (process, program, takes_stdin) = match start(x, next_turn.take()).await {
            Ok(started) => started,
            Err(message) => return Some(Err(message)),
        };
        let ended = settle(x, process, Keep::Nothing).await;
        let outcome = finish(x, ended);
        let resumable = harness.is_preset() && saved_session(x).is_some();
        if matches!(outcome, Some(Ok(()))) && resumable && !x.pending.is_empty() {
            // One turn per follow-up: each fits one argument, and the transcript shows when
            // each was delivered.
            let followup = x.pending.remove(0);
            x.system(format!(
                "the follow-up sent during the turn is delivered now, as the next turn: {}",
                observe::clip(&observe::one_line(&followup.message))
            ));
            next_turn = Some(followup.message);
            continue;
        }
        // A stopped execution (a cancel) ends the run; nothing is queued again.
        let missed = x.pending.len() + x.unconfirmed as usize;
        if outcome.is_some() && missed > 0 {
            let how = if takes_stdin {
                "on stdin"
            } else {
                "as a next turn"
            };
            let note = format!(
                "{missed} follow-up(s) did not reach the {program} agent {how}; the run is \
                 queued again for them"
            );
            x.system(note);
        }
        return outcome;
    }
}

fn harness_name(harness: Harness) -> &'static str {
    match harness {
        Harness::Claude => "claude",
        Harness::Codex => "codex",
        Harness::Gemini => "gemini",
        Harness::Command => "command",
        Harness::Demo => "demo",
    }
}

/// The workspace (fresh until setup has succeeded once), the agent's home, the MCP file, and
/// the variables; everything handed to the agent user.
fn prepare<'a>(
    job: &'a Assignment,
    sup: &'a Supervision,
    control: mpsc::UnboundedReceiver<Control>,
    deliveries: Deliveries,
    artifacts: Artifacts,
) -> Result<Execution<'a>, StatusMessage> {
    let env = &job.environment;
    let id = job.run.id;
    let launcher = sup.sandboxes.launcher(env.sandbox).ok_or_else(|| {
        internal(format!(
            "the sandbox of environment {:?} was not prepared at start-up",
            env.id
        ))
    })?;
    let mcp = mcp_credentials(job);
    let redactor = Redactor::new(
        env.secrets
            .iter()
            .filter_map(|name| {
                sup.secrets
                    .get(name)
                    .map(|s| (name.as_str(), s.value.expose()))
            })
            .chain(mcp.iter().map(|(name, value)| (name.as_str(), *value))),
    );
    let writer = sup
        .transcripts
        .writer(id)
        .map_err(|e| internal(format!("cannot open the run's transcript: {e}")))?
        .redacting(redactor.clone());
    let workspace_root = env
        .workspace_root
        .clone()
        .unwrap_or_else(|| sup.data_dir.join("workspaces"));
    let workspace = workspace_root.join(id.to_string());
    // On Slurm the agent's own files are read and written on its node: they live beside the
    // workspaces, on the filesystem the server and the nodes share.
    let files: PathBuf = match &job.allocation {
        Some(_) => workspace_root.join(SHARED_FILES).join(id.to_string()),
        None => sup.data_dir.join("agent-files").join(id.to_string()),
    };
    let setup_done = files.join("setup.done");
    let home = files.join("home");
    // A workspace whose setup never completed (it failed, or the server died during it) is
    // started over: setup runs in a fresh, empty directory every time until it succeeds.
    let needs_setup = !setup_done.exists();
    let owner = sup.sandboxes.owner();
    // A run whose files another user owns (it ran as the one agent user of an earlier version,
    // or before `agent_user` changed) gets them back, all of them, as its own user's. The look
    // does not follow a link: what it reads is the entry itself.
    let inherited = sup.sandboxes.agent_user().is_some_and(|user| {
        use std::os::unix::fs::MetadataExt;
        [&workspace, &home]
            .iter()
            .any(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.uid() != user.uid))
    });
    // `files` and the workspace root are the server's; the workspace and the home are the
    // agent's, reached through descriptors from there (`safe_fs`).
    let prepared = private_dir(&files)
        .map_err(|source| safe_fs::Error::Io {
            path: files.clone(),
            source,
        })
        .and_then(|()| {
            if needs_setup {
                // std's remove_dir_all unlinks links and never follows one (openat/unlinkat).
                match std::fs::remove_dir_all(&workspace) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(safe_fs::Error::Io {
                            path: workspace.clone(),
                            source: e,
                        })
                    }
                    _ => {}
                }
            }
            std::fs::create_dir_all(&workspace).map_err(|source| safe_fs::Error::Io {
                path: workspace.clone(),
                source,
            })?;
            // A fresh workspace stays the server's until `checkout` has filled it and handed
            // it over whole: no agent process can plant anything where git writes as root.
            if !needs_setup {
                safe_fs::Dir::open(&workspace)?.set_owner(owner)?;
            }
            // The agent's HOME lives as long as the run, so a CLI that keeps its session there
            // (claude's --resume) finds it again in the next execution.
            let agent_files = safe_fs::Dir::open(&files)?;
            agent_files.make_dir("home", 0o700)?.set_owner(owner)?;
            if inherited {
                // A fresh workspace is handed over by `checkout`, after git is done.
                if !needs_setup {
                    sup.sandboxes.hand_over_tree(&workspace)?;
                }
                sup.sandboxes.hand_over_tree(&home)?;
            }
            if owner.is_some() {
                // An unconfined agent of another user reaches its home and MCP file by their
                // paths, without listing the directory (in a sandbox they are mounted for it).
                agent_files.set_mode(0o711)?;
            }
            Ok(())
        });
    if let Err(e) = prepared {
        return Err(unsafe_path(
            &format!("cannot prepare the workspace {}", workspace.display()),
            e,
        ));
    }
    let mcp_path = files.join("mcp.json");
    let mcp = mcp_json(job);
    if let Err(e) = write_private(&mcp_path, mcp.to_string().as_bytes(), owner) {
        return Err(unsafe_path("cannot write the MCP config", e));
    }
    // One file per execution, so an execution never reads what an earlier one reported.
    let report_path = files.join(format!("report-{}.jsonl", job.execution));
    let reports = Reports::create(
        report_path.clone(),
        workspace.clone(),
        sup.artifact_limits,
        sup.content.clone(),
        &job.run.artifacts,
        owner,
    )
    .map(|r| r.redacting(redactor.clone()));
    let reports = match reports {
        Ok(r) => r,
        Err(e) => return Err(unsafe_path("cannot create the report file", e)),
    };
    let mut vars = variables(job, sup, &mcp_path, &home, &workspace, &report_path);
    let marker = Marker {
        instance: sup.instance.clone(),
        execution: Some((id.to_string(), job.execution)),
    };
    let (leaf, steps) = match &job.allocation {
        // Slurm limits the job itself, on its node.
        Some(allocation) => {
            let bwrap = sup.sandboxes.node_bubblewrap().cloned().ok_or_else(|| {
                internal(format!(
                    "environment {:?} runs on Slurm, whose steps run in bubblewrap, which was \
                     not prepared at start-up",
                    env.id
                ))
            })?;
            // The markers go with the local `srun` (the server's stop and orphan scan find
            // it); processes on a node are Slurm's to stop, so the agent does not carry the
            // instance's.
            let markers = [INSTANCE_VAR, RUN_VAR, EXECUTION_VAR]
                .into_iter()
                .filter_map(|k| vars.get(k).map(|v| (k.to_string(), v.clone())))
                .collect::<BTreeMap<_, _>>();
            vars.remove(INSTANCE_VAR);
            let steps = super::slurm::StepLauncher::new(
                bwrap,
                allocation.clone(),
                files.clone(),
                env,
                markers,
            );
            (None, Some(steps))
        }
        None => {
            let leaf = sup
                .cgroups
                .create(env, &format!("{id}-{}", job.execution))
                .map_err(|e| internal(format!("cannot create the execution's cgroup: {e}")))?;
            (leaf, None)
        }
    };
    Ok(Execution {
        job,
        sup,
        launcher,
        steps,
        marker,
        writer,
        redactor,
        workspace,
        home,
        mcp_path,
        report_path,
        reports: Some(reports),
        artifacts,
        setup_done,
        session_path: files.join("session"),
        needs_setup,
        vars,
        deadline: tokio::time::Instant::now() + Duration::from_secs(env.max_runtime_secs),
        control,
        pending: job.followups.clone(),
        deliveries,
        unconfirmed: 0,
        leaf,
        usage: observe::Usage::default(),
    })
}

/// A started process of the execution.
struct Process {
    child: Child,
    group: Option<i32>,
    output: Output,
    stdin: Option<ChildStdin>,
    /// Claude Code's streaming input, for the claude preset.
    stream: Option<StreamInput>,
}

impl Process {
    fn spawn(mut cmd: Command, observer: Option<Observer>) -> std::io::Result<Process> {
        let mut child = cmd.spawn()?;
        let group = child.id().map(|p| p as i32);
        let stdin = child.stdin.take();
        let output = Output::start(&mut child, observer);
        Ok(Process {
            child,
            group,
            output,
            stdin,
            stream: None,
        })
    }
}

/// What of a process tree outlives it.
#[derive(PartialEq, Eq)]
enum Keep {
    /// What a successful setup command leaves running (a database, say) is for the agent.
    OnSuccess,
    Nothing,
}

/// The one place a process is waited for: supervises it to its end, closes its stdin, stops
/// what it leaves (the whole execution's tree, unless `keep` says otherwise) while draining the
/// rest of its output.
async fn settle(
    x: &mut Execution<'_>,
    mut process: Process,
    keep: Keep,
) -> (std::io::Result<Ended>, Output) {
    let mut watch = Watch {
        job: x.job,
        writer: &mut x.writer,
        control: &mut x.control,
        pending: &mut x.pending,
        deliveries: &x.deliveries,
        reports: &mut x.reports,
        artifacts: &x.artifacts,
        session_path: &x.session_path,
        deadline: x.deadline,
    };
    let ended = supervise(
        &mut process.child,
        &mut process.output,
        &mut process.stdin,
        &mut process.stream,
        &mut watch,
    )
    .await;
    drop(process.stdin.take());
    x.unconfirmed = process.stream.as_ref().map_or(0, StreamInput::unconfirmed);
    let succeeded = matches!(&ended, Ok(Ended::Exited(status)) if status.success());
    if succeeded && keep == Keep::OnSuccess {
        let _ = process.output.drain(&mut x.writer, x.job.execution).await;
    } else {
        // Whatever the process left behind (background children) goes with it; its output is
        // drained meanwhile, so a tree that prints while shutting down is not blocked on the
        // pipe.
        let stop = async {
            // On Slurm the tree is on the node: Slurm stops the job's steps (srun then ends
            // with them), and what is left of the local srun is stopped after.
            if let Some(steps) = &x.steps {
                let job = steps.allocation.job_id;
                x.sup.cluster.stop_steps(job, x.sup.grace).await;
            }
            process::stop_tree(process.group, &x.marker, x.sup.grace).await;
        };
        let _ = tokio::join!(stop, process.output.drain(&mut x.writer, x.job.execution));
    }
    (ended, process.output)
}

/// Fills the fresh workspace with the environment's repositories (outer paths first, so a
/// repository can be checked out inside another), and hands them to the agent user. A cancel
/// meanwhile stops git at once (`Err(None)`); follow-ups wait for the agent.
async fn checkout(x: &mut Execution<'_>) -> Result<(), Option<StatusMessage>> {
    let mut repos: Vec<&crate::config::Repo> = x.job.environment.repos.iter().collect();
    repos.sort_by_key(|r| {
        r.path
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .count()
    });
    let count = repos.len();
    for (i, repo) in repos.into_iter().enumerate() {
        let wanted = repo.reference.as_deref().unwrap_or("default branch");
        x.system(format!(
            "repository {}/{count}: {} ({wanted}) at {}",
            i + 1,
            repo.url,
            repo.path.display()
        ));
        let started = std::time::Instant::now();
        let (sup, workspace) = (x.sup, x.workspace.clone());
        let checking_out = sup.mirrors.checkout(repo, &workspace, x.deadline);
        tokio::pin!(checking_out);
        let checked_out = loop {
            tokio::select! {
                result = &mut checking_out => break result,
                message = x.control.recv() => match message {
                    Some(Control::Followup(f)) => {
                        let _ = x.writer.append(&Entry {
                            at: crate::clock::now(),
                            execution: x.job.execution,
                            stream: "followup".into(),
                            text: format!("({}) {}", f.mode.as_str(), f.message),
                            continued: false,
                        });
                        x.pending.push(f);
                    }
                    // Dropping the checkout kills git (`kill_on_drop`).
                    Some(Control::Stop) | None => {
                        x.system("stopped".into());
                        return Err(None);
                    }
                },
            }
        };
        if let Err(failure) = checked_out {
            x.system(failure.message.clone());
            return Err(Some(StatusMessage {
                message: failure.message,
                error_code: Some("environment_setup_failed".into()),
                retryable: Some(failure.retryable),
            }));
        }
        x.system(format!(
            "repository {}/{count} checked out in {} ms",
            i + 1,
            started.elapsed().as_millis()
        ));
    }
    // The fresh workspace was the server's while git filled it; now it is the agent's whole.
    if x.sup.sandboxes.agent_user().is_some() {
        let root = x.workspace.clone();
        let sandboxes = x.sup.sandboxes.clone();
        let handed = tokio::task::spawn_blocking(move || sandboxes.hand_over_tree(&root)).await;
        let what = "cannot hand the workspace and its repositories to the agent user";
        match handed {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Some(unsafe_path(what, e))),
            Err(e) => return Err(Some(internal(format!("{what}: {e}")))),
        }
    }
    Ok(())
}

/// Runs the environment's setup commands in order; `Some` ends the execution there.
async fn setup(x: &mut Execution<'_>) -> Option<Outcome> {
    let env = &x.job.environment;
    for (i, line) in env.setup.iter().enumerate() {
        x.system(format!("setup {}/{}: {line}", i + 1, env.setup.len()));
        let mut cmd = command(x, "sh", &["-c".into(), line.clone()], false);
        cmd.stdin(Stdio::null());
        let process = match Process::spawn(cmd, None) {
            Ok(p) => p,
            Err(e) => {
                process::stop_tree(None, &x.marker, x.sup.grace).await;
                return Some(Some(Err(internal(format!(
                    "cannot start setup command {}: {e}",
                    i + 1
                )))));
            }
        };
        let (ended, output) = settle(x, process, Keep::OnSuccess).await;
        match ended {
            Ok(Ended::Exited(status)) if status.success() => {}
            Ok(Ended::Exited(status)) => {
                let what = format!("setup command {} ({line})", i + 1);
                return Some(Some(Err(failure(
                    &what,
                    status,
                    &output.tail(),
                    Some("environment_setup_failed"),
                ))));
            }
            Ok(Ended::Stopped) => {
                x.system("stopped".into());
                return Some(None);
            }
            Ok(Ended::TimedOut) => return Some(Some(Err(timed_out(env.max_runtime_secs)))),
            Err(e) => {
                return Some(Some(Err(io_failure(
                    &format!("lost track of setup command {}", i + 1),
                    &e,
                ))))
            }
        }
    }
    if let Err(e) = write_private(&x.setup_done, b"", None) {
        return Some(Some(Err(unsafe_path(
            "cannot record that setup completed",
            e,
        ))));
    }
    None
}

/// Starts the agent and hands it the follow-ups that waited for it. `next_turn`: the text of
/// follow-ups a preset's CLI is given as the next turn of its session. Returns the process,
/// its program, and whether it takes follow-ups on stdin.
async fn start(
    x: &mut Execution<'_>,
    next_turn: Option<String>,
) -> Result<(Process, String, bool), StatusMessage> {
    let env = &x.job.environment;
    let saved = if env.harness.is_preset() {
        saved_session(x)
    } else {
        None
    };
    let delivering = next_turn.is_some();
    let (prompt, session) = match next_turn {
        Some(text) => (text, saved),
        None => prompt_values(x.job, &x.workspace, saved),
    };
    let model = x.job.run.config.model_id.clone().unwrap_or_default();
    let values = Values {
        prompt,
        // The built-in demo agent's model name means nothing to a CLI (runs created before
        // presets stopped defaulting to it may still carry it).
        model_id: if env.harness.is_preset() && model == "demo" {
            String::new()
        } else {
            model
        },
        // A preset's CLI learns the report protocol from its base prompt; a command agent
        // reads it in the documentation.
        base_prompt: if env.harness.is_preset() {
            preset_base_prompt(x.job, &x.workspace)
        } else {
            x.job.run.config.base_prompt.clone().unwrap_or_default()
        },
        mcp_config: x.mcp_path.display().to_string(),
        workspace: x.workspace.display().to_string(),
    };
    let turn = presets::Turn {
        session: session.as_deref(),
        permissions: env.agent_permissions,
        contained: env.sandbox == Some(Sandbox::Bwrap),
    };
    let argv = presets::argv(env.harness, &env.command, &values, &turn);
    let prompt_text = values.prompt;
    let Some((program, args)) = argv.split_first() else {
        return Err(internal("the environment has no command to run".into()));
    };
    if let Some(id) = &session {
        x.system(format!("resuming the CLI's session {id}"));
    }
    let place = match &x.steps {
        Some(steps) => format!(" ({})", steps.allocation.placement()),
        None => String::new(),
    };
    x.system(format!(
        "execution {} starts{place}: {program}",
        x.job.execution
    ));
    // Inside a sandbox a missing program would only show as the launcher's failure; looked
    // up here, it is a setup failure that says so, whatever the launcher.
    if !findable(
        program,
        &x.workspace,
        x.vars.get("PATH").map(String::as_str),
    ) {
        process::stop_tree(None, &x.marker, x.sup.grace).await;
        return Err(StatusMessage {
            message: format!(
                "cannot start the agent {program:?}: no such program (searched the agent's PATH)"
            ),
            error_code: Some("environment_setup_failed".into()),
            retryable: Some(false),
        });
    }
    let read_only = presets::read_only_workspace(env.harness, &turn);
    let mut cmd = command(x, program, args, read_only);
    // The command harness takes follow-ups on stdin, and so does Claude Code with streaming
    // input (its prompt too). Codex and Gemini CLI read a piped stdin as part of their prompt
    // and wait for it to close, so theirs is empty.
    let takes_stdin = matches!(env.harness, Harness::Command | Harness::Claude);
    cmd.stdin(if takes_stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let observer = env.harness.is_preset().then(|| {
        let observer = Observer::new(env.harness).redacting(x.redactor.clone());
        match env.agent_permissions {
            AgentPermissions::ReadOnly => observer.read_only(),
            AgentPermissions::Edit => observer,
        }
    });
    let mut process = match Process::spawn(cmd, observer) {
        Ok(p) => p,
        Err(e) => {
            // Whatever setup left running is of no use without the agent.
            process::stop_tree(None, &x.marker, x.sup.grace).await;
            return Err(StatusMessage {
                message: format!("cannot start the agent {program:?}: {e}"),
                error_code: Some("environment_setup_failed".into()),
                retryable: Some(false),
            });
        }
    };
    if delivering {
        // The follow-up this turn was started for.
        x.deliveries.took(1);
    }
    feed_stdin(x, &mut process, env.harness, &prompt_text, takes_stdin).await;
    Ok((process, program.clone(), takes_stdin))
}

/// Writes what the agent reads on its stdin at its start: Claude Code's prompt as a
/// stream-json message, then (for Claude Code and the command harness) the follow-ups owed to
/// the execution.
async fn feed_stdin(
    x: &mut Execution<'_>,
    process: &mut Process,
    harness: Harness,
    prompt_text: &str,
    takes_stdin: bool,
) {
    if harness == Harness::Claude {
        let mut stream = StreamInput::default();
        if write_line(&mut process.stdin, &presets::claude_message(prompt_text)).await {
            stream.written = 1;
        }
        process.stream = Some(stream);
    }
    if takes_stdin {
        // In order; once one cannot be written, it and the rest wait for the next execution.
        let mut taken = 0;
        while let Some(f) = x.pending.first() {
            if !write_line(&mut process.stdin, &followup_line(harness, f)).await {
                break;
            }
            x.pending.remove(0);
            match process.stream.as_mut() {
                Some(st) => st.written += 1,
                None => taken += 1,
            }
        }
        x.deliveries.took(taken);
    }
}

/// Whether `program` names an executable file, directly (relative to the workspace) or on
/// `path`.
fn findable(program: &str, workspace: &Path, path: Option<&str>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(&workspace.join(program));
    }
    std::env::split_paths(path.unwrap_or_default()).any(|dir| executable(&dir.join(program)))
}

/// The outcome of the agent's end, also written to the transcript. A preset's outcome is what
/// its CLI reported (an exit 0 with denied tools or an error result fails), and the session
/// id it reported is kept for the next execution.
fn finish(x: &mut Execution<'_>, (ended, output): (std::io::Result<Ended>, Output)) -> Outcome {
    if let Some(observer) = &output.observer {
        x.usage.absorb(observer.usage());
    }
    if let Some(id) = output.observer.as_ref().and_then(Observer::session) {
        if saved_session(x).as_deref() != Some(id) {
            if let Err(e) = write_private(&x.session_path, id.as_bytes(), None) {
                x.system(format!("cannot keep the CLI's session id {id}: {e}"));
            }
        }
    }
    match ended {
        Ok(Ended::Exited(status)) => {
            let verdict = match &output.observer {
                Some(observer) => observer.verdict(status.code(), &describe(status)),
                None if status.success() => Ok(()),
                None => Err(failure("the agent", status, &output.tail(), None)),
            };
            match verdict {
                Ok(()) => {
                    x.system("the agent exited successfully".into());
                    Some(Ok(()))
                }
                Err(outcome) => {
                    x.system(outcome.message.clone());
                    Some(Err(outcome))
                }
            }
        }
        Ok(Ended::Stopped) => {
            x.system("stopped".into());
            None
        }
        Ok(Ended::TimedOut) => {
            let outcome = timed_out(x.job.environment.max_runtime_secs);
            x.system(outcome.message.clone());
            Some(Err(outcome))
        }
        Err(e) => Some(Err(io_failure("the agent was stopped", &e))),
    }
}

/// A failure of the service's own I/O during an execution (the transcript, the workspace):
/// a full or read-only data directory is said in words, so the run's status names it.
/// A failure of `safe_fs`: a path the agent made unsafe fails the run naming it (the agent's
/// doing, not the server's: trying again would meet it again); anything else is `internal`.
fn unsafe_path(what: &str, e: safe_fs::Error) -> StatusMessage {
    match e {
        refused @ safe_fs::Error::Refused { .. } => StatusMessage {
            message: format!("{what}: {refused}"),
            error_code: Some("environment_setup_failed".into()),
            retryable: Some(false),
        },
        safe_fs::Error::Io { path, source } => {
            io_failure(&format!("{what} ({})", path.display()), &source)
        }
    }
}

fn io_failure(what: &str, e: &std::io::Error) -> StatusMessage {
    use crate::store::health::Cause;
    match Cause::of_io(e) {
        cause @ (Cause::NoSpace | Cause::ReadOnly) => internal(format!(
            "{}: the service could not write the run's transcript or workspace; {what}",
            cause.words()
        )),
        Cause::Io => internal(format!("{what}: {e}")),
    }
}

fn timed_out(limit: u64) -> StatusMessage {
    StatusMessage {
        message: format!("the run exceeded its environment's max_runtime_secs ({limit} s); its processes were stopped"),
        error_code: None,
        retryable: Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` through the transcript's splitter in reads of `read` bytes and returns the
    /// lines `Line` hands on.
    fn lines_of(bytes: &[u8], read: usize) -> Vec<String> {
        let mut splitter = Splitter::default();
        let mut line = Line::default();
        let mut pieces = Vec::new();
        let mut out = Vec::new();
        for chunk in bytes.chunks(read) {
            splitter.push(chunk, &mut pieces);
        }
        pieces.extend(splitter.finish());
        for piece in &pieces {
            line.feed(piece, |l| out.push(l.to_string()));
        }
        out
    }

    /// Claude Code's streaming input ends once a turn ended with every message written taken,
    /// or in an error; a message written after the turn's echoes keeps it open for the next.
    #[test]
    fn claude_input_ends_when_a_turn_ended_with_everything_taken() {
        let mut observer = Observer::new(Harness::Claude);
        let mut input = StreamInput {
            written: 2,
            ..StreamInput::default()
        };
        let echo = r#"{"type":"user","isReplay":true,"message":{"role":"user","content":"x"}}"#;
        let ok = r#"{"type":"result","subtype":"success","is_error":false,"result":"ok"}"#;
        let failed = r#"{"type":"result","subtype":"error","is_error":true,"result":"no"}"#;
        let _ = observer.stdout_line(echo);
        assert_eq!(input.observe(&observer), (0, false), "the prompt taken");
        let _ = observer.stdout_line(ok);
        assert_eq!(
            input.observe(&observer),
            (0, false),
            "a follow-up not yet taken"
        );
        assert_eq!(input.unconfirmed(), 1);
        let _ = observer.stdout_line(echo);
        assert_eq!(input.observe(&observer), (1, false), "the follow-up taken");
        let _ = observer.stdout_line(ok);
        assert_eq!(
            input.observe(&observer),
            (0, true),
            "everything taken, turn over"
        );
        assert_eq!(input.unconfirmed(), 0);
        // A failed turn ends the input even with a message not taken.
        input.written += 1;
        let _ = observer.stdout_line(failed);
        assert_eq!(input.observe(&observer), (0, true));
        assert_eq!(input.unconfirmed(), 1);
    }

    #[test]
    fn long_json_lines_reach_the_observer_whole_whatever_the_reads() {
        // A final result far longer than one transcript entry, between two short lines.
        let long = format!(
            r#"{{"type":"result","is_error":true,"result":"{}","session_id":"s-1"}}"#,
            "é".repeat(60_000)
        );
        let text = format!("{{\"type\":\"init\"}}\n{long}\nlast");
        for read in [1, 7, 4096, 100_000] {
            let lines = lines_of(text.as_bytes(), read);
            assert_eq!(lines.len(), 3, "read {read}");
            assert_eq!(lines[1], long, "read {read}");
            assert_eq!(lines[2], "last");
            let mut observer = Observer::new(Harness::Claude);
            for l in &lines {
                let _ = observer.stdout_line(l);
            }
            assert_eq!(observer.session(), Some("s-1"));
        }
    }

    #[test]
    fn a_line_beyond_the_limit_is_skipped_and_the_next_one_is_whole() {
        let huge = "x".repeat(LINE_LIMIT + 10);
        let text = format!("{huge}\n{{\"type\":\"init\",\"session_id\":\"g-2\"}}\n");
        let lines = lines_of(text.as_bytes(), 65_536);
        assert_eq!(lines, [r#"{"type":"init","session_id":"g-2"}"#]);
    }
}
