//! Containment, proven with a hostile agent: run with the default sandbox, it tries to read the
//! data directory, the configuration, a secret file and another run's workspace, to find and
//! signal the server, to write outside its workspace, to read the server's environment, to
//! reach the network from an environment without it; and it prints the secrets it was given.
//! The same script run unconfined (`sandbox = "none"`) reaches what the sandbox takes away,
//! which shows that each probe can tell.

use crate::common;

use std::collections::BTreeMap;

use common::{agent_visible_dir, script, Server};
use serde_json::json;

/// Each probe prints `ok:<name>` when the action succeeded and `no:<name>` when it failed.
const HOSTILE: &str = r#"
other_ws=${RUNLEDGER_PROMPT%% *}; rest=${RUNLEDGER_PROMPT#* }
server_pid=${rest%% *}; port=${rest#* }
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "ok:$name"; else echo "no:$name"; fi; }
# Any readable file of the data directory that is not the agent's own (its workspace, home, MCP
# file and report file).
try read-data sh -c 'find "$DATA" -type f -readable 2>/dev/null | grep -v -e "^$PWD/" -e "^$HOME/" -e "/mcp.json$" -e "^$RUNLEDGER_REPORT$" | grep -q .'
try read-store sh -c 'cat "$DATA"/sled/conf "$DATA"/sled/db | grep -q .'
try read-transcripts sh -c 'cat "$DATA"/transcripts/*.jsonl | grep -q .'
try read-config grep -q harness "$CONFIG"
try read-secret-file grep -q . "$SECRET_FILE"
try read-other-workspace grep -q . "$other_ws/marker.txt"
try list-server sh -c 'grep -qa -- "--data-di[r]" /proc/[0-9]*/cmdline'
try server-environ grep -qa PATH "/proc/$server_pid/environ"
try signal-server kill -0 "$server_pid"
try write-system touch /usr/hostile
try write-fixture touch "$FIXTURE/hostile"
try write-data sh -c 'echo forged >> "$DATA"/transcripts/forged.jsonl'
try write-workspace touch "$PWD/mine"
try write-tmp touch /tmp/mine
try write-home touch "$HOME/mine"
try server-env test -n "$SERVER_ONLY"
try inherited test "$SHARED" = shared-value
try root test "$(id -u)" = 0
try tcp bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
echo "secret=$API_KEY token=$TOKEN"
# A line longer than one transcript entry (16 KiB) whose cut falls inside the secret.
printf 'x%.0s' $(seq 16370); echo "$API_KEY"
printf '%s' "$API_KEY" | sha256sum
echo "user=$USER home=$HOME"
# Everything it may signal (not when unconfined: every agent of the host, those of other tests
# included, runs as the same user), then fail naming the secret on stderr.
[ "$KILL_ALL" = yes ] && kill -9 -1 2>/dev/null
echo "leaking $TOKEN" >&2
exit 1
"#;

const API_KEY: &str = "sk-ant-0123456789abcdef-very-secret";
const TOKEN: &str = "tok-from-the-servers-environment";

struct Probes(BTreeMap<String, bool>);

impl Probes {
    fn from(text: &str) -> Probes {
        Probes(
            text.lines()
                .filter_map(|l| {
                    l.strip_prefix("ok:")
                        .map(|n| (n.to_string(), true))
                        .or_else(|| l.strip_prefix("no:").map(|n| (n.to_string(), false)))
                })
                .collect(),
        )
    }

    fn did(&self, name: &str) -> bool {
        *self
            .0
            .get(name)
            .unwrap_or_else(|| panic!("probe {name} did not run: {:?}", self.0))
    }
}

#[tokio::test]
async fn a_hostile_agent_reaches_nothing_but_its_own_workspace() {
    let f = agent_visible_dir();
    let dir = f.path();
    let hostile = dir.join("hostile.sh");
    script(&hostile, HOSTILE);
    let marker = dir.join("marker.sh");
    script(&marker, "echo other-run > marker.txt; sleep 1000");
    let secret_file = dir.join("api.key");
    std::fs::write(&secret_file, format!("{API_KEY}\n")).expect("write");
    let data = dir.join("data");
    let env = |kill_all: &str| {
        format!(
        "env = {{ KILL_ALL = {kill_all:?}, DATA = {data:?}, CONFIG = {config:?}, SECRET_FILE = {secret:?}, FIXTURE = {fixture:?} }}\n\
         inherit_env = [\"SHARED\"]\nsecrets = [\"API_KEY\", \"TOKEN\"]\n",
        data = data.display().to_string(),
        config = dir.join("runledger.toml").display().to_string(),
        secret = secret_file.display().to_string(),
        fixture = dir.display().to_string(),
    )
    };
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 1\n\n\
         [secrets]\nAPI_KEY = {{ file = {secret:?} }}\nTOKEN = {{ env = \"SERVER_TOKEN\" }}\n\n\
         [[environments]]\nid = \"hostile\"\nharness = \"command\"\ncommand = [\"{hostile}\"]\n{sandboxed}\n\
         [[environments]]\nid = \"offline\"\nharness = \"command\"\ncommand = [\"{hostile}\"]\nnetwork = false\n{sandboxed}\n\
         [[environments]]\nid = \"unconfined\"\nharness = \"command\"\ncommand = [\"{hostile}\"]\nsandbox = \"none\"\n{unconfined}\n\
         [[environments]]\nid = \"marker\"\nharness = \"command\"\ncommand = [\"{marker}\"]\n",
        secret = secret_file.display().to_string(),
        hostile = hostile.display(),
        marker = marker.display(),
        sandboxed = env("yes"),
        unconfined = env("no"),
    );
    let s = Server::start_with(
        dir,
        &config,
        &[
            ("SERVER_ONLY", "server-only-value".into()),
            ("SHARED", "shared-value".into()),
            ("SERVER_TOKEN", TOKEN.into()),
        ],
    );
    s.wait_ready().await;

    // Another run, still working, with a file in its workspace.
    let other = s
        .create(json!({"prompt": "x", "config": {"environment_id": "marker"}}))
        .await;
    let other_ws = data.join("workspaces").join(&other);
    common::eventually(10, "the other run's marker", || {
        other_ws.join("marker.txt").exists()
    })
    .await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let prompt = format!("{} {} {port}", other_ws.display(), s.pid());

    let mut probes = BTreeMap::new();
    for environment in ["hostile", "offline", "unconfined"] {
        if environment == "unconfined" {
            // Neither sandboxed agent's `kill -9 -1` reached the other run.
            assert_eq!(s.run(&other).await["state"], "INPROGRESS");
        }
        let id = s
            .create(json!({"prompt": prompt, "config": {"environment_id": environment}}))
            .await;
        let run = s.wait_state(&id, "FAILED").await;
        let text = s.transcript_text(&id).await;
        // The secrets were there, and only their names reached the transcript and the log.
        assert!(
            text.contains("secret=[secret:API_KEY] token=[secret:TOKEN]"),
            "{environment}: {text}"
        );
        let digest = {
            use sha2::{Digest, Sha256};
            let d = Sha256::digest(API_KEY.as_bytes());
            d.iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        assert!(text.contains(&digest), "{environment}: {text}");
        let message = run["status_message"]["message"].as_str().expect("message");
        assert!(message.contains("leaking [secret:TOKEN]"), "{message}");
        // Rebuilt as a reader does (a continued entry goes on without a newline), the long
        // line whose entry cut fell inside the secret shows only its name.
        let (_, entries) = s
            .get(&s.key, &format!("/agent/runs/{id}/transcript?limit=10000"))
            .await;
        let mut stdout = String::new();
        for e in entries["entries"].as_array().expect("entries") {
            if e["stream"] == "stdout" {
                stdout.push_str(e["text"].as_str().expect("text"));
                if e["continued"] != true {
                    stdout.push('\n');
                }
            }
        }
        assert!(
            stdout.contains(&format!("{}[secret:API_KEY]\n", "x".repeat(16_370))),
            "{environment}: the long line is not whole, or its secret is not redacted"
        );
        let events = serde_json::to_string(&s.events(&id).await).expect("json");
        for value in [API_KEY, TOKEN] {
            assert!(!stdout.contains(value), "{environment}: {stdout}");
            assert!(!text.contains(value), "{environment}: {text}");
            assert!(!run.to_string().contains(value), "{run}");
            assert!(!events.contains(value), "{events}");
        }
        probes.insert(environment, Probes::from(&text));
    }

    let sandboxed = &probes["hostile"];
    for denied in [
        "read-data",
        "read-store",
        "read-transcripts",
        "read-config",
        "read-secret-file",
        "read-other-workspace",
        "list-server",
        "server-environ",
        "signal-server",
        "write-system",
        "write-fixture",
        "write-data",
        "server-env",
        "root",
    ] {
        assert!(!sandboxed.did(denied), "the sandboxed agent could {denied}");
    }
    for allowed in [
        "write-workspace",
        "write-tmp",
        "write-home",
        "inherited",
        "tcp",
    ] {
        assert!(
            sandboxed.did(allowed),
            "the sandboxed agent could not {allowed}"
        );
    }
    let offline = &probes["offline"];
    assert!(
        !offline.did("tcp"),
        "network = false still reached 127.0.0.1"
    );
    assert!(offline.did("write-workspace"));
    // The same probes detect what an unconfined agent (of a root server: the agent user, with a
    // clean environment) can still reach.
    let unconfined = &probes["unconfined"];
    assert!(unconfined.did("list-server") && unconfined.did("tcp"));
    assert!(!unconfined.did("server-env") && unconfined.did("inherited"));
    // Even unconfined, the agent user cannot read the store or the transcripts.
    assert!(!unconfined.did("read-store") && !unconfined.did("read-transcripts"));

    // The server serves on.
    let (status, _) = s.get(&s.key, "/agent/runs?limit=1").await;
    assert_eq!(status, 200);
    let (status, environments) = s.get(&s.key, "/agent/environments").await;
    assert_eq!(status, 200);
    let metrics = s.metrics().await;
    for value in [API_KEY, TOKEN] {
        assert!(!environments.to_string().contains(value));
        assert!(!metrics.contains(value));
        assert!(!s.log_text().contains(value));
    }
    assert!(
        s.log_text().contains("sandbox = \\\"none\\\"") || s.log_text().contains("unconfined"),
        "no warning for the unconfined environment:\n{}",
        s.log_text()
    );
    drop(listener);
}

#[test]
fn a_missing_secret_stops_start_up_naming_file_line_and_field() {
    let f = agent_visible_dir();
    let path = f.path().join("runledger.toml");
    let data = f.path().join("data").display().to_string();
    for (text, want) in [
        (
            "[server]\nbind = \"127.0.0.1:0\"\n\n[secrets]\nA = { file = \"/nonexistent/a.key\" }\n",
            "line 5: secrets.A: cannot read /nonexistent/a.key",
        ),
        (
            "[secrets]\nB = { env = \"RUNLEDGER_TEST_UNSET_VARIABLE\" }\n",
            "line 2: secrets.B: the server's environment variable RUNLEDGER_TEST_UNSET_VARIABLE is not set",
        ),
        (
            "[[environments]]\nid = \"x\"\nharness = \"command\"\ncommand = [\"true\"]\nsecrets = [\"NOPE\"]\n",
            "line 5: environments[0].secrets: \"NOPE\" is not defined in [secrets]",
        ),
    ] {
        std::fs::write(&path, text).expect("write");
        let config = path.display().to_string();
        let (ok, _, err) = common::cli(&["serve", "--config", &config, "--data-dir", &data], &[]);
        assert!(!ok && err.contains(&config) && err.contains(want), "{text}: {err}");
    }
}

#[test]
fn without_bwrap_start_up_names_the_environment_and_both_ways_out() {
    let f = agent_visible_dir();
    let path = f.path().join("runledger.toml");
    std::fs::write(
        &path,
        "[server]\nbind = \"127.0.0.1:0\"\n\n[[environments]]\nid = \"agents\"\nharness = \"command\"\ncommand = [\"true\"]\n",
    )
    .expect("write");
    let config = path.display().to_string();
    let data = f.path().join("data").display().to_string();
    // A PATH without bwrap on it (setpriv stays: a root server needs it first).
    let empty = f.path().join("empty-bin");
    std::fs::create_dir(&empty).expect("mkdir");
    if let Some(setpriv) = ["/usr/bin/setpriv", "/bin/setpriv"]
        .iter()
        .find(|p| std::path::Path::new(p).exists())
    {
        std::os::unix::fs::symlink(setpriv, empty.join("setpriv")).expect("symlink");
    }
    let (ok, _, err) = common::cli(
        &["serve", "--config", &config, "--data-dir", &data],
        &[("PATH", &empty.display().to_string())],
    );
    assert!(!ok);
    assert!(
        err.contains("environment \"agents\"")
            && err.contains("apt-get install bubblewrap")
            && err.contains("sandbox = \"none\""),
        "{err}"
    );
}

/// Why cgroup limits cannot be tested here, if they cannot: the server's own cgroup in the
/// memory, pids and cpu hierarchies must accept a child.
fn cgroups_unavailable() -> Option<String> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for controller in ["memory", "pids", "cpu"] {
        let v1 = own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
            names
                .split(',')
                .any(|n| n == controller)
                .then(|| format!("/sys/fs/cgroup/{controller}{path}"))
        });
        let dir = match v1 {
            Some(dir) => dir,
            None => {
                let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
                format!("/sys/fs/cgroup{path}")
            }
        };
        let probe =
            std::path::Path::new(&dir).join(format!("runledger-probe-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&probe) {
            return Some(format!(
                "cannot create a {controller} cgroup under {dir}: {e}"
            ));
        }
        let _ = std::fs::remove_dir(&probe);
    }
    None
}

#[tokio::test]
async fn limits_stop_a_fork_bomb_and_a_large_allocation_while_the_server_serves() {
    if let Some(why) = cgroups_unavailable() {
        eprintln!("not run: this host does not let the test create cgroups ({why})");
        return;
    }
    let f = agent_visible_dir();
    let dir = f.path();
    let bomb = dir.join("bomb.sh");
    // It bombs again whenever its processes die down, until max_runtime_secs stops it.
    script(
        &bomb,
        "bomb() { bomb | bomb & }; while :; do bomb 2>/dev/null; sleep 0.2; done",
    );
    let hog = dir.join("hog.sh");
    // `tail` keeps everything after the last newline, and /dev/zero has none: 2 GB of memory.
    script(
        &hog,
        "head -c 2G /dev/zero | tail > /dev/null; echo \"pipeline ended with $?\"; exit 1",
    );
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 1\n\n\
         [[environments]]\nid = \"bomb\"\nharness = \"command\"\ncommand = [\"{bomb}\"]\npids_max = 64\nmax_runtime_secs = 4\ncpu_percent = 50\n\n\
         [[environments]]\nid = \"hog\"\nharness = \"command\"\ncommand = [\"{hog}\"]\nmemory_mb = 64\n",
        bomb = bomb.display(),
        hog = hog.display(),
    );
    let s = Server::start_with(dir, &config, &[]);
    s.wait_ready().await;

    let id = s
        .create(json!({"prompt": "x", "config": {"environment_id": "bomb"}}))
        .await;
    s.wait_state(&id, "INPROGRESS").await;
    common::eventually(10, "the bomb to fill its cgroup", || {
        common::processes_of(&id).len() >= 60
    })
    .await;
    // The bomb is held at its limit while the server answers.
    for _ in 0..10 {
        let count = common::processes_of(&id).len();
        assert!(count <= 64, "{count} processes");
        let (status, _) = s.get(&s.key, "/agent/runs?limit=1").await;
        assert_eq!(status, 200);
    }
    let run = s.wait_state(&id, "FAILED").await;
    let message = run["status_message"]["message"].as_str().expect("message");
    assert!(message.contains("pids_max limit (64"), "{message}");
    common::eventually(10, "the bomb to be gone", || {
        common::processes_of(&id).is_empty()
    })
    .await;

    let id = s
        .create(json!({"prompt": "x", "config": {"environment_id": "hog"}}))
        .await;
    let run = s.wait_state(&id, "FAILED").await;
    let message = run["status_message"]["message"].as_str().expect("message");
    assert!(message.contains("memory_mb limit (64 MiB)"), "{message}");
    let (_, t) = s
        .get(&s.key, &format!("/agent/runs/{id}/transcript?limit=100"))
        .await;
    assert!(t.to_string().contains("memory_mb limit (64 MiB)"), "{t}");
    let (status, _) = s.get(&s.key, "/agent/runs?limit=1").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_server_that_is_not_root_contains_its_agents_the_same_way() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!(
            "not run: the other tests of this file already run the server as a non-root user"
        );
        return;
    }
    // The server runs as nobody; bwrap then makes a user namespace of its own for each agent.
    let f = agent_visible_dir();
    let dir = f.path();
    std::os::unix::fs::chown(dir, Some(65534), Some(65534)).expect("chown");
    let hostile = dir.join("hostile.sh");
    script(&hostile, HOSTILE);
    let secret_file = dir.join("api.key");
    std::fs::write(&secret_file, format!("{API_KEY}\n")).expect("write");
    let data = dir.join("data");
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n\
         [secrets]\nAPI_KEY = {{ file = {secret:?} }}\nTOKEN = {{ env = \"SERVER_TOKEN\" }}\n\n\
         [[environments]]\nid = \"hostile\"\nharness = \"command\"\ncommand = [\"{hostile}\"]\n\
         secrets = [\"API_KEY\", \"TOKEN\"]\ninherit_env = [\"SHARED\"]\n\
         env = {{ KILL_ALL = \"yes\", DATA = {data:?}, CONFIG = {config:?}, SECRET_FILE = {secret:?}, FIXTURE = {fixture:?} }}\n",
        secret = secret_file.display().to_string(),
        hostile = hostile.display(),
        data = data.display().to_string(),
        config = dir.join("runledger.toml").display().to_string(),
        fixture = dir.display().to_string(),
    );
    let s = Server::start_as(
        dir,
        &config,
        &[
            ("SERVER_ONLY", "server-only-value".into()),
            ("SHARED", "shared-value".into()),
            ("SERVER_TOKEN", TOKEN.into()),
        ],
        Some(65534),
    );
    s.wait_ready().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let prompt = format!("{}/none {} {port}", data.display(), s.pid());
    let id = s
        .create(json!({"prompt": prompt, "config": {"environment_id": "hostile"}}))
        .await;
    s.wait_state(&id, "FAILED").await;
    let text = s.transcript_text(&id).await;
    assert!(
        text.contains("secret=[secret:API_KEY] token=[secret:TOKEN]") && !text.contains(API_KEY),
        "{text}"
    );
    let probes = Probes::from(&text);
    for denied in [
        "read-data",
        "read-store",
        "read-transcripts",
        "read-config",
        "read-secret-file",
        "list-server",
        "server-environ",
        "signal-server",
        "write-system",
        "write-fixture",
        "write-data",
        "server-env",
    ] {
        assert!(
            !probes.did(denied),
            "the agent of a non-root server could {denied}"
        );
    }
    for allowed in [
        "write-workspace",
        "write-tmp",
        "write-home",
        "inherited",
        "tcp",
    ] {
        assert!(
            probes.did(allowed),
            "the agent of a non-root server could not {allowed}"
        );
    }
    let (status, _) = s.get(&s.key, "/agent/runs?limit=1").await;
    assert_eq!(status, 200);
    drop(listener);
}

/// An agent of a root server runs as the agent user, yet reaches its workspace, home and MCP
/// file by their absolute paths wherever the data directory is: under the host's `/tmp` (which
/// the sandbox replaces with a private one) inside a directory private to root, and under a
/// private directory outside `/tmp` (as a root server started from `/root` has).
#[tokio::test]
async fn an_agent_reaches_its_own_paths_wherever_the_data_directory_is() {
    use std::os::unix::fs::PermissionsExt;
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: agents run as the server's own user when it is not root");
        return;
    }
    let f = agent_visible_dir();
    let agent = f.path().join("own-paths.sh");
    script(
        &agent,
        "set -e\nls \"$HOME\" >/dev/null\ncat \"$RUNLEDGER_MCP_CONFIG\"\ntouch \"$HOME/x\" ./y\necho reached",
    );
    let under_tmp = tempfile::tempdir().expect("tempdir");
    let private = agent_visible_dir();
    let closed = private.path().join("closed");
    std::fs::create_dir(&closed).expect("mkdir");
    for parent in [under_tmp.path(), closed.as_path()] {
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let s = Server::start_in(
            parent,
            &format!(
                "[server]\nbind = \"127.0.0.1:0\"\n\n[[environments]]\nid = \"own\"\n\
                 harness = \"command\"\ncommand = [\"{}\"]\n",
                agent.display()
            ),
        );
        s.wait_ready().await;
        let id = s.create(json!({"prompt": "reach your paths"})).await;
        let run = s.wait_state(&id, "SUCCEEDED").await;
        let text = s.transcript_text(&id).await;
        assert!(
            text.contains("reached"),
            "{}: {run}\n{text}",
            parent.display()
        );
    }
}
