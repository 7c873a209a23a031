//! What the `cli` tests share: fixtures, servers and helpers.

use crate::common;
use common::{script, Server, BIN};
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A server with command agents: `ok` prints lines to stdout and stderr, `fails` exits 3,
/// `slow` sleeps, `big` prints 200 KB, `echo` prints the first follow-up it reads, `tty`
/// prints terminal escapes and lines that imitate the CLI's own.
pub(super) struct Fixture {
    pub(super) _dir: tempfile::TempDir,
    /// The login profile's home (XDG_CONFIG_HOME) of the commands run here.
    pub(super) config_home: tempfile::TempDir,
    pub(super) server: Server,
}

/// The 240 KB the `big` agent prints: 2,000 lines of 101 bytes with a character that is not
/// ASCII, and a line longer than an entry (40 KB, split over entries marked `continued`).
pub(super) fn big_output() -> String {
    let mut out = String::new();
    for i in 0..2000 {
        out.push_str(&format!("{i:05} é {}\n", "x".repeat(91)));
    }
    out.push_str(&"y".repeat(40_000));
    out.push('\n');
    out
}

impl Fixture {
    pub(super) async fn start() -> Fixture {
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
    pub(super) fn cli(&self) -> Client {
        Client::new(self.config_home.path())
            .env("RUNLEDGER_SERVER", &self.server.base)
            .env("RUNLEDGER_API_KEY", &self.server.key)
    }

    /// The client with neither server nor key given (only a profile can give them).
    pub(super) fn bare(&self) -> Client {
        Client::new(self.config_home.path())
    }

    pub(super) fn profile(&self) -> PathBuf {
        self.config_home.path().join("runledger/profile.toml")
    }
}

/// One run of the binary, in an environment of its own: no RUNLEDGER_* variable of the
/// test's environment, and a login profile directory of the test's.
pub(super) struct Client {
    pub(super) command: Command,
}

pub(super) struct Ran {
    pub(super) code: i32,
    pub(super) stdout: String,
    pub(super) stderr: String,
}

impl Client {
    pub(super) fn new(config_home: &Path) -> Client {
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

    pub(super) fn env(mut self, name: &str, value: &str) -> Client {
        self.command.env(name, value);
        self
    }

    pub(super) fn stdin(mut self, stdin: Stdio) -> Client {
        self.command.stdin(stdin);
        self
    }

    pub(super) fn run(mut self, args: &[&str]) -> Ran {
        let out = self.command.args(args).output().expect("run the cli");
        ran(out)
    }

    pub(super) fn spawn(mut self, args: &[&str]) -> std::process::Child {
        self.command
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the cli")
    }
}

pub(super) fn ran(out: Output) -> Ran {
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Ran {
    pub(super) fn expect(self, code: i32, what: &str) -> Ran {
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
    pub(super) fn id(&self) -> String {
        self.stdout.lines().next().expect("run id").to_string()
    }
}

/// Waits for a child process, killing it after `secs`.
pub(super) fn wait(mut child: std::process::Child, secs: u64) -> Ran {
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

/// A server that answers every request with `answer` (raw HTTP), for the answers runledger
/// never gives.
pub(super) fn hostile(answer: impl Fn(&str) -> Vec<u8> + Send + 'static) -> String {
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

pub(super) fn http(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// A port free a moment ago, for a config that names its own.
pub(super) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Runs the client with stdout or stderr on a terminal (a pseudo-terminal's side); returns the
/// outcome and what the terminal showed.
pub(super) fn on_terminal(client: Client, args: &[&str], stream: &str) -> (Ran, String) {
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

/// No byte a terminal acts on (ESC, BEL, CR, a C1 control) in what the CLI printed.
pub(super) fn assert_inert(what: &str, text: &str) {
    let acting: Vec<char> = text
        .chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect();
    assert!(acting.is_empty(), "{what}: {acting:?} in {text:?}");
}
