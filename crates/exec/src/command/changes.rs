//! What the execution changed in its workspace, in two steps. Before the agent starts
//! (`take_bases`): the base each repository's changes are counted from, the commit its
//! checkout held when the run's workspace was made (kept in the run's files as
//! `changes-bases.json`, so later executions count from the same base), or for a workspace
//! without repositories the tree of its files written into a private repository under the
//! run's files (`changes/git`), out of the agent's sandbox. After every process of the
//! execution has ended (`compute`): the working tree added to a temporary index, its tree
//! compared with the base (`--raw --numstat`, the summary), then the patch, cut at
//! `changes_max_mb`, redacted like the transcript, stored in the content store.
//!
//! Git runs through the execution's own launcher, as the agent's user, in its sandbox and
//! cgroup (on Slurm, as a job step), with the environment and overrides of `crate::changes`,
//! bounded in time and output; it never writes the repository's index, branches or
//! configuration. Links are recorded as links, FIFOs and devices skipped (git's own rules). A
//! failure is recorded in the changes and the transcript; it never fails the execution.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};

use super::execution::Execution;
use crate::changes::{self, cut_diff, parse_summary};
use crate::safe_fs;
use crate::sandbox::Plan;
use runledger_domain::{ExecutionChanges, RepositoryChanges};

/// How long one git process of the computation may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(120);
/// The most bytes of a summary (raw and numstat records) read: far above `MAX_FILES` files.
const SUMMARY_BYTES: usize = 64 << 20;
/// The most bytes of a git process's stderr kept for its error message.
const STDERR_BYTES: usize = 16 << 10;
/// The run's bases, in its files directory (the server's).
const BASES: &str = "changes-bases.json";
/// The agent-owned directory of the temporary indexes and the private repository.
const WORK_DIR: &str = "changes";

/// What the changes of one place are counted in.
struct Target {
    /// Relative to the workspace, as the log names it (`.` for the workspace itself).
    path: String,
    work_tree: PathBuf,
    git_dir: PathBuf,
    index: PathBuf,
    /// A repository checked out (else the workspace itself, in the private repository).
    repository: bool,
}

fn files_dir(x: &Execution<'_>) -> Option<PathBuf> {
    x.setup_done.parent().map(Path::to_path_buf)
}

fn targets(x: &Execution<'_>, work: &Path) -> Vec<Target> {
    let mut repos: Vec<&runledger_config::Repo> = x.job.environment.repos.iter().collect();
    if repos.is_empty() {
        return vec![Target {
            path: ".".into(),
            work_tree: x.workspace.clone(),
            git_dir: work.join("git"),
            index: work.join("index"),
            repository: false,
        }];
    }
    // The order they were checked out in (`setup::checkout`), as the provenance lists them.
    repos.sort_by_key(|r| {
        r.path
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .count()
    });
    repos
        .into_iter()
        .enumerate()
        .map(|(n, repo)| {
            let work_tree = x.workspace.join(&repo.path);
            Target {
                path: repo.path.display().to_string(),
                git_dir: work_tree.join(".git"),
                work_tree,
                index: work.join(format!("index-{n}")),
                repository: true,
            }
        })
        .collect()
}

/// The agent-owned working directory of the computation, made if missing.
fn work_dir(x: &Execution<'_>) -> Result<PathBuf, String> {
    let files = files_dir(x).ok_or("the run has no files directory")?;
    let dir = safe_fs::Dir::open(&files)
        .and_then(|d| d.make_dir(WORK_DIR, 0o700))
        .map_err(|e| e.to_string())?;
    dir.set_owner(x.sup.sandboxes.owner())
        .map_err(|e| e.to_string())?;
    Ok(files.join(WORK_DIR))
}

fn read_bases(files: &Path) -> BTreeMap<String, String> {
    safe_fs::Dir::open(files)
        .and_then(|d| d.read(Path::new(BASES), safe_fs::Links::Allowed))
        .ok()
        .flatten()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Before the agent starts: the base of each place, unless the run's workspace already has
/// one (a later execution in the same workspace counts from the run's first).
pub(super) async fn take_bases(x: &mut Execution<'_>) {
    if x.job.environment.harness == runledger_domain::harness::Harness::Demo {
        return;
    }
    let Some(files) = files_dir(x) else { return };
    // A workspace made in this execution starts the count over.
    let mut bases = if x.needs_setup {
        BTreeMap::new()
    } else {
        read_bases(&files)
    };
    let work = match work_dir(x) {
        Ok(work) => work,
        Err(e) => {
            x.system(format!("changes: cannot prepare their computation: {e}"));
            return;
        }
    };
    let mut changed = x.needs_setup;
    for target in targets(x, &work) {
        if bases.contains_key(&target.path) {
            continue;
        }
        // An empty workspace (no setup, no attachments) is the empty tree: no git to run.
        if !target.repository && is_empty(&target.work_tree) {
            bases.insert(target.path.clone(), EMPTY_TREE.to_string());
            changed = true;
            continue;
        }
        let mode = if target.repository { "repo" } else { "plain" };
        let args = script(&changes::start_script(), &[mode]);
        match git(x, &target, &[], "sh", &args, 4096).await {
            Ok((out, _)) => {
                let base = String::from_utf8_lossy(&out).trim().to_ascii_lowercase();
                if crate::repos::is_commit_id(&base) {
                    bases.insert(target.path.clone(), base);
                    changed = true;
                } else {
                    x.system(format!(
                        "changes: no base for {}: git printed {base:?}",
                        target.path
                    ));
                }
            }
            Err(e) => x.system(format!("changes: no base for {}: {e}", target.path)),
        }
    }
    if changed {
        let bytes = serde_json::to_vec(&bases).unwrap_or_default();
        let written =
            safe_fs::Dir::open(&files).and_then(|d| d.replace(BASES, &bytes, 0o600, None));
        if let Err(e) = written {
            x.system(format!("changes: cannot keep their bases: {e}"));
        }
    }
}

/// After every process of the execution has ended: the run's changes from its bases.
/// `None` when the workspace was never made whole (setup did not succeed) or for the demo.
pub(super) async fn compute(x: &mut Execution<'_>) -> Option<ExecutionChanges> {
    if x.job.environment.harness == runledger_domain::harness::Harness::Demo
        || !x.setup_done.exists()
    {
        return None;
    }
    let started = Instant::now();
    let files = files_dir(x)?;
    let bases = read_bases(&files);
    let work = match work_dir(x) {
        Ok(work) => work,
        Err(e) => {
            x.system(format!("changes: cannot compute them: {e}"));
            return None;
        }
    };
    let cap = usize::try_from(x.job.environment.changes_max_bytes).unwrap_or(usize::MAX);
    let mut diff = Vec::new();
    let mut cut = false;
    let mut repositories = Vec::new();
    for target in targets(x, &work) {
        let base = bases.get(&target.path).cloned().unwrap_or_default();
        let mut entry = RepositoryChanges {
            path: target.path.clone(),
            base: base.clone(),
            files: Vec::new(),
            error: None,
        };
        if base.is_empty() {
            entry.error = Some("no base was recorded at the execution's start".into());
            repositories.push(entry);
            continue;
        }
        match one(x, &target, &base, cap.saturating_sub(diff.len())).await {
            Ok(found) => {
                entry.files = found.files;
                if found.more > 0 {
                    entry.error = Some(format!(
                        "{} more changed files are not listed (at most {} are)",
                        found.more,
                        changes::MAX_FILES
                    ));
                }
                if found.large > 0 {
                    let note = format!(
                        "{} untracked file(s) larger than {} MiB were left out",
                        found.large,
                        changes::LARGE_FILE_MB
                    );
                    entry.error = Some(match entry.error.take() {
                        Some(e) => format!("{e}; {note}"),
                        None => note,
                    });
                }
                cut |= found.cut;
                diff.extend_from_slice(&found.diff);
            }
            Err(e) => entry.error = Some(x.redactor.apply(&e).into_owned()),
        }
        for file in &mut entry.files {
            file.path = x.redactor.apply(&file.path).into_owned();
            if let Some(old) = &mut file.old_path {
                *old = x.redactor.apply(old).into_owned();
            }
        }
        repositories.push(entry);
    }
    // A diff cut to nothing (its first file alone passes the cap) is kept, empty, so the
    // patch still says it was cut.
    let diff = if diff.is_empty() && !cut {
        None
    } else {
        let redacted = x.redactor.apply_bytes(&diff).into_owned();
        let content = x.sup.content.clone();
        let stored =
            tokio::task::spawn_blocking(move || content.put_bytes(&redacted, "text/x-diff")).await;
        match stored {
            Ok(Ok(content)) => Some(content),
            Ok(Err(e)) => {
                x.system(format!("changes: the diff was not stored: {e}"));
                None
            }
            Err(e) => {
                x.system(format!("changes: the diff was not stored: {e}"));
                None
            }
        }
    };
    let changes = ExecutionChanges {
        repositories,
        diff,
        cut,
    };
    let totals = changes.totals();
    let mut line = format!(
        "changes: {} file(s), +{} -{}, computed in {} ms",
        totals.files,
        totals.additions,
        totals.deletions,
        started.elapsed().as_millis()
    );
    if cut {
        line.push_str(&format!(
            "; the diff was cut at changes_max_mb ({} MiB)",
            x.job.environment.changes_max_bytes >> 20
        ));
    }
    for r in changes.repositories.iter().filter(|r| r.error.is_some()) {
        line.push_str(&format!(
            "; {}: {}",
            r.path,
            r.error.as_deref().unwrap_or_default()
        ));
    }
    x.system(line);
    Some(changes)
}

/// Git's empty tree: the base of a workspace that was empty at its start.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// Whether the directory has no entry (its names only are read, never a file of the agent's).
fn is_empty(dir: &Path) -> bool {
    safe_fs::Dir::open(dir)
        .and_then(|d| d.names())
        .is_ok_and(|names| names.is_empty())
}

/// What one place changed.
struct Found {
    files: Vec<runledger_domain::ChangedFile>,
    more: u64,
    /// Untracked files over `LARGE_FILE_MB`, left out.
    large: u64,
    diff: Vec<u8>,
    cut: bool,
}

async fn one(x: &Execution<'_>, target: &Target, base: &str, room: usize) -> Result<Found, String> {
    if !target.repository && base == EMPTY_TREE && is_empty(&target.work_tree) {
        return Ok(Found {
            files: Vec::new(),
            more: 0,
            large: 0,
            diff: Vec::new(),
            cut: false,
        });
    }
    // The repository's filter drivers, turned off for the rest (a plain workspace's private
    // repository has none).
    let filters = if target.repository {
        let args = script(changes::FILTER_LIST, &[]);
        match git(x, target, &[], "sh", &args, 1 << 20).await {
            Ok((out, _)) => changes::filter_names(&out),
            // `git config` exits 1 when nothing matches.
            Err(_) => Vec::new(),
        }
    } else {
        Vec::new()
    };
    let source = if target.repository {
        target.git_dir.join("index").display().to_string()
    } else {
        "-".into()
    };
    let args = script(&changes::end_script(), &[&source, base]);
    let (out, truncated) = git(x, target, &filters, "sh", &args, SUMMARY_BYTES).await?;
    if truncated {
        return Err("git's list of changed files is too long".into());
    }
    let newline = out
        .iter()
        .position(|b| *b == b'\n')
        .ok_or("git printed no tree")?;
    let first = String::from_utf8_lossy(&out[..newline]).to_string();
    let mut words = first.split_whitespace();
    let tree = words.next().unwrap_or_default().to_string();
    let large = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    if !crate::repos::is_commit_id(&tree) {
        return Err(format!("git printed {tree:?}, not a tree"));
    }
    let (files, more) = parse_summary(&out[newline + 1..])?;
    if files.is_empty() {
        return Ok(Found {
            files,
            more,
            large,
            diff: Vec::new(),
            cut: false,
        });
    }
    let args = changes::diff_args(base, &tree, &target.path);
    let (patch, over) = git(x, target, &filters, "git", &args, room).await?;
    let (diff, cut) = cut_diff(patch, room, over);
    Ok(Found {
        files,
        more,
        large,
        diff,
        cut,
    })
}

/// `sh -c SCRIPT sh ARGS…`.
fn script(text: &str, args: &[&str]) -> Vec<String> {
    ["-c", text, "sh"]
        .iter()
        .chain(args)
        .map(|s| s.to_string())
        .collect()
}

/// Runs `program args` for `target` as the agent, in its sandbox; its stdout (at most `cap`
/// bytes: `true` when there was more, and the process is stopped) or why it failed.
async fn git(
    x: &Execution<'_>,
    target: &Target,
    filters: &[String],
    program: &str,
    args: &[String],
    cap: usize,
) -> Result<(Vec<u8>, bool), String> {
    let work = target
        .index
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    // coreutils' `timeout` inside the sandbox kills the shell and its gits (its own process
    // group) even when the server is gone: a server killed mid-computation must not leave a
    // git behind for good (the server's own timeout below dies with it).
    let mut timed = vec![
        "-s".to_string(),
        "KILL".to_string(),
        format!("{}", GIT_TIMEOUT.as_secs() + 5),
        program.to_string(),
    ];
    timed.extend_from_slice(args);
    let plan = Plan {
        program: "timeout".to_string(),
        args: timed,
        cwd: x.workspace.clone(),
        read_only_workspace: false,
        env: changes::safe_env(
            x.vars.get("PATH").map(String::as_str),
            &x.home,
            &target.git_dir,
            &target.work_tree,
            &target.index,
            filters,
        ),
        writable: vec![x.home.clone(), work],
        readable: Vec::new(),
        network: false,
        cgroups: x.leaf.as_ref().map(|l| l.procs()).unwrap_or_default(),
        user: x.sup.sandboxes.agent_user().cloned(),
    };
    let mut cmd = x.launcher().command(&plan);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start git: {e}"))?;
    let group = child.id().map(|pid| pid as i32);
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err("git's output was not piped".into());
    };
    let stop = |group: Option<i32>| {
        // The whole group: the sandbox, the shell and its gits.
        if let Some(group) = group {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(group),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    };
    // stderr on its own task, so a full stdout pipe never waits on it.
    let errors = tokio::spawn(bounded(stderr, STDERR_BYTES));
    let ended = tokio::time::timeout(GIT_TIMEOUT, async {
        let (out, over) = bounded(stdout, cap).await.map_err(|e| e.to_string())?;
        if over {
            return Ok((out, true, None));
        }
        let status = child.wait().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((out, false, Some(status)))
    })
    .await;
    let (out, status) = match ended {
        Ok(Ok((out, false, Some(status)))) => (out, status),
        Ok(Ok((out, _, _))) => {
            stop(group);
            let _ = child.wait().await;
            return Ok((out, true));
        }
        Ok(Err(e)) => {
            stop(group);
            let _ = child.wait().await;
            return Err(e);
        }
        Err(_) => {
            stop(group);
            let _ = child.wait().await;
            return Err(format!("git took longer than {} s", GIT_TIMEOUT.as_secs()));
        }
    };
    let err = match errors.await {
        Ok(Ok((err, _))) => err,
        _ => Vec::new(),
    };
    if status.success() {
        return Ok((out, false));
    }
    let text = String::from_utf8_lossy(&err);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join("; ");
    Err(format!("git failed ({status}): {tail}"))
}

/// Everything `reader` gives, up to `cap` bytes; `true` when there was more.
async fn bounded(reader: impl AsyncRead + Unpin, cap: usize) -> std::io::Result<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(limit).read_to_end(&mut out).await?;
    let over = out.len() > cap;
    out.truncate(cap);
    Ok((out, over))
}
