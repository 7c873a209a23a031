//! Repositories an environment's runs start with (`repos`): a bare mirror per URL under
//! `<data_dir>/repos/`, made once with `git clone --mirror` and brought up to date with
//! `git fetch` before each new workspace is filled, then a local clone of it at the repository's
//! `path` in the workspace, so a large repository costs one network fetch of what changed and
//! a local copy, not a clone, from its second run on. The clone copies the mirror's objects
//! (`--no-hardlinks`): a hard-linked object would be one file in the mirror and the agent's
//! workspace, so handing the workspace to the agent user would hand it the mirror other runs
//! clone from (and keeping it the server's would leave the agent's clone unreadable to it).
//!
//! Git runs as the server (with the server's environment, so its credentials for private
//! remotes work, and never a prompt) in a fresh workspace no agent can write yet; the checkout
//! is then handed to the agent user. Concurrent
//! runs of one URL take turns on its mirror. This module runs git and nothing else; it never
//! starts an agent.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use runledger_config::Repo;

/// Why a checkout failed, and whether trying again could help (a fetch can fail for a moment;
/// a ref that does not exist will not appear by itself).
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub retryable: bool,
}

/// The mirrors of one data directory.
#[derive(Clone)]
pub struct Mirrors {
    dir: PathBuf,
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Mirrors {
    pub fn new(data_dir: &Path) -> Mirrors {
        Mirrors {
            dir: data_dir.join("repos"),
            locks: Arc::default(),
        }
    }

    fn lock(&self, url: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(url.to_string()).or_default().clone()
    }

    /// The mirror's directory: named by a hash of the URL, which can hold anything.
    fn path(&self, url: &str) -> PathBuf {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(url.as_bytes());
        let name: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{name}.git"))
    }

    /// Makes or refreshes the mirror of `url`; returns its path.
    async fn refresh(&self, url: &str, deadline: tokio::time::Instant) -> Result<PathBuf, Failure> {
        let path = self.path(url);
        let fetch_failed = |message: String| Failure {
            message: format!("cannot fetch {url}: {message}"),
            retryable: true,
        };
        if path.join("HEAD").exists() {
            git(&["fetch", "--prune", "--quiet", "origin"], &path, deadline)
                .await
                .map_err(fetch_failed)?;
            return Ok(path);
        }
        // Cloned beside its final name and renamed, so a clone cut short (a crash, the
        // deadline) is never taken for a mirror.
        std::fs::create_dir_all(&self.dir).map_err(|e| fetch_failed(e.to_string()))?;
        let partial = path.with_extension("partial");
        let _ = std::fs::remove_dir_all(&partial);
        let partial_arg = partial.display().to_string();
        git(
            &["clone", "--mirror", "--quiet", "--", url, &partial_arg],
            &self.dir,
            deadline,
        )
        .await
        .map_err(fetch_failed)?;
        std::fs::rename(&partial, &path).map_err(|e| fetch_failed(e.to_string()))?;
        Ok(path)
    }

    /// Checks `repo` out at its path in `workspace` (which holds nothing there yet): at `pin`
    /// (a commit a pinned rerun carries, detached) when given, else at its ref.
    pub async fn checkout(
        &self,
        repo: &Repo,
        workspace: &Path,
        pin: Option<&str>,
        deadline: tokio::time::Instant,
    ) -> Result<(), Failure> {
        // A pin comes from a recorded event, which an imported log may hold anything in: only
        // a full commit id ever reaches git, so it cannot be taken for an option or a ref.
        if let Some(commit) = pin {
            if !is_commit_id(commit) {
                return Err(Failure {
                    message: format!(
                        "cannot check out {} at the pinned commit {commit:?}: not a commit id                          (40 hexadecimal digits)",
                        repo.url
                    ),
                    retryable: false,
                });
            }
        }
        let lock = self.lock(&repo.url);
        let _turn = lock.lock().await;
        let mirror = self.refresh(&repo.url, deadline).await?;
        let wanted = pin.or(repo.reference.as_deref()).unwrap_or("HEAD");
        let failed = |message: String| Failure {
            message: format!(
                "cannot check out {} ({wanted}) at {}: {message}",
                repo.url,
                repo.path.display()
            ),
            retryable: false,
        };
        let commit = git(
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &format!("{wanted}^{{commit}}"),
            ],
            &mirror,
            deadline,
        )
        .await
        .map_err(|_| match pin {
            Some(commit) => failed(format!(
                "the pinned commit {commit} no longer exists in the repository (it was \
                 rewritten or deleted since the original run); rerun unpinned to use the ref \
                 as it is now"
            )),
            None => failed(format!(
                "the repository has no branch, tag or commit {wanted:?}"
            )),
        })?;
        // A branch (named, or the remote's default) is checked out as that branch, so an agent
        // can commit to it and push; a tag, a commit or a pin is checked out detached.
        let branch = match &repo.reference {
            _ if pin.is_some() => None,
            Some(name) => git(
                &[
                    "show-ref",
                    "--verify",
                    "--quiet",
                    &format!("refs/heads/{name}"),
                ],
                &mirror,
                deadline,
            )
            .await
            .ok()
            .map(|_| name.clone()),
            // Its output ends with a newline, which is no part of a branch name.
            None => git(&["symbolic-ref", "--short", "HEAD"], &mirror, deadline)
                .await
                .ok()
                .map(|name| name.trim().to_string()),
        };
        let dest = workspace.join(&repo.path);
        std::fs::create_dir_all(&dest).map_err(|e| failed(e.to_string()))?;
        let (mirror_arg, dest_arg) = (mirror.display().to_string(), dest.display().to_string());
        git(
            &[
                "clone",
                "--no-checkout",
                "--no-hardlinks",
                "--quiet",
                "--",
                &mirror_arg,
                &dest_arg,
            ],
            workspace,
            deadline,
        )
        .await
        .map_err(failed)?;
        let checkout: Vec<&str> = match &branch {
            Some(name) => vec!["checkout", "--quiet", "-B", name, commit.trim()],
            None => vec!["checkout", "--quiet", "--detach", commit.trim()],
        };
        git(&checkout, &dest, deadline).await.map_err(failed)?;
        // The agent pushes to the real remote, not to the mirror (which it cannot see).
        git(&["remote", "set-url", "origin", &repo.url], &dest, deadline)
            .await
            .map_err(failed)?;
        Ok(())
    }
}

/// Whether `text` is a full commit id: 40 hexadecimal digits.
pub fn is_commit_id(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit a checkout's `HEAD` names (40 hex digits), for the execution's provenance.
pub async fn head_commit(
    checkout: &Path,
    deadline: tokio::time::Instant,
) -> Result<String, String> {
    let out = git(
        &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        checkout,
        deadline,
    )
    .await?;
    let commit = out.trim();
    if is_commit_id(commit) {
        Ok(commit.to_ascii_lowercase())
    } else {
        Err(format!("git rev-parse printed {commit:?}, not a commit"))
    }
}

/// Runs git in `cwd`; its stdout, or its last lines of stderr.
async fn git(args: &[&str], cwd: &Path, deadline: tokio::time::Instant) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new("git");
    // The workspace belongs to the agent user while git runs as the server, which git would
    // otherwise refuse as a repository of another owner.
    cmd.args(["-c", "safe.directory=*"])
        .args(args)
        .current_dir(cwd)
        // A remote that wants a password fails instead of waiting for one.
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = match tokio::time::timeout_at(deadline, cmd.output()).await {
        Err(_) => return Err("the run's max_runtime_secs ran out".into()),
        Ok(Err(e)) => return Err(format!("cannot run git: {e}")),
        Ok(Ok(output)) => output,
    };
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(4)..].join("\n");
    Err(format!(
        "git {} failed ({}): {tail}",
        args[0], output.status
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A repository with one commit on `main`, its URL, and a fresh workspace.
    fn fixture() -> (tempfile::TempDir, Repo, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let origin = dir.path().join("origin");
        std::fs::create_dir(&origin).expect("mkdir");
        run(&origin, &["init", "-q", "-b", "main"]);
        std::fs::write(origin.join("a.txt"), "v1").expect("write");
        run(&origin, &["add", "a.txt"]);
        run(&origin, &["commit", "-q", "-m", "v1"]);
        let repo = Repo {
            url: format!("file://{}", origin.display()),
            reference: Some("main".into()),
            path: PathBuf::from("."),
        };
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).expect("mkdir");
        (dir, repo, workspace)
    }

    fn deadline() -> tokio::time::Instant {
        tokio::time::Instant::now() + std::time::Duration::from_secs(60)
    }

    #[tokio::test]
    async fn a_pin_is_checked_out_detached_and_a_pin_that_is_no_commit_id_never_reaches_git() {
        let (dir, repo, workspace) = fixture();
        let mirrors = Mirrors::new(&dir.path().join("data"));
        let origin = dir.path().join("origin");
        let first = run(&origin, &["rev-parse", "HEAD"]);
        std::fs::write(origin.join("a.txt"), "v2").expect("write");
        run(&origin, &["commit", "-q", "-am", "v2"]);
        mirrors
            .checkout(&repo, &workspace, Some(&first), deadline())
            .await
            .map_err(|f| f.message)
            .expect("the pinned commit checks out");
        assert_eq!(run(&workspace, &["rev-parse", "HEAD"]), first);
        assert_eq!(
            run(&workspace, &["rev-parse", "--abbrev-ref", "HEAD"]),
            "HEAD"
        );
        assert_eq!(
            head_commit(&workspace, deadline()).await.as_deref(),
            Ok(first.as_str())
        );

        let marker = dir.path().join("pwned");
        for hostile in [
            format!("--upload-pack=touch {}", marker.display()),
            "-c".to_string(),
            "main".to_string(),
            "HEAD~1".to_string(),
            format!("{first}\n"),
        ] {
            let other = dir.path().join("other");
            let _ = std::fs::remove_dir_all(&other);
            std::fs::create_dir(&other).expect("mkdir");
            let failure = mirrors
                .checkout(&repo, &other, Some(&hostile), deadline())
                .await
                .expect_err("refused");
            assert!(
                failure.message.contains("not a commit id"),
                "{}",
                failure.message
            );
            assert!(!failure.retryable);
        }
        assert!(!marker.exists());

        // A commit the repository does not have fails for good, saying so.
        let gone = dir.path().join("gone");
        std::fs::create_dir(&gone).expect("mkdir");
        let failure = mirrors
            .checkout(&repo, &gone, Some(&"0".repeat(40)), deadline())
            .await
            .expect_err("refused");
        assert!(
            failure.message.contains("no longer exists"),
            "{}",
            failure.message
        );
        assert!(!failure.retryable);
    }
}
