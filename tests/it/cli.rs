//! The terminal client (`run`, `runs …`, `login`, `logout`) and `keys` against a running server,
//! through the real binary: outcomes as exit codes, the transcript followed live and resumed,
//! output for people and for programs, the login profile and the precedence of flags,
//! variables and profile, and the failures (a wrong command line, a refused key, a server that
//! is not runledger) each with its own code, one line and no backtrace.

use crate::common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{script, Server, BIN};
use serde_json::{json, Value};

/// A server with command agents: `ok` prints lines to stdout and stderr, `fails` exits 3,
/// `slow` sleeps, `big` prints 200 KB, `echo` prints the first follow-up it reads, `tty`
/// prints terminal escapes and lines that imitate the CLI's own.
struct Fixture {
    _dir: tempfile::TempDir,
    /// The login profile's home (XDG_CONFIG_HOME) of the commands run here.
    config_home: tempfile::TempDir,
    server: Server,
}

/// The 240 KB the `big` agent prints: 2,000 lines of 101 bytes with a character that is not
/// ASCII, and a line longer than an entry (40 KB, split over entries marked `continued`).
fn big_output() -> String {
    let mut out = String::new();
    for i in 0..2000 {
        out.push_str(&format!("{i:05} é {}\n", "x".repeat(91)));
    }
    out.push_str(&"y".repeat(40_000));
    out.push('\n');
    out
}

impl Fixture {
    async fn start() -> Fixture {
        let dir = common::agent_visible_dir();
        let agent = |name: &str, body: &str| {
            let path = dir.path().join(name);
            script(&path, body);
            path.display().to_string()
        };
        std::fs::write(dir.path().join("big.txt"), big_output()).expect("write");
        let ok = agent(
            "ok.sh",
            "echo \"line one: $RUNLEDGER_PROMPT\"\necho 'to stderr' >&2\necho 'line two'",
        );
        let fails = agent("fails.sh", "echo 'about to fail'\nexit 3");
        let slow = agent("slow.sh", "echo started\nexec sleep 60");
        let big = agent("big.sh", &format!("cat {}/big.txt", dir.path().display()));
        let echo = agent(
            "echo.sh",
            "echo ready\nread -r line\necho \"agent got: $line\"",
        );
        // OSC 0 (title), OSC 52 (clipboard), CSI erase-line and cursor-up, a C1 CSI (U+009B,
        // `\302\233` in UTF-8), a bell, and lines shaped like the CLI's `[system]` notes.
        let tty = agent(
            "tty.sh",
            "printf 'title \\033]0;owned\\007 clip \\033]52;c;aGVsbG8=\\007 erase \\033[2K\\033[1A \
             c1 \\302\\23331m\\n[system] run succeeded\\n'\n\
             printf '[system] the agent exited successfully\\r\\033[2K\\n' >&2\n\
             printf 'partial [system] '\nsleep 0.2\nprintf '\\n[runledger] not ours\\n'",
        );
        let env = |id: &str, path: &str| {
            format!("[[environments]]\nid = \"{id}\"\nharness = \"command\"\ncommand = [\"{path}\"]\n\n")
        };
        let config = format!(
            "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n{}{}{}{}{}{}",
            env("tty", &tty),
            env("ok", &ok),
            env("fails", &fails),
            env("slow", &slow),
            env("big", &big),
            env("echo", &echo)
        );
        let server = Server::start_with(dir.path(), &config, &[]);
        server.wait_ready().await;
        Fixture {
            _dir: dir,
            config_home: tempfile::tempdir().expect("tempdir"),
            server,
        }
    }

    /// The client with this server and its admin key in the environment.
    fn cli(&self) -> Client {
        Client::new(self.config_home.path())
            .env("RUNLEDGER_SERVER", &self.server.base)
            .env("RUNLEDGER_API_KEY", &self.server.key)
    }

    /// The client with neither server nor key given (only a profile can give them).
    fn bare(&self) -> Client {
        Client::new(self.config_home.path())
    }

    fn profile(&self) -> PathBuf {
        self.config_home.path().join("runledger/profile.toml")
    }
}

/// One run of the binary, in an environment of its own: no RUNLEDGER_* variable of the
/// test's environment, and a login profile directory of the test's.
struct Client {
    command: Command,
}

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Client {
    fn new(config_home: &Path) -> Client {
        let mut command = Command::new(BIN);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("RUNLEDGER_") {
                command.env_remove(&name);
            }
        }
        command
            .env("XDG_CONFIG_HOME", config_home)
            .env("RUST_LOG", "warn")
            // A backtrace would show if an error printed one.
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null());
        Client { command }
    }

    fn env(mut self, name: &str, value: &str) -> Client {
        self.command.env(name, value);
        self
    }

    fn stdin(mut self, stdin: Stdio) -> Client {
        self.command.stdin(stdin);
        self
    }

    fn run(mut self, args: &[&str]) -> Ran {
        let out = self.command.args(args).output().expect("run the cli");
        ran(out)
    }

    fn spawn(mut self, args: &[&str]) -> std::process::Child {
        self.command
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the cli")
    }
}

fn ran(out: Output) -> Ran {
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Ran {
    fn expect(self, code: i32, what: &str) -> Ran {
        assert_eq!(
            self.code, code,
            "{what}: exit {} (want {code})\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        assert!(
            !self.stderr.contains("backtrace") && !self.stderr.contains("panicked"),
            "{what}: {}",
            self.stderr
        );
        self
    }

    /// The run id `run` prints first.
    fn id(&self) -> String {
        self.stdout.lines().next().expect("run id").to_string()
    }
}

/// Waits for a child process, killing it after `secs`.
fn wait(mut child: std::process::Child, secs: u64) -> Ran {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("the cli did not end within {secs} s: {:?}", ran(out).stderr);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ran(child.wait_with_output().expect("output"))
}

#[tokio::test]
async fn run_follow_streams_the_agents_output_and_exits_by_the_runs_outcome() {
    let f = Fixture::start().await;
    let ok = f
        .cli()
        .run(&[
            "run", "hello", "--env", "ok", "--title", "greeting", "--follow",
        ])
        .expect(0, "a run that succeeds");
    let id = ok.id();
    assert_eq!(
        ok.stdout,
        format!("{id}\nline one: hello\nline two\n"),
        "stdout holds the id and the agent's stdout, nothing else"
    );
    assert!(ok.stderr.contains("to stderr\n"), "{}", ok.stderr);
    assert!(ok.stderr.contains("session: http"), "{}", ok.stderr);
    // runledger's own notes go to stderr, marked, when stderr is not a terminal.
    assert!(ok.stderr.contains("[system] "), "{}", ok.stderr);
    let run = f.server.run(&id).await;
    assert_eq!(
        (run["state"].as_str(), run["title"].as_str()),
        (Some("SUCCEEDED"), Some("greeting"))
    );

    let failed = f
        .cli()
        .run(&["run", "break", "--env", "fails", "--follow"])
        .expect(1, "a run that fails");
    assert!(
        failed.stdout.contains("about to fail\n"),
        "{}",
        failed.stdout
    );
    assert!(failed.stderr.contains("FAILED"), "{}", failed.stderr);
    f.cli()
        .run(&["run", "break", "--env", "fails", "--wait"])
        .expect(1, "waiting for a run that fails");
    let waited = f
        .cli()
        .run(&["run", "hi", "--env", "ok", "--wait"])
        .expect(0, "waiting for a run that succeeds");
    assert_eq!(
        waited.stdout.lines().count(),
        1,
        "--wait prints only the id"
    );
}

#[tokio::test]
async fn a_run_cancelled_while_run_waits_exits_2() {
    let f = Fixture::start().await;
    for mode in ["--wait", "--follow"] {
        let mut child = f.cli().spawn(&["run", "long", "--env", "slow", mode]);
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut id = String::new();
        stdout.read_line(&mut id).expect("the run id");
        let id = id.trim().to_string();
        if mode == "--follow" {
            // The agent's first line, followed live.
            let mut started = String::new();
            stdout.read_line(&mut started).expect("read");
            assert_eq!(started, "started\n");
        } else {
            f.server.wait_state(&id, "INPROGRESS").await;
        }
        let cancel = f
            .cli()
            .run(&["runs", "cancel", &id])
            .expect(0, "runs cancel");
        assert!(
            cancel.stderr.contains(&format!("cancelled run {id}")),
            "{}",
            cancel.stderr
        );
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).expect("read");
        assert_eq!(rest, "", "{mode}: nothing more on stdout");
        let waited = wait(child, 30);
        assert_eq!(waited.code, 2, "{mode}: {}", waited.stderr);
        assert!(waited.stderr.contains("CANCELLED"), "{}", waited.stderr);
    }
}

#[tokio::test]
async fn usage_errors_refused_keys_and_refused_requests_have_codes_of_their_own() {
    let f = Fixture::start().await;
    let usage = f.cli().run(&["run"]).expect(64, "no prompt");
    assert!(usage.stderr.contains("<PROMPT>"), "{}", usage.stderr);
    f.cli()
        .run(&["runs", "list", "--limit", "many"])
        .expect(64, "not a number");
    f.cli()
        .run(&["run", "x", "--follow", "--wait"])
        .expect(64, "--follow with --wait");
    f.cli().run(&["runs", "lisst"]).expect(64, "a typo");
    // Help is no error.
    let help = f.cli().run(&["run", "--help"]).expect(0, "help");
    assert!(
        help.stdout.contains("77  the API key was refused"),
        "{}",
        help.stdout
    );

    let refused = f
        .cli()
        .run(&["runs", "list", "--api-key", "rl_not_a_key"])
        .expect(77, "a wrong key");
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("401") && refused.stderr.contains("not valid"),
        "the server's problem detail: {}",
        refused.stderr
    );

    let unknown = f
        .cli()
        .run(&["runs", "get", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(65, "an unknown run");
    assert!(unknown.stderr.contains("404"), "{}", unknown.stderr);
    let bad = f
        .cli()
        .run(&["runs", "list", "--state", "SLEEPING"])
        .expect(65, "a state that is none");
    assert!(
        bad.stderr.contains("400") && bad.stderr.contains("SLEEPING"),
        "{}",
        bad.stderr
    );
    let env = f
        .cli()
        .run(&["run", "x", "--env", "nowhere"])
        .expect(65, "an unknown environment");
    assert!(env.stderr.contains("nowhere"), "{}", env.stderr);

    // Nothing listens on port 1.
    let down = f
        .cli()
        .run(&["runs", "list", "--server", "http://127.0.0.1:1"])
        .expect(69, "no server");
    assert!(
        down.stderr.contains("cannot reach http://127.0.0.1:1"),
        "{}",
        down.stderr
    );
    let none = f
        .bare()
        .run(&["runs", "list"])
        .expect(78, "no server given");
    assert!(
        none.stderr.contains("--server") && none.stderr.contains("runledger login"),
        "{}",
        none.stderr
    );
    f.bare()
        .run(&["runs", "list", "--server", &f.server.base])
        .expect(78, "no key given");
    f.cli()
        .run(&["runs", "list", "--ca-cert", "/nonexistent.pem"])
        .expect(78, "an unreadable CA file");
}

#[tokio::test]
async fn runs_commands_print_tables_or_the_apis_json() {
    let f = Fixture::start().await;
    let id = f
        .cli()
        .run(&[
            "run",
            "list me",
            "--env",
            "ok",
            "--title",
            "first\ttitle",
            "--wait",
        ])
        .expect(0, "run")
        .id();
    let other = f
        .cli()
        .run(&["run", "and me", "--env", "fails", "--wait"])
        .expect(1, "run")
        .id();

    // Not a terminal: one tab-separated line per run, newest change first.
    let list = f.cli().run(&["runs", "list"]).expect(0, "runs list");
    let lines: Vec<Vec<&str>> = list
        .stdout
        .lines()
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(lines.len(), 2, "{}", list.stdout);
    assert_eq!(lines[0][..2], [other.as_str(), "FAILED"]);
    assert_eq!(lines[1][..3], [id.as_str(), "SUCCEEDED", "first title"]);
    assert_eq!(lines[1][4], "ok");
    let page: Value = serde_json::from_str(
        &f.cli()
            .run(&["runs", "list", "--json", "--state", "succeeded"])
            .expect(0, "runs list --json")
            .stdout,
    )
    .expect("one JSON document");
    assert_eq!(page["runs"].as_array().map(Vec::len), Some(1), "{page}");
    assert_eq!(page["runs"][0]["run_id"], id.as_str());
    assert_eq!(page["page_info"]["has_next_page"], false);
    for (args, want) in [
        (vec!["--env", "fails"], vec![other.as_str()]),
        (vec!["--search", "LIST"], vec![id.as_str()]),
        (vec!["--since", "1h"], vec![other.as_str(), id.as_str()]),
        (vec!["--until", "1h"], vec![]),
        (vec!["--source", "API", "--model", "nothing"], vec![]),
    ] {
        let mut all = vec!["runs", "list"];
        all.extend(&args);
        let listed = f.cli().run(&all).expect(0, "runs list with filters");
        let ids: Vec<&str> = listed
            .stdout
            .lines()
            .filter_map(|l| l.split('\t').next())
            .collect();
        assert_eq!(ids, want, "{args:?}");
    }
    // Paging: the cursor of a page is on stderr, and names the next page.
    let first = f
        .cli()
        .run(&["runs", "list", "--limit", "1"])
        .expect(0, "page 1");
    let cursor = first
        .stderr
        .trim()
        .strip_prefix("more: --cursor ")
        .expect("a cursor")
        .to_string();
    let second = f
        .cli()
        .run(&["runs", "list", "--limit", "1", "--cursor", &cursor])
        .expect(0, "page 2");
    assert!(second.stdout.starts_with(&id), "{}", second.stdout);

    let get = f.cli().run(&["runs", "get", &id]).expect(0, "runs get");
    for want in [
        format!("id:          {id}"),
        "state:       SUCCEEDED".into(),
        "environment: ok".into(),
        "prompt:      list me".into(),
    ] {
        assert!(get.stdout.contains(&want), "{want:?} in {}", get.stdout);
    }
    let got: Value = serde_json::from_str(
        &f.cli()
            .run(&["runs", "get", &id, "--json"])
            .expect(0, "get --json")
            .stdout,
    )
    .expect("json");
    assert_eq!(got, f.server.run(&id).await, "the API's JSON as it is");

    let logs = f.cli().run(&["runs", "logs", &id]).expect(0, "runs logs");
    assert_eq!(logs.stdout, "line one: list me\nline two\n");
    assert!(logs.stderr.contains("to stderr"), "{}", logs.stderr);

    let events = f
        .cli()
        .run(&["runs", "events", &id])
        .expect(0, "runs events");
    let kinds: Vec<&str> = events
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert_eq!(kinds.first(), Some(&"Created"), "{}", events.stdout);
    assert!(kinds.contains(&"Succeeded"), "{}", events.stdout);
    let history: Value = serde_json::from_str(
        &f.cli()
            .run(&["runs", "events", &id, "--json"])
            .expect(0, "events --json")
            .stdout,
    )
    .expect("json");
    assert_eq!(
        history["events"].as_array().map(Vec::len),
        Some(f.server.events(&id).await.len())
    );

    // A follow-up resumes a finished run; a cancel of a finished run is refused.
    let sent = f
        .cli()
        .run(&["runs", "followup", &id, "once more", "--mode", "plan"])
        .expect(0, "runs followup");
    assert!(sent.stderr.contains("QUEUED"), "{}", sent.stderr);
    let events = f.server.wait_events(&id, "FollowupReceived", 1).await;
    let followup = events
        .iter()
        .find(|e| e["type"] == "FollowupReceived")
        .expect("follow-up");
    assert_eq!(
        (
            followup["data"]["message"].as_str(),
            followup["data"]["mode"].as_str()
        ),
        (Some("once more"), Some("plan"))
    );
    f.server.wait_state(&id, "SUCCEEDED").await;
    let refused = f
        .cli()
        .run(&["runs", "cancel", &id])
        .expect(65, "cancel a finished run");
    assert!(
        refused.stderr.contains("400") && refused.stderr.contains("already SUCCEEDED"),
        "{}",
        refused.stderr
    );
    f.cli()
        .run(&["runs", "followup", &id, "   "])
        .expect(65, "a blank follow-up");
}

#[tokio::test]
async fn a_200_kb_transcript_comes_out_byte_for_byte() {
    let f = Fixture::start().await;
    let followed = f
        .cli()
        .run(&["run", "big", "--env", "big", "--follow"])
        .expect(0, "run --follow");
    let id = followed.id();
    let want = big_output();
    assert_eq!(want.len(), 2000 * 101 + 40_001);
    assert!(
        followed.stdout == format!("{id}\n{want}"),
        "run --follow: {} bytes of stdout, want {}",
        followed.stdout.len(),
        id.len() + 1 + want.len()
    );
    let logs = f.cli().run(&["runs", "logs", &id]).expect(0, "runs logs");
    assert!(
        logs.stdout == want,
        "runs logs: {} bytes",
        logs.stdout.len()
    );
    let logs = f
        .cli()
        .run(&["runs", "logs", &id, "-f"])
        .expect(0, "runs logs -f");
    assert!(
        logs.stdout == want,
        "runs logs -f: {} bytes",
        logs.stdout.len()
    );
    // A reader that stops early (`| head`) ends the client with an error, not a panic.
    let mut child = f.cli().spawn(&["runs", "logs", &id]);
    let mut head = [0; 10];
    child
        .stdout
        .take()
        .expect("stdout")
        .read_exact(&mut head)
        .expect("read");
    let cut = wait(child, 30).expect(70, "a closed stdout");
    assert!(cut.stderr.contains("Broken pipe"), "{}", cut.stderr);
}

#[tokio::test]
async fn login_writes_a_private_profile_that_later_commands_use() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = Fixture::start().await;
    let base = f.server.base.as_str();
    let key = f.server.key.as_str();
    // A refused key saves nothing.
    let refused = f
        .bare()
        .run(&["login", "--server", base, "--api-key", "rl_wrong"])
        .expect(77, "login with a wrong key");
    assert!(refused.stderr.contains("401"), "{}", refused.stderr);
    assert!(!f.profile().exists());

    // The key from stdin (not a terminal: its first line).
    let mut child =
        f.bare()
            .stdin(Stdio::piped())
            .spawn(&["login", "--server", &format!("{base}/")]);
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{key}\n").as_bytes())
        .expect("write the key");
    let login = wait(child, 20).expect(0, "login");
    assert!(login.stderr.contains("logged in"), "{}", login.stderr);
    let mode = std::fs::metadata(f.profile())
        .expect("profile")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let saved: toml::Value =
        toml::from_str(&std::fs::read_to_string(f.profile()).expect("read")).expect("toml");
    assert_eq!(saved["server"].as_str(), Some(base));
    assert_eq!(saved["api_key"].as_str(), Some(key));
    let dir_mode = std::fs::metadata(f.profile().parent().expect("dir"))
        .expect("dir")
        .permissions()
        .mode();
    assert_eq!(
        dir_mode & 0o077,
        0,
        "the directory is private: {dir_mode:o}"
    );

    let id = f
        .bare()
        .run(&["run", "from the profile", "--env", "ok", "--wait"])
        .expect(0, "run with the profile")
        .id();
    let listed = f
        .bare()
        .run(&["runs", "list"])
        .expect(0, "list with the profile");
    assert!(listed.stdout.starts_with(&id), "{}", listed.stdout);

    // `keys` finds its admin key in the profile too.
    let keys = f
        .bare()
        .run(&[
            "keys",
            "list",
            "--config",
            f.server.config.to_str().expect("utf-8"),
            "--data-dir",
            f.server.data_dir.to_str().expect("utf-8"),
            "--url",
            base,
        ])
        .expect(0, "keys list with the profile's key");
    assert!(keys.stdout.contains("admin"), "{}", keys.stdout);

    let out = f.bare().run(&["logout"]).expect(0, "logout");
    assert!(out.stderr.contains("removed"), "{}", out.stderr);
    assert!(!f.profile().exists());
    f.bare().run(&["runs", "list"]).expect(78, "logged out");
    f.bare().run(&["logout"]).expect(0, "logout twice");

    // A damaged profile is named, not ignored.
    std::fs::create_dir_all(f.profile().parent().expect("dir")).expect("mkdir");
    std::fs::write(f.profile(), "server = [").expect("write");
    let damaged = f
        .bare()
        .run(&["runs", "list"])
        .expect(78, "a damaged profile");
    assert!(
        damaged.stderr.contains("profile.toml is damaged"),
        "{}",
        damaged.stderr
    );
}

#[tokio::test]
async fn flags_win_over_variables_which_win_over_the_profile() {
    let f = Fixture::start().await;
    let base = f.server.base.as_str();
    let key = f.server.key.as_str();
    let nowhere = "http://127.0.0.1:1";
    std::fs::create_dir_all(f.profile().parent().expect("dir")).expect("mkdir");
    std::fs::write(
        f.profile(),
        format!("server = \"{nowhere}\"\napi_key = \"rl_profile_wrong\"\n"),
    )
    .expect("write");
    let list = ["runs", "list"];
    f.bare().run(&list).expect(69, "the profile's server");
    f.bare()
        .env("RUNLEDGER_SERVER", base)
        .run(&list)
        .expect(77, "the variable's server, the profile's key");
    f.bare()
        .env("RUNLEDGER_SERVER", base)
        .env("RUNLEDGER_API_KEY", key)
        .run(&list)
        .expect(0, "the variables over the profile");
    f.bare()
        .env("RUNLEDGER_SERVER", nowhere)
        .env("RUNLEDGER_API_KEY", key)
        .run(&["runs", "list", "--server", base])
        .expect(0, "the flag's server over the variable's");
    f.bare()
        .env("RUNLEDGER_SERVER", base)
        .env("RUNLEDGER_API_KEY", key)
        .run(&["runs", "list", "--api-key", "rl_flag_wrong"])
        .expect(77, "the flag's key over the variable's");
}

/// A server that answers every request with `answer` (raw HTTP), for the answers runledger
/// never gives.
fn hostile(answer: impl Fn(&str) -> Vec<u8> + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let _ = stream.write_all(&answer(&String::from_utf8_lossy(&request)));
        }
    });
    format!("http://{addr}")
}

fn http(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

#[tokio::test]
async fn a_server_that_is_not_runledger_gives_a_clear_error() {
    let home = tempfile::tempdir().expect("tempdir");
    let client = |server: &str| {
        Client::new(home.path())
            .env("RUNLEDGER_SERVER", server)
            .env("RUNLEDGER_API_KEY", "rl_k")
    };
    let html = hostile(|_| {
        http(
            "200 OK",
            "text/html",
            b"<html><body>Welcome to nginx</body></html>",
        )
    });
    let e = client(&html).run(&["runs", "list"]).expect(76, "HTML");
    assert!(
        e.stderr.contains("not JSON") && e.stderr.contains("<html>"),
        "{}",
        e.stderr
    );
    assert_eq!(e.stderr.lines().count(), 1);

    // 100 MiB announced, and then sent without a length: both refused at 16 MiB.
    let huge = hostile(|_| http("200 OK", "application/json", &vec![b' '; 100 << 20]));
    let started = Instant::now();
    let e = client(&huge)
        .run(&["runs", "get", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(76, "huge");
    assert!(e.stderr.contains("larger than 16 MiB"), "{}", e.stderr);
    let unbounded = hostile(|_| {
        let mut out =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n["
                .to_vec();
        out.extend(std::iter::repeat_n(b'1', 40 << 20));
        out
    });
    let e = client(&unbounded)
        .run(&["runs", "list", "--json"])
        .expect(76, "unbounded");
    assert!(e.stderr.contains("larger than 16 MiB"), "{}", e.stderr);
    assert!(started.elapsed() < Duration::from_secs(30));

    let gateway = hostile(|_| {
        http(
            "502 Bad Gateway",
            "text/html",
            b"<h1>502 Bad Gateway</h1>\n",
        )
    });
    let e = client(&gateway)
        .run(&["runs", "list"])
        .expect(69, "a gateway's error");
    assert!(
        e.stderr.contains("502") && e.stderr.contains("Bad Gateway"),
        "{}",
        e.stderr
    );

    // A transcript stream whose entry is not JSON.
    let stream = hostile(|_| {
        http(
            "200 OK",
            "text/event-stream",
            b"retry: 10\n\nid: 0\nevent: entry\ndata: {nope\n\n",
        )
    });
    let e = client(&stream)
        .run(&["runs", "logs", "-f", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(76, "a broken stream");
    assert!(e.stderr.contains("not JSON"), "{}", e.stderr);
    // An event stream whose line never ends: refused at 1 MiB, not buffered whole.
    let endless = hostile(|_| {
        let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nretry: 10\n\ndata: ".to_vec();
        out.extend(std::iter::repeat_n(b'a', 64 << 20));
        out
    });
    let e = client(&endless)
        .run(&["runs", "logs", "-f", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(76, "an endless line");
    assert!(e.stderr.contains("longer than 1024 KiB"), "{}", e.stderr);
}

#[tokio::test]
async fn a_dropped_transcript_stream_is_resumed_after_the_last_entry() {
    let home = tempfile::tempdir().expect("tempdir");
    let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = requests.clone();
    // The first connection sends two entries (the second a line's first piece) and drops;
    // the second must ask for what follows the second entry.
    let server = hostile(move |request| {
        let mut seen = seen.lock().expect("lock");
        seen.push(request.to_ascii_lowercase());
        let entry = |offset: u64, stream: &str, text: &str, continued: bool| {
            format!(
                "id: {offset}\nevent: entry\ndata: {}\n\n",
                json!({"offset": offset, "at": "2026-11-26T00:00:00.000Z", "execution": 1,
                       "stream": stream, "text": text, "continued": continued})
            )
        };
        let body = if seen.len() == 1 {
            format!(
                "retry: 10\n\n{}{}",
                entry(0, "stdout", "first", false),
                entry(90, "stdout", "sec", true)
            )
        } else {
            format!(
                "retry: 10\n\n: keep-alive\n\n{}{}{}event: end\ndata: {{\"state\":\"FAILED\"}}\n\n",
                entry(180, "stdout", "ond", false),
                entry(270, "system", "the agent exited with status 3", false),
                entry(360, "followup", "(normal) go on", false),
            )
        };
        http("200 OK", "text/event-stream", body.as_bytes())
    });
    let followed = Client::new(home.path())
        .env("RUNLEDGER_SERVER", &server)
        .env("RUNLEDGER_API_KEY", "rl_k")
        .run(&["runs", "logs", "--follow", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(1, "a followed run that failed");
    assert_eq!(followed.stdout, "first\nsecond\n(normal) go on\n");
    assert!(
        followed
            .stderr
            .contains("[system] the agent exited with status 3\n"),
        "{}",
        followed.stderr
    );
    let requests = requests.lock().expect("lock");
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(
        requests[0].contains("accept: text/event-stream"),
        "{}",
        requests[0]
    );
    assert!(!requests[0].contains("last-event-id"), "{}", requests[0]);
    assert!(
        requests[1].contains("last-event-id: 90\r\n"),
        "{}",
        requests[1]
    );
}

#[tokio::test]
async fn lines_typed_on_a_terminal_while_following_are_sent_as_follow_ups() {
    let f = Fixture::start().await;
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut child = f
        .cli()
        .stdin(Stdio::from(pty.slave))
        .spawn(&["run", "talk", "--env", "echo", "--follow"]);
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the run id");
    let id = line.trim().to_string();
    line.clear();
    stdout.read_line(&mut line).expect("ready");
    assert_eq!(line, "ready\n");
    let mut master = std::fs::File::from(pty.master);
    master.write_all(b"also add tests\n").expect("type");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read");
    let followed = wait(child, 30).expect(0, "run --follow with follow-ups");
    assert!(
        rest.contains("(normal) also add tests\n") && rest.contains("agent got: {"),
        "{rest}"
    );
    assert!(
        followed.stderr.contains("follow-up sent"),
        "{}",
        followed.stderr
    );
    let events = f.server.events(&id).await;
    assert!(events
        .iter()
        .any(|e| e["type"] == "FollowupReceived" && e["data"]["message"] == "also add tests"));
}

/// A port free a moment ago, for a config that names its own.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[tokio::test]
async fn keys_finds_the_server_its_config_describes_without_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Every interface, as an operator behind a proxy would bind; the CLI must use loopback.
    let port = free_port();
    let config = format!(
        "[server]\nbind = \"0.0.0.0:{port}\"\nallow_non_loopback = true\ndata_dir = \"data\"\n\n\
         [[environments]]\nid = \"fast\"\nharness = \"demo\"\n"
    );
    let s = Server::start_in(dir.path(), &config);
    s.wait_ready().await;
    let config_path = s.config.to_str().expect("utf-8");
    let home = tempfile::tempdir().expect("tempdir");
    let keys = |cwd: &Path, key: (&str, &str)| {
        let mut client = Client::new(home.path()).env(key.0, key.1);
        client.command.current_dir(cwd);
        client.run(&["keys", "list", "--config", config_path])
    };
    // From the config's directory (where `data` is the server's data directory) and from
    // another (where it is not); with the admin key or with the terminal client's variable.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    for cwd in [dir.path(), elsewhere.path()] {
        for var in ["RUNLEDGER_ADMIN_KEY", "RUNLEDGER_API_KEY"] {
            let listed = keys(cwd, (var, &s.key)).expect(0, "keys list --config");
            assert!(listed.stdout.contains(" admin "), "{}", listed.stdout);
        }
    }
    assert!(!elsewhere.path().join("data").exists(), "nothing created");
    // Without a key it still says what it needs.
    let mut client = Client::new(home.path());
    client.command.current_dir(dir.path());
    let e = client.run(&["keys", "list", "--config", config_path]);
    assert_eq!(e.code, 1);
    assert!(
        e.stderr.contains("--admin-key") && e.stderr.contains("RUNLEDGER_API_KEY"),
        "{}",
        e.stderr
    );
}

#[tokio::test]
async fn keys_finds_a_tls_server_bound_to_every_interface_and_trusts_its_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("rcgen");
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).expect("cert");
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).expect("key");
    let port = free_port();
    let config = format!(
        "[server]\nbind = \"0.0.0.0:{port}\"\ntls_cert = {:?}\ntls_key = {:?}\ndata_dir = {:?}\n\n\
         [[environments]]\nid = \"fast\"\nharness = \"demo\"\n",
        cert_path,
        key_path,
        dir.path().join("data")
    );
    let s = Server::start_in(dir.path(), &config);
    let home = tempfile::tempdir().expect("tempdir");
    let listed = Client::new(home.path())
        .env("RUNLEDGER_ADMIN_KEY", &s.key)
        .run(&[
            "keys",
            "list",
            "--json",
            "--config",
            s.config.to_str().expect("utf-8"),
        ])
        .expect(0, "keys list over https");
    assert!(
        listed.stdout.contains("\"admin\":true"),
        "{}",
        listed.stdout
    );
    // The terminal client trusts the same certificate when told to, and only then.
    let client = || {
        Client::new(home.path())
            .env("RUNLEDGER_SERVER", &format!("https://127.0.0.1:{port}"))
            .env("RUNLEDGER_API_KEY", &s.key)
    };
    let e = client()
        .run(&["runs", "list"])
        .expect(69, "an unknown certificate");
    assert!(e.stderr.contains("certificate"), "{}", e.stderr);
    client()
        .run(&[
            "runs",
            "list",
            "--ca-cert",
            cert_path.to_str().expect("utf-8"),
        ])
        .expect(0, "runs list with --ca-cert");
}

/// Runs the client with stdout or stderr on a terminal (a pseudo-terminal's side); returns the
/// outcome and what the terminal showed.
fn on_terminal(client: Client, args: &[&str], stream: &str) -> (Ran, String) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut client = client;
    client.command.stdout(Stdio::piped()).stderr(Stdio::piped());
    match stream {
        "stdout" => client.command.stdout(Stdio::from(pty.slave)),
        _ => client.command.stderr(Stdio::from(pty.slave)),
    };
    let child = client.command.args(args).spawn().expect("spawn");
    // The command holds the terminal's side until it is dropped: the reader then sees the end
    // when the child exits.
    drop(client);
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut shown = Vec::new();
        let mut buf = [0; 4096];
        // EIO once the child has closed the last descriptor of the terminal.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            shown.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&shown).into_owned()
    });
    let ran = wait(child, 30);
    (ran, reader.join().expect("reader"))
}

#[tokio::test]
async fn a_terminal_gets_a_table_a_progress_line_and_dimmed_notes() {
    let f = Fixture::start().await;
    let (waited, shown) = on_terminal(
        f.cli(),
        &[
            "run",
            "hi",
            "--env",
            "ok",
            "--title",
            "for people",
            "--wait",
        ],
        "stderr",
    );
    assert_eq!(waited.code, 0, "{shown}");
    let id = waited.id();
    assert!(
        shown.contains(&format!("\r\x1b[2K{id}  SUCCEEDED  ")),
        "a progress line with the state: {shown:?}"
    );
    let (followed, shown) = on_terminal(f.cli(), &["runs", "logs", &id], "stderr");
    assert_eq!(followed.code, 0, "{shown}");
    assert!(
        shown.contains("\x1b[2mexecution 1 starts") && !shown.contains("[system]"),
        "runledger's notes dimmed: {shown:?}"
    );
    assert_eq!(followed.stdout, "line one: hi\nline two\n");
    let (listed, shown) = on_terminal(f.cli(), &["runs", "list"], "stdout");
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let lines: Vec<&str> = shown.lines().map(|l| l.trim_end_matches('\r')).collect();
    assert_eq!(lines.len(), 2, "{shown:?}");
    assert!(
        lines[0].starts_with("ID") && lines[0].ends_with("ENVIRONMENT"),
        "{shown:?}"
    );
    let columns: Vec<&str> = lines[1].split("  ").filter(|c| !c.is_empty()).collect();
    assert_eq!(
        columns[..3],
        [id.as_str(), "SUCCEEDED", "for people"],
        "{shown:?}"
    );
    assert_eq!(columns.last(), Some(&"ok"));
}

#[tokio::test]
async fn a_server_without_the_transcript_stream_is_followed_by_polling_its_pages() {
    let home = tempfile::tempdir().expect("tempdir");
    // The transcript as JSON pages only, as servers before the stream answer it: the run ends
    // while the follower polls, with one more entry after the state changed.
    let polls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = polls.clone();
    let server = hostile(move |request| {
        let entry = |offset: u64, text: &str| {
            json!({"offset": offset, "at": "2026-11-26T00:00:00.000Z", "execution": 1,
                   "stream": "stdout", "text": text, "continued": false})
        };
        let first_line = request.lines().next().unwrap_or("");
        let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let page = if first_line.contains("offset=0") {
            json!({"run_id": "r", "state": "INPROGRESS", "entries": [entry(0, "one")],
                   "next_offset": 10, "has_more": false})
        } else if first_line.contains("offset=10") && n < 4 {
            json!({"run_id": "r", "state": "INPROGRESS", "entries": [], "next_offset": 10,
                   "has_more": false})
        } else if first_line.contains("offset=10") {
            json!({"run_id": "r", "state": "SUCCEEDED", "entries": [entry(10, "two")],
                   "next_offset": 20, "has_more": false})
        } else {
            json!({"run_id": "r", "state": "SUCCEEDED", "entries": [], "next_offset": 20,
                   "has_more": false})
        };
        http("200 OK", "application/json", page.to_string().as_bytes())
    });
    let followed = Client::new(home.path())
        .env("RUNLEDGER_SERVER", &server)
        .env("RUNLEDGER_API_KEY", "rl_k")
        .run(&["runs", "logs", "-f", "01M8AQKPTXXN0VNC062RHHB7SD"])
        .expect(0, "a polled run that succeeded");
    assert_eq!(followed.stdout, "one\ntwo\n");
    assert!(polls.load(std::sync::atomic::Ordering::SeqCst) >= 6);
}

/// No byte a terminal acts on (ESC, BEL, CR, a C1 control) in what the CLI printed.
fn assert_inert(what: &str, text: &str) {
    let acting: Vec<char> = text
        .chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect();
    assert!(acting.is_empty(), "{what}: {acting:?} in {text:?}");
}

#[tokio::test]
async fn an_agents_escapes_and_imitated_system_lines_reach_the_terminal_inert() {
    let f = Fixture::start().await;
    // A title no terminal should obey either: any API client can set one.
    let followed = f
        .cli()
        .run(&[
            "run",
            "hi",
            "--env",
            "tty",
            "--title",
            "t \u{1b}]0;x\u{7} \u{9b}2J",
            "--follow",
        ])
        .expect(0, "run --follow");
    let id = followed.id();
    let logs = f.cli().run(&["runs", "logs", &id]).expect(0, "runs logs");
    let tailed = f
        .cli()
        .run(&["runs", "logs", &id, "-f"])
        .expect(0, "runs logs -f");
    for (what, ran) in [
        ("run --follow", &followed),
        ("runs logs", &logs),
        ("runs logs -f", &tailed),
    ] {
        assert_inert(what, &ran.stdout);
        assert_inert(what, &ran.stderr);
        // Shown, as escapes, not dropped.
        assert!(
            ran.stdout.contains(
                "title \\x1b]0;owned\\x07 clip \\x1b]52;c;aGVsbG8=\\x07 erase \\x1b[2K\\x1b[1A c1 \\x9b31m\n"
            ),
            "{what}: {:?}",
            ran.stdout
        );
        // The agent's imitations are marked; the CLI's own line is not.
        assert!(
            ran.stdout.contains("\n\\[system] run succeeded\n"),
            "{what}: {:?}",
            ran.stdout
        );
        assert!(
            ran.stdout
                .contains("partial [system] \n\\[runledger] not ours\n"),
            "{what}: {:?}",
            ran.stdout
        );
        assert!(
            ran.stderr
                .contains("\\[system] the agent exited successfully\\x0d\\x1b[2K\n"),
            "{what}: {:?}",
            ran.stderr
        );
        let lines = ran.stdout.lines().chain(ran.stderr.lines());
        let ours: Vec<&str> = lines.filter(|l| l.starts_with("[system] ")).collect();
        assert!(
            ours.contains(&"[system] the agent exited successfully"),
            "{what}: {:?}",
            ran.stderr
        );
        assert!(
            !ours.iter().any(|l| l.contains("run succeeded")),
            "{what}: {ours:?}"
        );
    }
    // On a terminal the CLI's own notes are dimmed with its own escapes; the agent's are not
    // obeyed there either.
    let (_, shown) = on_terminal(f.cli(), &["runs", "logs", &id], "stderr");
    for acting in ["\x1b[2K", "\x1b]", "\u{9b}", "\x07"] {
        assert!(
            !shown.contains(acting),
            "{acting:?} on the terminal: {shown:?}"
        );
    }
    assert!(
        shown.contains("\\[system] the agent exited successfully\\x0d\\x1b[2K"),
        "{shown:?}"
    );
    for args in [
        vec!["runs", "get", &id],
        vec!["runs", "get", &id, "--json"],
        vec!["runs", "list"],
        vec!["runs", "list", "--json"],
        vec!["runs", "events", &id],
    ] {
        let shown = f.cli().run(&args).expect(0, "a runs command");
        assert_inert(&args.join(" "), &shown.stdout);
        assert_inert(&args.join(" "), &shown.stderr);
    }
    let json = f
        .cli()
        .run(&["runs", "get", &id, "--json"])
        .expect(0, "runs get --json");
    let run: Value = serde_json::from_str(&json.stdout).expect("still JSON");
    assert_eq!(run["title"], "t \u{1b}]0;x\u{7} \u{9b}2J");
}
