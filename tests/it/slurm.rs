//! Execution on Slurm against a real cluster: Debian's slurmctld, slurmd and munge, a
//! controller and three nodes on loopback (`tests/slurm/cluster.sh`), each test with a cluster
//! of its own, torn down afterwards. The real binary runs its agents as Slurm job steps in the
//! default sandbox (bubblewrap on the node, as the agent user). The tests share the host's
//! cgroup tree for node names `n1`..`n3`, so nextest runs them one at a time
//! (`.config/nextest.toml`). `RUNLEDGER_SLURM_LONG=1` runs the long form (200 runs instead of
//! 50).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{agent_visible_dir, processes_of, script, Server};
use serde_json::{json, Value};

/// A cluster of `tests/slurm/cluster.sh`, stopped when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    conf: String,
}

impl Cluster {
    fn start(nodes: usize) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("runledger-slurm-")
            .tempdir()
            .expect("tempdir");
        let out = Command::new("bash")
            .arg(script_path())
            .arg("start")
            .arg(dir.path())
            .arg(nodes.to_string())
            .output()
            .expect("run cluster.sh");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "the test cluster did not start: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let conf = stdout
            .lines()
            .find_map(|l| l.strip_prefix("SLURM_CONF="))
            .expect("SLURM_CONF")
            .to_string();
        Cluster { dir, conf }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![("SLURM_CONF", self.conf.clone())]
    }

    /// Runs a Slurm command against this cluster; its stdout.
    fn run(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new(program)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .output()
            .expect("run a Slurm command");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Every job the controller holds: `(id, name, state)`.
    fn jobs(&self) -> Vec<(u64, String, String)> {
        self.run("squeue", &["-h", "-o", "%i|%j|%T"])
            .lines()
            .filter_map(|l| {
                let mut f = l.split('|');
                Some((
                    f.next()?.trim().parse().ok()?,
                    f.next()?.to_string(),
                    f.next()?.trim().to_string(),
                ))
            })
            .collect()
    }

    fn node_state(&self, node: &str) -> String {
        self.run("sinfo", &["-h", "-N", "-n", node, "-o", "%T"])
            .trim()
            .to_string()
    }

    /// Kills a node as if its machine died: its slurmd and every step running on it.
    fn kill_node(&self, node: &str) {
        let out = Command::new("bash")
            .arg(script_path())
            .args(["kill-node"])
            .arg(self.dir.path())
            .arg(node)
            .output()
            .expect("cluster.sh kill-node");
        assert!(
            out.status.success(),
            "kill-node: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Everything the cluster's daemons wrote: state, spool and logs.
    fn files_contain(&self, needle: &str) -> Vec<PathBuf> {
        walk(self.dir.path())
            .into_iter()
            .filter(|path| {
                !path.is_dir()
                    && std::fs::read(path)
                        .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script_path())
            .arg("stop")
            .arg(self.dir.path())
            .output();
    }
}

fn script_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/slurm/cluster.sh")
}

/// An environment on Slurm: the agent is `agent` (a path the agent user can read), its
/// workspaces under `workspaces`.
fn environment(id: &str, agent: &Path, workspaces: &Path, extra: &str, slurm: &str) -> String {
    format!(
        r#"
[[environments]]
id = "{id}"
harness = "command"
command = ["{agent}"]
workspace_root = "{workspaces}"
runs_on = "slurm"
max_concurrent = 64
max_runtime_secs = 120
memory_mb = 256
secrets = ["DEPLOY_TOKEN"]
{extra}
[environments.slurm]
partition = "agents"
{slurm}
"#,
        agent = agent.display(),
        workspaces = workspaces.display()
    )
}

const SECRET: &str = "tok-7f3e9a1c5b2d4e6f8a0b";

/// The server's configuration: `[secrets]` and the environments.
fn config(dir: &Path, environments: &str) -> String {
    let secret = dir.join("deploy-token");
    std::fs::write(&secret, SECRET).expect("write the secret");
    format!(
        r#"
[server]
bind = "127.0.0.1:0"
stop_grace_secs = 3

[secrets]
DEPLOY_TOKEN = {{ file = "{}" }}
{environments}"#,
        secret.display()
    )
}

/// A server on `dir` whose configuration holds `environments`, talking to `cluster`.
fn serve(cluster: &Cluster, dir: &Path, environments: &str) -> Server {
    Server::start_with(dir, &config(dir, environments), &cluster.env())
}

/// The node a run's execution `execution` was placed on, from its `Started` event.
async fn node_of(server: &Server, id: &str, execution: u64) -> String {
    let events = server.events(id).await;
    let started = events
        .iter()
        .find(|e| e["type"] == "Started" && e["data"]["execution"] == execution)
        .unwrap_or_else(|| panic!("no Started {execution} in {events:?}"));
    assert_eq!(
        started["data"]["placement"]["scheduler"], "slurm",
        "{started}"
    );
    assert!(
        started["data"]["placement"]["job_id"].as_u64().is_some(),
        "{started}"
    );
    started["data"]["placement"]["node"]
        .as_str()
        .expect("node")
        .to_string()
}

async fn create(server: &Server, env: &str, prompt: &str) -> String {
    server
        .create(json!({"prompt": prompt, "config": {"environment_id": env}}))
        .await
}

/// Polls a run until `pred` holds, for up to `secs`.
async fn wait_for(server: &Server, id: &str, secs: u64, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let run = server.run(id).await;
        if pred(&run) {
            return run;
        }
        assert!(Instant::now() < deadline, "run {id} stuck: {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn terminal(run: &Value) -> bool {
    matches!(
        run["state"].as_str(),
        Some("SUCCEEDED" | "FAILED" | "CANCELLED")
    )
}

#[actix_rt::test]
async fn runs_spread_over_the_nodes_all_succeed_with_their_prompt_and_secret_and_nothing_leaks() {
    let cluster = Cluster::start(3);
    let agents = agent_visible_dir();
    let agent = agents.path().join("agent.sh");
    // Proves the prompt (60 KB for some runs) and the secret arrived whole, and works a while.
    script(
        &agent,
        r#"printf 'prompt %s %s\n' "${#RUNLEDGER_PROMPT}" "$(printf %s "$RUNLEDGER_PROMPT" | sha256sum | cut -c1-16)"
[ "$DEPLOY_TOKEN" = "tok-7f3e9a1c5b2d4e6f8a0b" ] && echo "secret ok"
env | grep -c '^SLURM' | sed 's/^/slurm variables /'
echo "beside me: $(ls -A .. | sort | tr '\n' ' ')"
echo "files: $(ls -A ../.runledger-files | tr '\n' ' ')"
echo "token $DEPLOY_TOKEN"
sleep 1
echo done"#,
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let workspaces = tmp.path().join("ws");
    let server = serve(
        &cluster,
        tmp.path(),
        &environment("hpc", &agent, &workspaces, "", ""),
    );
    let long = std::env::var("RUNLEDGER_SLURM_LONG").is_ok();
    let n = if long { 200 } else { 50 };
    let big = "é€ prompt line with some words\n".repeat(60 * 1024 / 34);
    let mut runs = Vec::new();
    for i in 0..n {
        let prompt = if i % 10 == 0 {
            big.clone()
        } else {
            format!("task {i}")
        };
        runs.push((create(&server, "hpc", &prompt).await, prompt));
    }
    let mut nodes = std::collections::BTreeSet::new();
    for (id, prompt) in &runs {
        let run = wait_for(&server, id, 300, terminal).await;
        assert_eq!(run["state"], "SUCCEEDED", "{run}");
        let text = server.transcript_text(id).await;
        use sha2::{Digest, Sha256};
        let digest: String = Sha256::digest(prompt.as_bytes())
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(
            text.contains(&format!("prompt {} {digest}", prompt.chars().count())),
            "{text}"
        );
        assert!(text.contains("secret ok"), "{text}");
        // Other runs' workspaces and files on the shared filesystem are out of its sight.
        assert!(
            text.contains(&format!("beside me: .runledger-files {id} \n"))
                && text.contains("cannot open directory '../.runledger-files': Permission denied"),
            "{text}"
        );
        // The transcript says where the execution runs.
        assert!(text.contains("execution 1 starts (Slurm job "), "{text}");
        // Slurm's own variables stay out of the agent's environment, and the secret is
        // redacted from the transcript as on the server's host.
        assert!(text.contains("slurm variables 0"), "{text}");
        assert!(!text.contains(SECRET), "{text}");
        nodes.insert(node_of(&server, id, 1).await);
    }
    assert_eq!(
        nodes.into_iter().collect::<Vec<_>>(),
        ["n1", "n2", "n3"],
        "the runs did not spread over the nodes"
    );
    // Every allocation was given back, and nothing of the secret reached Slurm's files, logs
    // or state, nor any step file left on the shared filesystem.
    common::eventually(20, "every job released", || cluster.jobs().is_empty()).await;
    assert_eq!(cluster.files_contain(SECRET), Vec::<PathBuf>::new());
    let leftovers: Vec<_> = walk(&workspaces)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("step-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Every path under `dir`, directories included.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out
}

#[actix_rt::test]
async fn a_followup_reaches_a_slurm_agent_and_cancel_stops_its_whole_tree_on_the_node() {
    let cluster = Cluster::start(3);
    let agents = agent_visible_dir();
    let agent = agents.path().join("agent.sh");
    // Leaves a background child, one that left the session and one deaf to SIGTERM behind,
    // then echoes its input.
    script(
        &agent,
        r#"sleep 1000 &
setsid sleep 1001 &
(trap '' TERM; exec sleep 1002) &
echo ready
while read -r line; do echo "got: $line"; done"#,
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = serve(
        &cluster,
        tmp.path(),
        &environment("hpc", &agent, &tmp.path().join("ws"), "", ""),
    );
    let id = create(&server, "hpc", "wait for input").await;
    wait_for(&server, &id, 60, |r| r["state"] == "INPROGRESS").await;
    until(30, "the agent's ready", || async {
        server.transcript_text(&id).await.contains("ready")
    })
    .await;
    let (status, body) = server
        .followup(&id, json!({"message": "a follow-up over Slurm"}))
        .await;
    assert_eq!(status, 200, "{body}");
    until(30, "the follow-up reached the agent", || async {
        let text = server.transcript_text(&id).await;
        text.contains("got: ") && text.contains("a follow-up over Slurm")
    })
    .await;
    let node = node_of(&server, &id, 1).await;
    assert!(node.starts_with('n'), "{node}");
    // The agent, its three children, the sandbox around them.
    assert!(processes_of(&id).len() >= 4, "{:?}", processes_of(&id));
    let (status, body) = server
        .post(&server.key, &format!("/agent/runs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    // The grace (3 s) and Slurm's round trips.
    common::eventually(15, "the agent's tree gone from the node", || {
        processes_of(&id).is_empty()
    })
    .await;
    assert_eq!(server.run(&id).await["state"], "CANCELLED");
    common::eventually(15, "the job released", || cluster.jobs().is_empty()).await;
}

/// Polls `f` until it holds, or panics with `what` after `secs` seconds.
async fn until<F, Fut>(secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An agent that works until the file `release` appears next to it, and holds an exclusive
/// lock on a file of its run while it works: a second execution of the same run working at the
/// same time would find the lock taken and say so.
fn waiting_agent(dir: &Path) -> PathBuf {
    let agent = dir.join("agent.sh");
    script(
        &agent,
        &format!(
            r#"exec 9>>.run.lock
if ! flock -n 9; then echo "TWO EXECUTIONS AT ONCE"; exit 3; fi
echo "execution $RUNLEDGER_EXECUTION working"
while [ ! -e {release} ]; do sleep 0.2; done
echo "execution $RUNLEDGER_EXECUTION done""#,
            release = dir.join("release").display()
        ),
    );
    agent
}

#[actix_rt::test]
async fn a_dead_node_ends_its_runs_as_lost_or_requeues_them_and_the_other_nodes_finish() {
    let cluster = Cluster::start(3);
    let agents = agent_visible_dir();
    let agent = waiting_agent(agents.path());
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    let server = serve(
        &cluster,
        tmp.path(),
        &format!(
            "{}{}",
            environment("fail", &agent, &ws, "", ""),
            environment("requeue", &agent, &ws, "on_node_failure = \"requeue\"", "")
        ),
    );
    // Two slots per node: six runs fill the cluster, so each node has some of each.
    let mut runs = Vec::new();
    for i in 0..6 {
        let env = if i % 2 == 0 { "fail" } else { "requeue" };
        runs.push((create(&server, env, "work").await, env));
    }
    let mut placed = Vec::new();
    for (id, env) in &runs {
        wait_for(&server, id, 60, |r| r["state"] == "INPROGRESS").await;
        until(30, "the agent working", || async {
            server.transcript_text(id).await.contains("working")
        })
        .await;
        placed.push((id.clone(), *env, node_of(&server, id, 1).await));
    }
    let victim = placed[0].2.clone();
    let on_victim: Vec<_> = placed.iter().filter(|p| p.2 == victim).cloned().collect();
    let elsewhere: Vec<_> = placed.iter().filter(|p| p.2 != victim).cloned().collect();
    assert!(!elsewhere.is_empty(), "{placed:?}");
    let killed = Instant::now();
    cluster.kill_node(&victim);
    // Slurm's node timeout (SlurmdTimeout) plus 5 s.
    let timeout: u64 = cluster
        .run("scontrol", &["show", "config"])
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == "SlurmdTimeout").then(|| v.trim().split(' ').next()?.parse().ok())?
        })
        .expect("SlurmdTimeout");
    for (id, env, _) in &on_victim {
        // What records the loss: the run's `Failed`, or the `Lost` that queues it again.
        let kind = if *env == "fail" { "Failed" } else { "Lost" };
        let deadline = killed + Duration::from_secs(timeout + 5);
        let event = loop {
            let events = server.events(id).await;
            if let Some(e) = events.iter().find(|e| e["type"] == kind) {
                break e.clone();
            }
            assert!(
                Instant::now() < deadline,
                "run {id} ({env}) not ended within {timeout} + 5 s of its node's death: {events:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let status = &event["data"]["status_message"];
        assert_eq!(status["error_code"], "internal_error", "{event}");
        assert_eq!(status["retryable"], true, "{event}");
        assert!(
            status["message"]
                .as_str()
                .is_some_and(|m| m.contains(&victim) && m.contains("failed")),
            "{event}"
        );
    }
    assert!(
        cluster.node_state(&victim).starts_with("down"),
        "{}",
        cluster.node_state(&victim)
    );
    // The other nodes' runs, and the requeued ones (on a live node now), finish.
    std::fs::write(agents.path().join("release"), "").expect("release");
    for (id, env, node) in &placed {
        let run = wait_for(&server, id, 90, terminal).await;
        let events = server.events(id).await;
        if *node != victim {
            assert_eq!(run["state"], "SUCCEEDED", "{run}");
        } else if *env == "fail" {
            assert_eq!(run["state"], "FAILED", "{run}");
            assert!(
                !events.iter().any(|e| e["type"] == "Succeeded"),
                "{events:?}"
            );
        } else {
            assert_eq!(run["state"], "SUCCEEDED", "{run}");
            assert!(events.iter().any(|e| e["type"] == "Lost"), "{events:?}");
            let second = node_of(&server, id, 2).await;
            assert_ne!(second, victim);
            let text = server.transcript_text(id).await;
            assert!(text.contains("execution 2 done"), "{text}");
            assert!(!text.contains("TWO EXECUTIONS AT ONCE"), "{text}");
        }
    }
}

#[actix_rt::test]
async fn a_server_killed_and_restarted_leaves_no_orphaned_job_and_runs_nothing_twice() {
    let cluster = Cluster::start(3);
    let agents = agent_visible_dir();
    let agent = waiting_agent(agents.path());
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    let config = config(
        tmp.path(),
        &format!(
            "{}{}",
            environment("fail", &agent, &ws, "", ""),
            environment("requeue", &agent, &ws, "on_node_failure = \"requeue\"", "")
        ),
    );
    let mut server = Server::start_with(tmp.path(), &config, &cluster.env());
    let key = server.key.clone();
    let mut runs = Vec::new();
    for i in 0..4 {
        let env = if i % 2 == 0 { "fail" } else { "requeue" };
        runs.push((create(&server, env, "work").await, env));
    }
    // Beyond the six slots of the cluster: one run stays pending in Slurm, still QUEUED.
    let mut pending = Vec::new();
    for _ in 0..3 {
        pending.push(create(&server, "fail", "work").await);
    }
    let mut jobs = Vec::new();
    for (id, _) in &runs {
        wait_for(&server, id, 60, |r| r["state"] == "INPROGRESS").await;
        until(30, "the agent working", || async {
            server.transcript_text(id).await.contains("working")
        })
        .await;
        let events = server.events(id).await;
        let started = events
            .iter()
            .find(|e| e["type"] == "Started")
            .expect("started");
        jobs.push(
            started["data"]["placement"]["job_id"]
                .as_u64()
                .expect("job"),
        );
    }
    // Those of them still waiting in Slurm (one at least: the cluster has six slots).
    let mut waiting = Vec::new();
    for id in &pending {
        if server.run(id).await["state"] == "QUEUED" {
            waiting.push(id.clone());
        }
    }
    assert!(!waiting.is_empty());
    server.kill();
    // Slurm still runs them: nothing reads them now.
    let held: Vec<u64> = cluster.jobs().iter().map(|j| j.0).collect();
    assert!(jobs.iter().all(|j| held.contains(j)), "{jobs:?} {held:?}");

    let mut server = Server::start_with(tmp.path(), &config, &cluster.env());
    server.key = key;
    server.wait_ready().await;
    // The earlier executions' jobs are gone, and their agents with them.
    let now: Vec<u64> = cluster.jobs().iter().map(|j| j.0).collect();
    assert!(jobs.iter().all(|j| !now.contains(j)), "{jobs:?} {now:?}");
    for (id, env) in &runs {
        let processes: Vec<i32> = processes_of(id)
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|e| e.split(|b| *b == 0).any(|v| v == b"RUNLEDGER_EXECUTION=1"))
            })
            .collect();
        assert!(
            processes.is_empty(),
            "execution 1 of {id} ({env}) lives on: {processes:?}"
        );
    }
    std::fs::write(agents.path().join("release"), "").expect("release");
    for (id, env) in &runs {
        let run = wait_for(&server, id, 90, terminal).await;
        let text = server.transcript_text(id).await;
        assert!(!text.contains("TWO EXECUTIONS AT ONCE"), "{text}");
        if *env == "fail" {
            assert_eq!(run["state"], "FAILED", "{run}");
            assert_eq!(run["status_message"]["error_code"], "internal_error");
            assert!(!text.contains("execution 2"), "{text}");
        } else {
            assert_eq!(run["state"], "SUCCEEDED", "{run}");
            assert!(text.contains("execution 2 done"), "{text}");
            assert!(!text.contains("execution 1 done"), "{text}");
            let events = server.events(id).await;
            assert!(events.iter().any(|e| e["type"] == "Lost"), "{events:?}");
        }
    }
    // The runs that were waiting in Slurm are allocated anew and run once.
    for id in &waiting {
        let run = wait_for(&server, id, 90, terminal).await;
        assert_eq!(run["state"], "SUCCEEDED", "{run}");
        let events = server.events(id).await;
        assert_eq!(
            events.iter().filter(|e| e["type"] == "Started").count(),
            1,
            "{events:?}"
        );
    }
    until(20, "every job released", || async {
        cluster.jobs().is_empty()
    })
    .await;
    // The audit trail names the job and node of every execution, and replays as recorded.
    server
        .stop_with(nix::sys::signal::Signal::SIGTERM, 30)
        .await;
    let data = server.data_dir.to_string_lossy().into_owned();
    let (id, _) = &runs[1];
    let (ok, out, err) = common::cli(&["--data-dir", &data, "events", id], &[]);
    assert!(ok, "{err}");
    let started: Vec<&str> = out.lines().filter(|l| l.contains("Started")).collect();
    assert_eq!(started.len(), 2, "{out}");
    assert!(
        started
            .iter()
            .all(|l| l.contains("\"scheduler\":\"slurm\"") && l.contains("\"node\":\"n")),
        "{out}"
    );
    assert!(out.lines().any(|l| l.contains("Lost")), "{out}");
    let (ok, out, err) = common::cli(&["--data-dir", &data, "replay", "--verify"], &[]);
    assert!(ok, "{out}{err}");
}

#[actix_rt::test]
async fn a_constraint_is_honoured_and_slurm_limits_fail_runs_naming_them() {
    let cluster = Cluster::start(3);
    let agents = agent_visible_dir();
    let agent = agents.path().join("agent.sh");
    script(&agent, "echo on the node; sleep 0.5");
    let hungry = agents.path().join("hungry.sh");
    // Takes far more memory than its environment's 64 MB.
    script(
        &hungry,
        "python3 -c 'b = bytearray(400 * 1024 * 1024); print(len(b))'; echo after",
    );
    let slow = agents.path().join("slow.sh");
    script(&slow, "sleep 1000 &\nsetsid sleep 1001 &\nsleep 1002");
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    let server = serve(
        &cluster,
        tmp.path(),
        &format!(
            "{}{}{}{}",
            environment("zone-a", &agent, &ws, "", "constraint = \"zone-a\""),
            environment("nowhere", &agent, &ws, "", "constraint = \"zone-x\""),
            environment("hungry", &hungry, &ws, "", "")
                .replace("memory_mb = 256", "memory_mb = 64"),
            environment("slow", &slow, &ws, "", "")
                .replace("max_runtime_secs = 120", "max_runtime_secs = 3")
        ),
    );
    let mut runs = Vec::new();
    for _ in 0..8 {
        runs.push(create(&server, "zone-a", "here").await);
    }
    for id in &runs {
        let run = wait_for(&server, id, 120, terminal).await;
        assert_eq!(run["state"], "SUCCEEDED", "{run}");
        assert_eq!(node_of(&server, id, 1).await, "n1");
    }
    // A constraint no node has: Slurm refuses the allocation, and the run fails saying so.
    let id = create(&server, "nowhere", "nowhere").await;
    let run = wait_for(&server, &id, 60, terminal).await;
    assert_eq!(run["state"], "FAILED", "{run}");
    assert!(
        run["status_message"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Slurm did not allocate")),
        "{run}"
    );
    // The time limit stops the agent's whole tree on its node and fails the run.
    let id = create(&server, "slow", "too long").await;
    let run = wait_for(&server, &id, 60, terminal).await;
    assert_eq!(run["state"], "FAILED", "{run}");
    assert!(
        run["status_message"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_runtime_secs")),
        "{run}"
    );
    until(15, "the slow agent's tree gone", || async {
        processes_of(&id).is_empty()
    })
    .await;
    // Killed by Slurm's cgroup for memory: FAILED, naming the limit.
    let id = create(&server, "hungry", "eat").await;
    let run = wait_for(&server, &id, 60, terminal).await;
    assert_eq!(run["state"], "FAILED", "{run}");
    assert!(
        run["status_message"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("memory_mb = 64")),
        "{run}"
    );
}

#[actix_rt::test]
async fn start_up_stops_with_a_clear_message_without_slurm_or_its_partition() {
    let cluster = Cluster::start(1);
    let agents = agent_visible_dir();
    let agent = agents.path().join("agent.sh");
    script(&agent, "true");
    let tmp = tempfile::tempdir().expect("tempdir");
    let config_path = tmp.path().join("runledger.toml");
    std::fs::write(
        &config_path,
        config(
            tmp.path(),
            &environment("hpc", &agent, &tmp.path().join("ws"), "", "")
                .replace("partition = \"agents\"", "partition = \"gpus\""),
        ),
    )
    .expect("config");
    let out = Command::new(common::BIN)
        .args(["serve", "--config"])
        .arg(&config_path)
        .arg("--data-dir")
        .arg(tmp.path().join("data"))
        .env("SLURM_CONF", &cluster.conf)
        .output()
        .expect("serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("\"hpc\"") && stderr.contains("partition \"gpus\""),
        "{stderr}"
    );
    // No Slurm commands at all: a PATH with only the sandbox's programs.
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).expect("bin");
    for program in ["bwrap", "setpriv"] {
        let found = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
            .iter()
            .map(|d| Path::new(d).join(program))
            .find(|p| p.exists())
            .expect("installed");
        std::os::unix::fs::symlink(found, bin.join(program)).expect("symlink");
    }
    let out = Command::new(common::BIN)
        .args(["serve", "--config"])
        .arg(&config_path)
        .arg("--data-dir")
        .arg(tmp.path().join("data"))
        .env("PATH", &bin)
        .output()
        .expect("serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("salloc") && stderr.contains("runs on Slurm"),
        "{stderr}"
    );
}
