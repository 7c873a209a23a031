//! `runledger login` and `logout`: the login profile checked against a server and saved, or
//! removed. The key is read without echo on a terminal and never printed.

use std::io::IsTerminal as _;

use anyhow::Context as _;

use crate::commands::ApiArgs;
use crate::profile;
use crate::remote::{self, Error, Remote};

use super::api::block_on;

/// `runledger login`.
pub fn login(api: &ApiArgs) -> anyhow::Result<u8> {
    let saved = profile::load()?.unwrap_or_default();
    let server = api.server.clone().or(saved.server).ok_or_else(|| {
        Error::Config("no server: pass --server URL or set RUNLEDGER_SERVER".into())
    })?;
    let key = match &api.api_key {
        Some(key) => key.clone(),
        None => read_key()?,
    };
    let key = key.trim().to_string();
    if key.is_empty() {
        return Err(Error::Config("no API key given".into()).into());
    }
    // Saved absolute: later commands run from other directories.
    let ca_cert = api
        .ca_cert
        .clone()
        .or(saved.ca_cert)
        .map(|path| std::path::absolute(&path).unwrap_or(path));
    let target = remote::Target {
        server: server.trim_end_matches('/').to_string(),
        key,
        ca_cert,
    };
    let remote = Remote::new(&target)?;
    block_on(async {
        Ok(remote
            .get("/api/v1/agent/runs", &[("limit", "1".to_string())])
            .await?)
    })?;
    let path = profile::save(&profile::Profile {
        server: Some(target.server.clone()),
        api_key: Some(target.key),
        ca_cert: target.ca_cert,
    })?;
    eprintln!(
        "logged in to {}; saved the key in {}",
        target.server,
        path.display()
    );
    Ok(0)
}

/// `runledger logout`.
pub fn logout() -> anyhow::Result<u8> {
    match profile::remove()? {
        Some(path) => eprintln!("removed {}", path.display()),
        None => eprintln!(
            "not logged in (no profile at {})",
            profile::path()?.display()
        ),
    }
    Ok(0)
}

/// The key, from a terminal without echo, else the first line of stdin.
fn read_key() -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        Ok(rpassword::prompt_password("API key: ").context("cannot read the key")?)
    } else {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the key from stdin")?;
        Ok(line)
    }
}
