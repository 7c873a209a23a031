//! Starts one process of the execution: the sandboxed command with the execution's variables,
//! the agent's argv and prompt (a preset's session resumed, a follow-up as a next turn, within
//! Linux's limit of one argument), and what it reads on stdin at its start. It does not wait
//! for the process: `supervise` does.

use std::path::Path;
use std::process::Stdio;

use tokio::process::Command;

use super::execution::Execution;
use super::files::saved_session;
use super::finish::internal;
use super::supervise::{followup_line, write_line, Process, StreamInput};
use crate::observe::Observer;
use crate::presets::{self, Values};
use crate::process;
use crate::sandbox::Plan;
use crate::Assignment;
use runledger_domain::harness::{AgentPermissions, Harness, Sandbox};
use runledger_domain::StatusMessage;

/// The most bytes a preset's prompt argument gets: below Linux's 128 KiB limit of one argument
/// (`MAX_ARG_STRLEN`), with room for an option name in front.
const ARG_BYTES: usize = 120 * 1024;

/// The command for one process of the execution, from its launcher. `read_only_workspace`: the
/// agent of a read-only preset run (`presets::read_only_workspace`); setup always writes.
pub(super) fn command(
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

/// The base prompt a preset's CLI gets for `job` in `workspace`: the report protocol, the
/// run's attachments, the run's own base prompt.
fn preset_base_prompt(job: &Assignment, workspace: &Path) -> String {
    let names: Vec<&str> = job
        .run
        .attachments
        .iter()
        .map(|a| a.file_name.as_str())
        .collect();
    let dir = crate::attachments::dir(workspace);
    presets::base_prompt(
        job.run.config.base_prompt.as_deref().unwrap_or(""),
        &presets::attachments_prompt(&dir.display().to_string(), &names),
    )
}

/// The prompt a preset's CLI is given, and the session it continues: the run's prompt (a
/// skill-only run names its skill) in a new session; a follow-up in the session the CLI
/// reported; or, when no session is known (the CLI never reported one), the task and the
/// follow-up together in a new session, so the agent still has both.
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

/// Starts the agent and hands it the follow-ups that waited for it. `next_turn`: the text of
/// follow-ups a preset's CLI is given as the next turn of its session. Returns the process,
/// its program, and whether it takes follow-ups on stdin.
pub(super) async fn start(
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
    let values = values(x, prompt);
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
    let observer = observer(x);
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

/// What a preset's argv is built from: the turn's prompt, the model, the base prompt and the
/// paths the agent is given.
fn values(x: &Execution<'_>, prompt: String) -> Values {
    let env = &x.job.environment;
    let model = x.job.run.config.model_id.clone().unwrap_or_default();
    Values {
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
    }
}

/// What reads a preset's output for its usage and its view of the run (`None`: the command
/// harness, whose output is only transcribed).
fn observer(x: &Execution<'_>) -> Option<Observer> {
    let env = &x.job.environment;
    env.harness.is_preset().then(|| {
        let observer = Observer::new(env.harness).redacting(x.redactor.clone());
        match env.agent_permissions {
            AgentPermissions::ReadOnly => observer.read_only(),
            AgentPermissions::Edit => observer,
        }
    })
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
pub(super) fn findable(program: &str, workspace: &Path, path: Option<&str>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(&workspace.join(program));
    }
    std::env::split_paths(path.unwrap_or_default()).any(|dir| executable(&dir.join(program)))
}
