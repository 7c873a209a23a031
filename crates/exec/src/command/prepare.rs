//! Prepares one execution: the run's workspace (fresh until setup has succeeded once), the
//! agent's home, the MCP file, the report file, the variables every process of the execution
//! gets, and its cgroup or Slurm step launcher. It starts no process; what it makes in a directory
//! the agent can write goes through `safe_fs` (or std's `remove_dir_all`, which never follows a
//! link).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;

use super::execution::Execution;
use super::files::write_private;
use super::finish::{internal, unsafe_path};
use super::fork::{self, fork_point};
use crate::observe;
use crate::process::{Marker, EXECUTION_VAR, INSTANCE_VAR, RUN_VAR};
use crate::report::{self, Reports};
use crate::run_files::SHARED_FILES;
use crate::safe_fs;
use crate::transcript::Redactor;
use crate::{Artifacts, Assignment, Control, Deliveries, Provenances, Supervision};
use runledger_domain::harness::{Harness, Sandbox};
use runledger_domain::StatusMessage;

/// The `PATH` of every agent whose environment sets none in its `env`.
pub const AGENT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

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
            crate::attachments::dir(workspace).display().to_string()
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
fn preset_variables(env: &runledger_config::Environment, home: &Path) -> BTreeMap<String, String> {
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

/// The workspace (fresh until setup has succeeded once), the agent's home, the MCP file, and
/// the variables; everything handed to the agent user.
pub(super) fn prepare<'a>(
    job: &'a Assignment,
    sup: &'a Supervision,
    control: mpsc::UnboundedReceiver<Control>,
    deliveries: Deliveries,
    artifacts: Artifacts,
    provenances: Provenances,
) -> Result<Execution<'a>, StatusMessage> {
    let env = &job.environment;
    let id = job.run.id;
    let launcher = sup.sandboxes.launcher(env.sandbox).ok_or_else(|| {
        internal(format!(
            "the sandbox of environment {:?} was not prepared at start-up",
            env.id
        ))
    })?;
    let redactor = redactor(job, sup);
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
    // A fork whose workspace is not ready yet starts from its original's snapshot.
    let fork = fork_point(job).filter(|_| needs_setup);
    if fork.is_some() {
        fork::clear_home(&files)?;
    }
    let owner = sup.sandboxes.owner();
    make_dirs(sup, &files, &workspace, &home, needs_setup)?;
    let session_path = files.join("session");
    if let Some((from, execution)) = &fork {
        let original_files = crate::run_files::run_files(env, &sup.data_dir, from);
        let start = fork::Start {
            workspace: &workspace,
            home: &home,
            session: &session_path,
            setup_done: &setup_done,
            original_files: &original_files,
            original_workspace: &workspace_root.join(from),
        };
        fork::restore(sup, *execution, &start)?;
    }
    let needs_setup = needs_setup && fork.is_none();
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
    let (leaf, steps) = confinement(job, sup, &mut vars, &files)?;
    let mut x = Execution {
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
        provenances,
        setup_done,
        session_path,
        needs_setup,
        vars,
        deadline: tokio::time::Instant::now() + Duration::from_secs(env.max_runtime_secs),
        control,
        pending: job.followups.clone(),
        deliveries,
        unconfirmed: 0,
        leaf,
        usage: observe::Usage::default(),
    };
    if let Some((from, execution)) = fork {
        x.system(format!(
            "the fork starts from the snapshot of execution {execution} of run {from}: its \
             workspace, home and CLI session as that execution left them"
        ));
    }
    Ok(x)
}

/// What the execution's output must never show: the environment's secrets and the run's MCP
/// credentials.
fn redactor(job: &Assignment, sup: &Supervision) -> Redactor {
    let env = &job.environment;
    let mcp = mcp_credentials(job);
    Redactor::new(
        env.secrets
            .iter()
            .filter_map(|name| {
                sup.secrets
                    .get(name)
                    .map(|s| (name.as_str(), s.value.expose()))
            })
            .chain(mcp.iter().map(|(name, value)| (name.as_str(), *value))),
    )
}

/// Makes the run's directories: its files directory (the server's), the workspace (emptied
/// first while setup has not succeeded) and the agent's home, handed to the agent user; a run
/// whose files another user owns gets them back.
fn make_dirs(
    sup: &Supervision,
    files: &Path,
    workspace: &Path,
    home: &Path,
    needs_setup: bool,
) -> Result<(), StatusMessage> {
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
    let prepared = private_dir(files)
        .map_err(|source| safe_fs::Error::Io {
            path: files.to_path_buf(),
            source,
        })
        .and_then(|()| {
            if needs_setup {
                // std's remove_dir_all unlinks links and never follows one (openat/unlinkat).
                match std::fs::remove_dir_all(workspace) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(safe_fs::Error::Io {
                            path: workspace.to_path_buf(),
                            source: e,
                        })
                    }
                    _ => {}
                }
            }
            std::fs::create_dir_all(workspace).map_err(|source| safe_fs::Error::Io {
                path: workspace.to_path_buf(),
                source,
            })?;
            // A fresh workspace stays the server's until `checkout` has filled it and handed
            // it over whole: no agent process can plant anything where git writes as root.
            if !needs_setup {
                safe_fs::Dir::open(workspace)?.set_owner(owner)?;
            }
            // The agent's HOME lives as long as the run, so a CLI that keeps its session there
            // (claude's --resume) finds it again in the next execution.
            let agent_files = safe_fs::Dir::open(files)?;
            agent_files.make_dir("home", 0o700)?.set_owner(owner)?;
            if inherited {
                // A fresh workspace is handed over by `checkout`, after git is done.
                if !needs_setup {
                    sup.sandboxes.hand_over_tree(workspace)?;
                }
                sup.sandboxes.hand_over_tree(home)?;
            }
            if owner.is_some() {
                // An unconfined agent of another user reaches its home and MCP file by their
                // paths, without listing the directory (in a sandbox they are mounted for it).
                agent_files.set_mode(0o711)?;
            }
            Ok(())
        });
    prepared.map_err(|e| {
        unsafe_path(
            &format!("cannot prepare the workspace {}", workspace.display()),
            e,
        )
    })
}

/// Where the execution's processes are confined: its cgroup (`None` without limits), or on
/// Slurm the launcher of its job's steps, which takes the markers out of `vars`.
fn confinement(
    job: &Assignment,
    sup: &Supervision,
    vars: &mut BTreeMap<String, String>,
    files: &Path,
) -> Result<
    (
        Option<crate::cgroup::Leaf>,
        Option<crate::slurm::StepLauncher>,
    ),
    StatusMessage,
> {
    let env = &job.environment;
    let id = job.run.id;
    Ok(match &job.allocation {
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
            let steps = crate::slurm::StepLauncher::new(
                bwrap,
                allocation.clone(),
                files.to_path_buf(),
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
    })
}

fn private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}
