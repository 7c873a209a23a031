//! Repositories: each new workspace starts with the environment's repositories checked out
//! from a mirror the server keeps and refreshes, and a fetch or checkout that fails ends the
//! run as a setup failure that says why. The remotes are local bare repositories (`file://`).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{agent_visible_dir, script, Server};
use serde_json::json;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Commits `text` as `a.txt` on main and pushes it.
fn commit(work: &Path, text: &str) {
    std::fs::write(work.join("a.txt"), text).expect("write");
    git(work, &["add", "a.txt"]);
    git(work, &["commit", "-q", "-m", text]);
    git(work, &["push", "-q", "origin", "main"]);
}

#[tokio::test]
async fn runs_start_with_their_repositories_checked_out_from_a_refreshed_mirror() {
    let f = agent_visible_dir();
    let dir = f.path();
    let origin = dir.join("origin.git");
    let work = dir.join("work");
    git(dir, &["init", "-q", "--bare", "-b", "main", "origin.git"]);
    git(
        dir,
        &["clone", "-q", origin.to_str().expect("utf-8"), "work"],
    );
    git(&work, &["checkout", "-q", "-b", "main"]);
    commit(&work, "v1");
    git(&work, &["tag", "v1-tag"]);
    git(&work, &["push", "-q", "origin", "v1-tag"]);
    let url = format!("file://{}", origin.display());
    let agent = dir.join("agent.sh");
    script(
        &agent,
        "echo \"top=$(cat a.txt) branch=$(git rev-parse --abbrev-ref HEAD)\"\n\
         echo \"lib=$(cat vendor/lib/a.txt) head=$(git -C vendor/lib rev-parse --abbrev-ref HEAD)\"\n\
         echo \"origin=$(git remote get-url origin)\"\n\
         echo \"setup=$(cat prepared)\"\n\
         echo \"log=$(git log -1 --format=%s)\"\n\
         git -c user.name=agent -c user.email=agent@example.com commit -q --allow-empty -m mine \
           && echo committed\n\
         touch mine && echo writable",
    );
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n\
         [[environments]]\nid = \"repo\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\
         setup = [\"cat a.txt > prepared\"]\n\
         repos = [{{ url = \"{url}\", path = \"vendor/lib\", ref = \"v1-tag\" }}, {{ url = \"{url}\", ref = \"main\" }}]\n\n\
         [[environments]]\nid = \"badref\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\
         repos = [{{ url = \"{url}\", ref = \"no-such-branch\" }}]\n\n\
         [[environments]]\nid = \"badurl\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\
         repos = [{{ url = \"file://{missing}\" }}]\n",
        agent = agent.display(),
        missing = dir.join("missing.git").display(),
    );
    let s = Server::start_with(dir, &config, &[]);
    s.wait_ready().await;

    let first = s
        .create(json!({"prompt": "x", "config": {"environment_id": "repo"}}))
        .await;
    s.wait_state(&first, "SUCCEEDED").await;
    let text = s.transcript_text(&first).await;
    for want in [
        "top=v1 branch=main",
        "lib=v1 head=HEAD",
        &format!("origin={url}"),
        "setup=v1",
        "log=v1",
        "committed",
        "writable",
    ] {
        assert!(text.contains(want), "missing {want:?}:\n{text}");
    }
    // The agent user reads and writes its clone's objects, and owns none of the mirror's.
    if nix::unistd::geteuid().is_root() {
        use std::os::unix::fs::MetadataExt;
        let mut pending = vec![s.data_dir.join("repos")];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).expect("mirror") {
                let path = entry.expect("entry").path();
                let meta = std::fs::symlink_metadata(&path).expect("meta");
                assert_eq!(meta.uid(), 0, "{} is not the server's", path.display());
                if meta.is_dir() {
                    pending.push(path);
                }
            }
        }
    }

    // A new commit upstream: the next run fetches it into the same mirror.
    commit(&work, "v2");
    let second = s
        .create(json!({"prompt": "x", "config": {"environment_id": "repo"}}))
        .await;
    s.wait_state(&second, "SUCCEEDED").await;
    let text = s.transcript_text(&second).await;
    assert!(text.contains("top=v2 branch=main"), "{text}");
    let mirrors = std::fs::read_dir(s.data_dir.join("repos"))
        .expect("mirrors")
        .count();
    assert_eq!(mirrors, 1);

    for (environment, want) in [
        ("badref", "no branch, tag or commit \"no-such-branch\""),
        ("badurl", "cannot fetch file://"),
    ] {
        let id = s
            .create(json!({"prompt": "x", "config": {"environment_id": environment}}))
            .await;
        let run = s.wait_state(&id, "FAILED").await;
        assert_eq!(
            run["status_message"]["error_code"], "environment_setup_failed",
            "{run}"
        );
        let message = run["status_message"]["message"].as_str().expect("message");
        assert!(message.contains(want), "{message}");
    }
}

#[tokio::test]
async fn a_cancel_stops_a_checkout_that_hangs() {
    let f = agent_visible_dir();
    let dir = f.path();
    // A remote that accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n\
         [[environments]]\nid = \"slow\"\nharness = \"command\"\ncommand = [\"true\"]\nmax_concurrent = 1\n\
         repos = [{{ url = \"http://127.0.0.1:{port}/never.git\" }}]\n"
    );
    let s = Server::start_with(dir, &config, &[]);
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "x"})).await;
    s.wait_state(&id, "INPROGRESS").await;
    common::eventually(10, "the checkout to begin", || {
        std::fs::read_dir(s.data_dir.join("repos")).is_ok_and(|mut d| d.next().is_some())
    })
    .await;
    let (status, _) = s
        .post(&s.key, &format!("/agent/runs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200);
    // The single slot is free again: the next run starts.
    let next = s.create(json!({"prompt": "y"})).await;
    s.wait_state(&next, "INPROGRESS").await;
    let text = s.transcript_text(&id).await;
    assert!(text.lines().any(|l| l == "stopped"), "{text}");
    assert_eq!(s.run(&id).await["state"], "CANCELLED");
    drop(listener);
}
