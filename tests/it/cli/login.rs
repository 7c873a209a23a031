//! Finding the server and the key: the login profile, the precedence of flags, variables and
//! profile, and `keys` finding a server from its config (TLS included).

use super::support::*;
use crate::common;
use common::Server;
use std::io::Write as _;
use std::path::Path;
use std::process::Stdio;

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
