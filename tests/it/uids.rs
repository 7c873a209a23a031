//! Who an agent is under a root server: a uid of its run's own from `server.agent_uids`, which
//! no other run's agent (sandboxed or not) and no other user of the host (`nobody`) can use to
//! read its environment, home, workspace or MCP file, and which the run keeps across a restart.
//! And what it inherits from the host: a fixed `PATH`, never the server's, and no user
//! namespaces of its own inside the sandbox.

use crate::common;

use std::path::{Path, PathBuf};

use common::{agent_visible_dir, script, Server};
use serde_json::{json, Value};

/// The agent: says who it is, writes its workspace, and then, by its prompt, waits for a
/// follow-up on stdin (`wait`) or tries to read another run's files (`probe PID WS HOME MCP`).
/// A resumed execution only writes and says who it is.
const AGENT: &str = r#"
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G) user=$USER"
echo "path=$PATH"
echo "execution $RUNLEDGER_EXECUTION" >> owned.txt || exit 3
echo "execution $RUNLEDGER_EXECUTION" >> "$HOME/note" || exit 4
[ -n "$RUNLEDGER_FOLLOWUP" ] && exit 0
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "ok:$name"; else echo "no:$name"; fi; }
case "$RUNLEDGER_PROMPT" in
  wait) read -r _ ;;
  probe*)
    set -- $RUNLEDGER_PROMPT
    try environ grep -qa RUNLEDGER "/proc/$2/environ"
    try home ls "$4"
    try workspace cat "$3/owned.txt"
    try mcp cat "$5"
    try own-mcp cat "$RUNLEDGER_MCP_CONFIG"
    ;;
esac
"#;

/// The range of this test's servers, apart from every other test's (which use the default).
const RANGE: (u32, u32) = (1_500_000_000, 1_500_099_999);

fn config(agent: &Path) -> String {
    format!(
        "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 1\nagent_uids = \"{}-{}\"\n\n\
         [[environments]]\nid = \"boxed\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\n\
         [[environments]]\nid = \"open\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\
         sandbox = \"none\"\n",
        RANGE.0,
        RANGE.1,
        agent = agent.display(),
    )
}

/// The uid a run's agent reported in its transcript.
fn reported_uid(text: &str) -> u32 {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("uid="))
        .unwrap_or_else(|| panic!("no uid line: {text}"));
    line.split_whitespace()
        .next()
        .and_then(|u| u.parse().ok())
        .unwrap_or_else(|| panic!("bad uid line: {line}"))
}

/// Whether `uid` (with its gid of the same number and no other group) can run `argv`.
fn can_as(uid: u32, argv: &[&str]) -> bool {
    std::process::Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg("--")
        .args(argv)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("setpriv")
        .success()
}

/// What a run made for its agent: its workspace, home and MCP file.
struct Files {
    workspace: PathBuf,
    home: PathBuf,
    mcp: PathBuf,
}

impl Files {
    fn of(s: &Server, id: &str) -> Files {
        let files = s.data_dir.join("agent-files").join(id);
        Files {
            workspace: s.data_dir.join("workspaces").join(id),
            home: files.join("home"),
            mcp: files.join("mcp.json"),
        }
    }
}

fn mcp() -> Value {
    json!({"probe": {"command": "true", "env": {"MCP_TOKEN": "mcp-secret-value-0123456789"}}})
}

#[tokio::test]
async fn each_run_has_a_uid_of_its_own_that_no_other_run_or_user_can_read_through() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("not run: agents get uids of their own only under a root server");
        return;
    }
    let f = agent_visible_dir();
    let agent = f.path().join("agent.sh");
    script(&agent, AGENT);
    let mut s = Server::start_with(f.path(), &config(&agent), &[]);
    s.wait_ready().await;
    let key = s.key.clone();

    // A sandboxed run that stays alive, waiting for a follow-up.
    let boxed = s
        .create(
            json!({"prompt": "wait", "config": {"environment_id": "boxed", "mcp_servers": mcp()}}),
        )
        .await;
    s.wait_state(&boxed, "INPROGRESS").await;
    let boxed_files = Files::of(&s, &boxed);
    common::eventually(10, "the sandboxed agent to write its workspace", || {
        boxed_files.workspace.join("owned.txt").exists()
    })
    .await;
    // The agent itself, not bubblewrap (root's) around it.
    let boxed_pid = common::processes_of(&boxed)
        .into_iter()
        .find(|pid| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(format!("/proc/{pid}")).is_ok_and(|m| m.uid() != 0)
        })
        .expect("the sandboxed agent's process");

    // An unconfined run of the same server tries to read the sandboxed run's files and
    // environment, which it would reach by path if they were its own user's.
    let prompt = format!(
        "probe {boxed_pid} {} {} {}",
        boxed_files.workspace.display(),
        boxed_files.home.display(),
        boxed_files.mcp.display()
    );
    let open = s
        .create(
            json!({"prompt": prompt, "config": {"environment_id": "open", "mcp_servers": mcp()}}),
        )
        .await;
    s.wait_state(&open, "SUCCEEDED").await;
    let open_text = s.transcript_text(&open).await;
    for denied in ["no:environ", "no:home", "no:workspace", "no:mcp"] {
        assert!(open_text.contains(denied), "{denied}: {open_text}");
    }
    // The probes can tell: its own MCP file it reads.
    assert!(open_text.contains("ok:own-mcp"), "{open_text}");

    let boxed_text = s.transcript_text(&boxed).await;
    let (boxed_uid, open_uid) = (reported_uid(&boxed_text), reported_uid(&open_text));
    assert_ne!(boxed_uid, open_uid);
    for (uid, text) in [(boxed_uid, &boxed_text), (open_uid, &open_text)] {
        assert!((RANGE.0..=RANGE.1).contains(&uid), "{uid}");
        // No passwd entry, no group but its own.
        assert!(
            text.contains(&format!(
                "uid={uid} gid={uid} groups={uid} user=runledger-{uid}"
            )),
            "{text}"
        );
    }

    // Neither run's uid, nor nobody, reaches the other run's environment and files, while the
    // run's own uid does (so each check can tell).
    let open_files = Files::of(&s, &open);
    let boxed_environ = format!("/proc/{boxed_pid}/environ");
    let checks = |files: &Files, environ: Option<&str>| {
        let mut argvs: Vec<Vec<String>> = vec![
            vec!["ls".into(), files.home.display().to_string()],
            vec!["ls".into(), files.workspace.display().to_string()],
            vec![
                "cat".into(),
                files.workspace.join("owned.txt").display().to_string(),
            ],
            vec!["cat".into(), files.mcp.display().to_string()],
        ];
        if let Some(environ) = environ {
            argvs.push(vec!["cat".into(), environ.to_string()]);
        }
        argvs
    };
    for (owner, files, environ) in [
        (boxed_uid, &boxed_files, Some(boxed_environ.as_str())),
        (open_uid, &open_files, None),
    ] {
        for argv in checks(files, environ) {
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            assert!(can_as(owner, &argv), "its own uid cannot {argv:?}");
            for other in [boxed_uid, open_uid, 65534] {
                if other != owner {
                    assert!(!can_as(other, &argv), "uid {other} could {argv:?}");
                }
            }
        }
        // Everything made for the agent is its uid's, closed to the others.
        use std::os::unix::fs::MetadataExt;
        for (path, mode) in [
            (&files.workspace, 0o700),
            (&files.home, 0o700),
            (&files.mcp, 0o600),
        ] {
            let meta = std::fs::metadata(path).expect("metadata");
            assert_eq!(
                (meta.uid(), meta.gid(), meta.mode() & 0o777),
                (owner, owner, mode),
                "{}",
                path.display()
            );
        }
    }

    // The sandboxed run ends; after a restart, a follow-up runs as the same uid, which still
    // owns (and writes) the workspace.
    let (status, _) = s.followup(&boxed, json!({"message": "done"})).await;
    assert_eq!(status, 200);
    s.wait_state(&boxed, "SUCCEEDED").await;
    assert_eq!(
        s.stop_with(nix::sys::signal::Signal::SIGTERM, 30)
            .await
            .code(),
        Some(0)
    );
    let mut s = Server::start_with(f.path(), &config(&agent), &[]);
    s.key = key;
    s.wait_ready().await;
    let (status, _) = s.followup(&boxed, json!({"message": "days later"})).await;
    assert_eq!(status, 200);
    common::eventually(
        30,
        "the follow-up's execution to write the workspace",
        || {
            std::fs::read_to_string(boxed_files.workspace.join("owned.txt"))
                .is_ok_and(|t| t.contains("execution 2"))
        },
    )
    .await;
    let run = s
        .wait_run(&boxed, "the follow-up's execution to end", |r| {
            r["state"] == "SUCCEEDED" || r["state"] == "FAILED"
        })
        .await;
    let text = s.transcript_text(&boxed).await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}\n{text}");
    let uids: Vec<u32> = text
        .lines()
        .filter_map(|l| l.strip_prefix("uid="))
        .map(|l| reported_uid(&format!("uid={l}")))
        .collect();
    assert_eq!(uids, vec![boxed_uid, boxed_uid], "{text}");
    let owned = std::fs::read_to_string(boxed_files.workspace.join("owned.txt")).expect("read");
    assert_eq!(owned, "execution 1\nexecution 2\n");
}

/// Tries to make user namespaces of its own, and says what PATH it got.
const NESTING: &str = r#"
echo "path=$PATH"
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "ok:$name"; else echo "no:$name"; fi; }
try unshare-Ur unshare -Ur true
try unshare-user unshare --user true
try unshare-user-net unshare --user --map-root-user --net true
exit 0
"#;

#[tokio::test]
async fn a_sandboxed_agent_makes_no_user_namespace_and_gets_a_fixed_path_not_the_servers() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("not run: the test runs servers as root and as nobody");
        return;
    }
    // Whether this host lets an unprivileged user make a user namespace at all: where it does
    // not, the sandbox has nothing left to refuse, and only the PATH is checked.
    let host_allows = can_as(65534, &["unshare", "-Ur", "true"]);
    // As root (agents of their runs' own uids, no user namespace around them) and as nobody
    // (bwrap makes one user namespace for the sandbox, the agent none inside it).
    for server_uid in [None, Some(65534)] {
        let f = agent_visible_dir();
        let dir = f.path();
        if let Some(uid) = server_uid {
            std::os::unix::fs::chown(dir, Some(uid), Some(uid)).expect("chown");
        }
        let agent = dir.join("nesting.sh");
        script(&agent, NESTING);
        let config = format!(
            "[server]\nbind = \"127.0.0.1:0\"\n\n\
             [[environments]]\nid = \"boxed\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\n\
             [[environments]]\nid = \"open\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\
             sandbox = \"none\"\n\n\
             [[environments]]\nid = \"pathed\"\nharness = \"command\"\ncommand = [\"{agent}\"]\n\
             env = {{ PATH = \"/opt/tools/bin:/usr/bin:/bin\" }}\n",
            agent = agent.display(),
        );
        // The server's own PATH leads somewhere no agent should be pointed.
        let server_path = format!(
            "/root/.server-only/bin:{}",
            std::env::var("PATH").unwrap_or_default()
        );
        let s = Server::start_as(dir, &config, &[("PATH", server_path)], server_uid);
        s.wait_ready().await;
        let mut texts = std::collections::BTreeMap::new();
        for environment in ["boxed", "open", "pathed"] {
            let id = s
                .create(json!({"prompt": "nest", "config": {"environment_id": environment}}))
                .await;
            s.wait_state(&id, "SUCCEEDED").await;
            texts.insert(environment, s.transcript_text(&id).await);
        }
        let who = format!("server uid {server_uid:?}");
        for environment in ["boxed", "open"] {
            assert!(
                texts[environment].contains("path=/usr/local/bin:/usr/bin:/bin\n"),
                "{who}, {environment}: {}",
                texts[environment]
            );
        }
        assert!(
            texts["pathed"].contains("path=/opt/tools/bin:/usr/bin:/bin\n"),
            "{who}: {}",
            texts["pathed"]
        );
        for text in texts.values() {
            assert!(!text.contains(".server-only"), "{who}: {text}");
        }
        for probe in ["unshare-Ur", "unshare-user", "unshare-user-net"] {
            assert!(
                texts["boxed"].contains(&format!("no:{probe}")),
                "{who}: the sandboxed agent could {probe}: {}",
                texts["boxed"]
            );
            // Unconfined, the same probe can tell where the host allows it.
            if host_allows {
                assert!(
                    texts["open"].contains(&format!("ok:{probe}")),
                    "{who}: {}",
                    texts["open"]
                );
            }
        }
    }
}

#[tokio::test]
async fn a_run_of_the_one_agent_user_gets_its_files_back_as_its_own_uid() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("not run: agents get uids of their own only under a root server");
        return;
    }
    let f = agent_visible_dir();
    let agent = f.path().join("agent.sh");
    script(&agent, AGENT);
    // First every run is nobody's (the opt-out, as every run was before uids of their own).
    let shared = config(&agent).replace("agent_uids = ", "agent_user = \"nobody\"\nagent_uids = ");
    let mut s = Server::start_with(f.path(), &shared, &[]);
    s.wait_ready().await;
    let key = s.key.clone();
    let id = s
        .create(json!({"prompt": "work", "config": {"environment_id": "boxed"}}))
        .await;
    s.wait_state(&id, "SUCCEEDED").await;
    let files = Files::of(&s, &id);
    use std::os::unix::fs::MetadataExt;
    let owner = |p: &Path| std::fs::metadata(p).expect("metadata").uid();
    assert_eq!(owner(&files.workspace.join("owned.txt")), 65534);
    assert!(s.transcript_text(&id).await.contains("uid=65534 "));
    s.stop_with(nix::sys::signal::Signal::SIGTERM, 30).await;

    // Then each run has its own uid: the old run's follow-up takes one, and everything of the
    // run becomes that uid's, so the agent writes its workspace and home as before.
    let mut s = Server::start_with(f.path(), &config(&agent), &[]);
    s.key = key;
    s.wait_ready().await;
    let (status, _) = s.followup(&id, json!({"message": "again"})).await;
    assert_eq!(status, 200);
    common::eventually(30, "the follow-up's execution to end", || {
        std::fs::read_to_string(files.workspace.join("owned.txt"))
            .is_ok_and(|t| t.contains("execution 2"))
    })
    .await;
    let run = s
        .wait_run(&id, "the run to end", |r| {
            r["state"] == "SUCCEEDED" || r["state"] == "FAILED"
        })
        .await;
    let text = s.transcript_text(&id).await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}\n{text}");
    let uid = text
        .lines()
        .filter_map(|l| l.strip_prefix("uid="))
        .map(|l| reported_uid(&format!("uid={l}")))
        .next_back()
        .expect("a uid");
    assert!((RANGE.0..=RANGE.1).contains(&uid), "{text}");
    for path in [
        files.workspace.join("owned.txt"),
        files.home.join("note"),
        files.home.clone(),
        files.workspace.clone(),
    ] {
        assert_eq!(owner(&path), uid, "{}", path.display());
    }
    assert_eq!(
        std::fs::read_to_string(files.home.join("note")).expect("read"),
        "execution 1\nexecution 2\n"
    );
}
