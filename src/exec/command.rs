//! The `command` harness (and the presets built on it): runs an agent as a child process.
//!
//! One execution: make the run's workspace (fresh until the environment's `setup` commands
//! have succeeded once for the run), write the MCP config file, start the argv with the
//! `RUNLEDGER_*` variables, hand it follow-ups on stdin as JSON lines, and stream its stdout and
//! stderr to the transcript as they arrive. Memory is bounded whatever the agent prints: output
//! moves through fixed-size buffers and a bounded channel, so a fast writer is slowed to the
//! speed of the transcript file instead of filling memory. The exit status decides the outcome;
//! cancellation and `max_runtime_secs` stop the whole process tree.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::presets::{self, Values};
use super::process::{self, Marker, EXECUTION_VAR, INSTANCE_VAR, RUN_VAR};
use super::transcript::{Entry, Writer};
use super::{Assignment, Control, Supervision};
use crate::config::Harness;
use crate::domain::{Followup, StatusMessage};

const CHUNK: usize = 8 * 1024;
/// Lines of stderr kept for the failure message.
const STDERR_TAIL_LINES: usize = 8;
const STDERR_TAIL_LINE_CHARS: usize = 300;
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

/// The variables every process of the execution gets (setup commands included).
fn variables(job: &Assignment, mcp_config: &Path, instance: &str) -> BTreeMap<String, String> {
    let run = &job.run;
    let config = &run.config;
    let mut vars: BTreeMap<String, String> = job.environment.env.clone();
    let mut set = |k: &str, v: String| {
        vars.insert(k.to_string(), v);
    };
    set(RUN_VAR, run.id.to_string());
    set(INSTANCE_VAR, instance.to_string());
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
    set(EXECUTION_VAR, job.execution.to_string());
    set(
        "RUNLEDGER_FOLLOWUP",
        job.resumed_by
            .as_ref()
            .map(|f| f.message.clone())
            .unwrap_or_default(),
    );
    vars
}

/// `{"mcpServers": {...}}` in the shape agent CLIs read (stdio or http servers).
fn mcp_json(job: &Assignment) -> serde_json::Value {
    let servers: serde_json::Map<String, serde_json::Value> = job
        .run
        .config
        .mcp_servers
        .iter()
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

fn command(program: &str, args: &[String], cwd: &Path, vars: &BTreeMap<String, String>) -> Command {
    let mut cmd = Command::new(program);
    // The server's own RUNLEDGER_* settings (an admin key, say) are not the agent's business.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("RUNLEDGER_") {
            cmd.env_remove(name);
        }
    }
    cmd.args(args)
        .current_dir(cwd)
        .envs(vars)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so the whole tree can be signalled at once.
        .process_group(0)
        .kill_on_drop(false);
    cmd
}

/// Streams a child's output to the transcript, keeping the tail of stderr.
struct Output {
    rx: mpsc::Receiver<(&'static str, Vec<u8>)>,
    stderr_tail: VecDeque<String>,
    partial_stderr: String,
}

fn pump(
    stream: &'static str,
    mut reader: impl AsyncRead + Unpin + Send + 'static,
    tx: mpsc::Sender<(&'static str, Vec<u8>)>,
) {
    tokio::spawn(async move {
        let mut carry: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            carry.extend_from_slice(&buf[..n]);
            // Cut at the last newline so entries hold whole lines, unless a line outgrows the
            // chunk size (then it is cut where it stands).
            let cut = match carry.iter().rposition(|b| *b == b'\n') {
                Some(i) => i + 1,
                None if carry.len() >= CHUNK => carry.len(),
                None => continue,
            };
            let rest = carry.split_off(cut);
            let chunk = std::mem::replace(&mut carry, rest);
            if tx.send((stream, chunk)).await.is_err() {
                return;
            }
        }
        if !carry.is_empty() {
            let _ = tx.send((stream, carry)).await;
        }
    });
}

impl Output {
    fn start(child: &mut Child) -> Output {
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
            stderr_tail: VecDeque::new(),
            partial_stderr: String::new(),
        }
    }

    fn record(
        &mut self,
        writer: &mut Writer,
        execution: u32,
        stream: &'static str,
        bytes: Vec<u8>,
    ) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(&bytes);
        if stream == "stderr" {
            self.partial_stderr.push_str(&text);
            while let Some(i) = self.partial_stderr.find('\n') {
                let line: String = self.partial_stderr[..i]
                    .chars()
                    .take(STDERR_TAIL_LINE_CHARS)
                    .collect();
                self.partial_stderr.drain(..=i);
                if !line.trim().is_empty() {
                    self.stderr_tail.push_back(line);
                    if self.stderr_tail.len() > STDERR_TAIL_LINES {
                        self.stderr_tail.pop_front();
                    }
                }
            }
            if self.partial_stderr.len() > STDERR_TAIL_LINE_CHARS * 4 {
                self.partial_stderr.clear();
            }
        }
        let text = text.strip_suffix('\n').unwrap_or(&text).to_string();
        writer.append(&Entry {
            at: crate::actor::now(),
            execution,
            stream: stream.into(),
            text,
        })
    }

    /// Drains what is left after the process exited (bounded in time: a background child may
    /// keep the pipe open until the tree is stopped).
    async fn drain(&mut self, writer: &mut Writer, execution: u32) -> std::io::Result<()> {
        let deadline = tokio::time::sleep(Duration::from_secs(2));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                item = self.rx.recv() => match item {
                    Some((stream, bytes)) => self.record(writer, execution, stream, bytes)?,
                    None => return Ok(()),
                },
                _ = &mut deadline => return Ok(()),
            }
        }
    }

    fn tail(&self) -> String {
        let mut lines: Vec<&str> = self.stderr_tail.iter().map(String::as_str).collect();
        if !self.partial_stderr.trim().is_empty() {
            lines.push(self.partial_stderr.trim_end());
        }
        let skip = lines.len().saturating_sub(STDERR_TAIL_LINES);
        lines[skip..].join("\n")
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

async fn write_followup(stdin: &mut Option<ChildStdin>, followup: &Followup) {
    let Some(pipe) = stdin.as_mut() else { return };
    // Written by hand to keep the documented key order: type, message, mode.
    let message = serde_json::Value::String(followup.message.clone());
    let line = format!(
        "{{\"type\":\"followup\",\"message\":{message},\"mode\":\"{}\"}}\n",
        followup.mode.as_str()
    );
    // An agent that closed its stdin no longer takes follow-ups; that is not a failure. One
    // that never reads it would fill the pipe and block this write — and with it the whole
    // supervision loop (output, cancel, deadline) — so the write gets a time limit, after which
    // stdin is given up.
    let write = async {
        pipe.write_all(line.as_bytes()).await?;
        pipe.flush().await
    };
    match tokio::time::timeout(STDIN_WRITE_LIMIT, write).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) | Err(_) => *stdin = None,
    }
}

enum Ended {
    Exited(std::process::ExitStatus),
    Stopped,
    TimedOut,
}

/// What a child is supervised with: the run's transcript, its control channel, follow-ups not
/// yet handed over, and the execution's deadline.
struct Watch<'a> {
    job: &'a Assignment,
    writer: &'a mut Writer,
    control: &'a mut mpsc::UnboundedReceiver<Control>,
    pending: &'a mut Vec<Followup>,
    deadline: tokio::time::Instant,
}

/// Waits for a child while serving control messages and the deadline. Follow-ups go to
/// `stdin` when there is one, otherwise they wait in `pending`.
async fn supervise(
    child: &mut Child,
    output: &mut Output,
    stdin: &mut Option<ChildStdin>,
    w: &mut Watch<'_>,
) -> std::io::Result<Ended> {
    let (job, deadline) = (w.job, w.deadline);
    loop {
        tokio::select! {
            status = child.wait() => return Ok(Ended::Exited(status?)),
            Some((stream, bytes)) = output.rx.recv() => output.record(w.writer, job.execution, stream, bytes)?,
            message = w.control.recv() => match message {
                Some(Control::Followup(f)) => {
                    w.writer.append(&Entry {
                        at: crate::actor::now(),
                        execution: job.execution,
                        stream: "followup".into(),
                        text: format!("({}) {}", f.mode.as_str(), f.message),
                    })?;
                    if stdin.is_some() {
                        write_followup(stdin, &f).await;
                    } else {
                        w.pending.push(f);
                    }
                }
                Some(Control::Stop) | None => return Ok(Ended::Stopped),
            },
            _ = tokio::time::sleep_until(deadline) => return Ok(Ended::TimedOut),
        }
    }
}

/// Writes a file only this user can read (MCP configs can hold credentials).
fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?
        .write_all(contents)
}

fn private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

/// Adds our MCP servers to the workspace's `.gemini/settings.json`, keeping what a repository
/// already has there.
fn write_gemini_settings(workspace: &Path, mcp: &serde_json::Value) -> std::io::Result<()> {
    let dir = workspace.join(".gemini");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("settings.json");
    let mut settings = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    if let (Some(ours), Some(settings)) = (mcp["mcpServers"].as_object(), settings.as_object_mut())
    {
        let servers = settings
            .entry("mcpServers")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(servers) = servers.as_object_mut() {
            for (name, server) in ours {
                servers.insert(name.clone(), server.clone());
            }
        }
    }
    write_private(&path, settings.to_string().as_bytes())
}

/// The prompt an agent CLI is given: the run's prompt (a skill-only run names its skill), or,
/// for a resumed execution of a preset, the follow-up that resumed it.
fn prompt_values(job: &Assignment) -> (String, bool) {
    let run = &job.run;
    let prompt = if run.prompt.trim().is_empty() {
        format!(
            "Run the skill {}.",
            run.config.skill_spec.as_deref().unwrap_or("")
        )
    } else {
        run.prompt.clone()
    };
    match (&job.resumed_by, job.environment.harness) {
        (Some(f), Harness::Claude | Harness::Codex) => (f.message.clone(), true),
        (Some(f), Harness::Gemini) => (format!("{prompt}\n\nFollow-up: {}", f.message), false),
        _ => (prompt, false),
    }
}

/// Runs one execution of a command-harness agent.
pub(super) async fn run(
    job: &Assignment,
    sup: &Supervision,
    mut control: mpsc::UnboundedReceiver<Control>,
) -> Outcome {
    let env = &job.environment;
    let id = job.run.id;
    let marker = Marker {
        instance: sup.instance.clone(),
        execution: Some((id.to_string(), job.execution)),
    };
    let mut writer = match sup.transcripts.writer(id) {
        Ok(w) => w,
        Err(e) => {
            return Some(Err(internal(format!(
                "cannot open the run's transcript: {e}"
            ))))
        }
    };
    let system = |writer: &mut Writer, text: String| {
        let _ = writer.append(&Entry {
            at: crate::actor::now(),
            execution: job.execution,
            stream: "system".into(),
            text,
        });
    };
    let workspace_root = env
        .workspace_root
        .clone()
        .unwrap_or_else(|| sup.data_dir.join("workspaces"));
    let workspace = workspace_root.join(id.to_string());
    let files: PathBuf = sup.data_dir.join("agent-files").join(id.to_string());
    let setup_done = files.join("setup.done");
    // A workspace whose setup never completed (it failed, or the server died during it) is
    // started over: setup runs in a fresh, empty directory every time until it succeeds.
    let needs_setup = !setup_done.exists();
    let prepared = private_dir(&files).and_then(|()| {
        if needs_setup {
            match std::fs::remove_dir_all(&workspace) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        std::fs::create_dir_all(&workspace)
    });
    if let Err(e) = prepared {
        return Some(Err(io_failure(
            &format!("cannot prepare the workspace {}", workspace.display()),
            &e,
        )));
    }
    let mcp_path = files.join("mcp.json");
    let mcp = mcp_json(job);
    let written = write_private(&mcp_path, mcp.to_string().as_bytes()).and_then(|()| {
        if env.harness == Harness::Gemini {
            write_gemini_settings(&workspace, &mcp)?;
        }
        Ok(())
    });
    if let Err(e) = written {
        return Some(Err(internal(format!("cannot write the MCP config: {e}"))));
    }
    let vars = variables(job, &mcp_path, &sup.instance);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(env.max_runtime_secs);
    let mut pending: Vec<Followup> = job.followups.clone();
    let mut no_stdin = None;

    if needs_setup {
        for (i, line) in env.setup.iter().enumerate() {
            system(
                &mut writer,
                format!("setup {}/{}: {line}", i + 1, env.setup.len()),
            );
            let mut cmd = command("sh", &["-c".into(), line.clone()], &workspace, &vars);
            cmd.stdin(Stdio::null());
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => {
                    process::stop_tree(None, &marker, sup.grace).await;
                    return Some(Err(internal(format!(
                        "cannot start setup command {}: {e}",
                        i + 1
                    ))));
                }
            };
            let group = child.id().map(|p| p as i32);
            let mut output = Output::start(&mut child);
            let mut watch = Watch {
                job,
                writer: &mut writer,
                control: &mut control,
                pending: &mut pending,
                deadline,
            };
            let ended = supervise(&mut child, &mut output, &mut no_stdin, &mut watch).await;
            if matches!(&ended, Ok(Ended::Exited(status)) if status.success()) {
                // What a successful setup leaves running (a database, say) is for the agent.
                let _ = output.drain(&mut writer, job.execution).await;
            } else {
                // A failed or stopped setup takes everything of the execution with it.
                let _ = tokio::join!(
                    process::stop_tree(group, &marker, sup.grace),
                    output.drain(&mut writer, job.execution)
                );
            }
            match ended {
                Ok(Ended::Exited(status)) if status.success() => {}
                Ok(Ended::Exited(status)) => {
                    let what = format!("setup command {} ({line})", i + 1);
                    return Some(Err(failure(
                        &what,
                        status,
                        &output.tail(),
                        Some("environment_setup_failed"),
                    )));
                }
                Ok(Ended::Stopped) => {
                    system(&mut writer, "stopped".into());
                    return None;
                }
                Ok(Ended::TimedOut) => return Some(Err(timed_out(env.max_runtime_secs))),
                Err(e) => {
                    return Some(Err(internal(format!(
                        "lost track of setup command {}: {e}",
                        i + 1
                    ))))
                }
            }
        }
        if let Err(e) = write_private(&setup_done, b"") {
            return Some(Err(internal(format!(
                "cannot record that setup completed: {e}"
            ))));
        }
    }

    let (prompt, resumed) = prompt_values(job);
    let values = Values {
        prompt,
        model_id: job.run.config.model_id.clone().unwrap_or_default(),
        base_prompt: job.run.config.base_prompt.clone().unwrap_or_default(),
        mcp_config: mcp_path.display().to_string(),
        workspace: workspace.display().to_string(),
    };
    let argv = presets::argv(env.harness, &env.command, &values, resumed);
    let Some((program, args)) = argv.split_first() else {
        return Some(Err(internal(
            "the environment has no command to run".into(),
        )));
    };
    system(
        &mut writer,
        format!("execution {} starts: {program}", job.execution),
    );
    let mut cmd = command(program, args, &workspace, &vars);
    // The command harness takes follow-ups on stdin. The agent CLIs of the presets read a
    // piped stdin as part of their prompt and wait for it to close, so theirs is empty.
    let takes_stdin = env.harness == Harness::Command;
    cmd.stdin(if takes_stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            // Whatever setup left running is of no use without the agent.
            process::stop_tree(None, &marker, sup.grace).await;
            return Some(Err(StatusMessage {
                message: format!("cannot start the agent {program:?}: {e}"),
                error_code: Some("environment_setup_failed".into()),
                retryable: Some(false),
            }));
        }
    };
    let group = child.id().map(|p| p as i32);
    let mut stdin = child.stdin.take();
    let mut output = Output::start(&mut child);
    if takes_stdin {
        for f in std::mem::take(&mut pending) {
            write_followup(&mut stdin, &f).await;
        }
    }
    let mut watch = Watch {
        job,
        writer: &mut writer,
        control: &mut control,
        pending: &mut pending,
        deadline,
    };
    let ended = supervise(&mut child, &mut output, &mut stdin, &mut watch).await;
    drop(stdin);
    if !takes_stdin && !pending.is_empty() {
        system(
            &mut writer,
            format!(
                "{} follow-up(s) could not be handed to the {program} CLI while it ran; send a follow-up after the run ends to resume it",
                pending.len()
            ),
        );
    }
    // Whatever the agent left behind (background children) goes with it; its output is
    // drained meanwhile, so a tree that prints while shutting down is not blocked on the pipe.
    let _ = tokio::join!(
        process::stop_tree(group, &marker, sup.grace),
        output.drain(&mut writer, job.execution)
    );
    match ended {
        Ok(Ended::Exited(status)) if status.success() => {
            system(&mut writer, "the agent exited successfully".into());
            Some(Ok(()))
        }
        Ok(Ended::Exited(status)) => {
            let outcome = failure("the agent", status, &output.tail(), None);
            system(&mut writer, outcome.message.clone());
            Some(Err(outcome))
        }
        Ok(Ended::Stopped) => {
            system(&mut writer, "stopped".into());
            None
        }
        Ok(Ended::TimedOut) => {
            let outcome = timed_out(env.max_runtime_secs);
            system(&mut writer, outcome.message.clone());
            Some(Err(outcome))
        }
        Err(e) => Some(Err(io_failure("the agent was stopped", &e))),
    }
}

/// A failure of the service's own I/O during an execution (the transcript, the workspace):
/// a full or read-only data directory is said in words, so the run's status names it.
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
