//! `runledger keys create|list|revoke`: API keys, in the store when no server holds it, else
//! through the running server's admin API (`admin` chooses). A key's secret is printed once,
//! alone on stdout; the store keeps only its hash. An act on the store is recorded in its admin
//! audit log (channel `cli`); through the server, the server records it.

use anyhow::{bail, Context as _};

use runledger_base::clock::now;
use runledger_store::api_keys::Key;
use runledger_store::api_keys::{KeyKind, KeyRecord};
use runledger_store::Store;

use runledger_store::admin_log::{key_created, key_revoked};

use crate::admin::{administer, print_records, Admin};
use crate::audit_admin::cli_origin;
use crate::commands::{Cli, KeysCmd, RunningServer};
use crate::teams::check_team_name;

pub fn keys(cli: &Cli, command: &KeysCmd, server: &RunningServer) -> anyhow::Result<()> {
    administer(
        cli,
        "keys",
        matches!(command, KeysCmd::List { .. }),
        server,
        |store| keys_offline(store, command),
        |url, admin_key, chain| keys_online(url, admin_key, command, chain),
    )
}

fn keys_offline(store: &Store, command: &KeysCmd) -> anyhow::Result<()> {
    let json = |k: &KeyRecord| runledger_format::keys::key_json(&Key::from(k));
    match command {
        KeysCmd::Create {
            name,
            kind,
            admin,
            team,
        } => {
            let kind = KeyKind::parse(kind).context("kind must be personal or agent")?;
            check_team_name(team)?;
            if !store.keys().team_exists(team)? {
                bail!("there is no team {team:?}; create it first with `runledger teams create {team}`");
            }
            let at = now();
            let (record, secret) = store.keys().create(name, kind, *admin, team, at)?;
            store.append_admin(at, key_created(&record), cli_origin("keys create"))?;
            store.sync_blocking()?;
            eprintln!(
                "created key {} ({}) in team {}",
                record.id, record.name, record.team
            );
            println!("{secret}");
        }
        KeysCmd::List { json: as_json } => {
            let keys: Vec<_> = store.keys().list()?.iter().map(json).collect();
            print_keys(&keys, *as_json)?;
        }
        KeysCmd::Revoke { id } => {
            let at = now();
            let Some(record) = store.keys().revoke(id, at)? else {
                bail!("no key with id {id}");
            };
            store.append_admin(at, key_revoked(&record, at), cli_origin("keys revoke"))?;
            store.sync_blocking()?;
            eprintln!("revoked key {} ({})", record.id, record.name);
        }
    }
    Ok(())
}

fn keys_online(
    url: &str,
    admin_key: &str,
    command: &KeysCmd,
    trusted_chain: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let admin = Admin::new(url, admin_key, trusted_chain)?;
    let base = "/api/v1/admin/keys";
    match command {
        KeysCmd::Create {
            name,
            kind,
            admin: is_admin,
            team,
        } => {
            let body =
                serde_json::json!({ "name": name, "kind": kind, "admin": is_admin, "team": team });
            let reply = admin.post(base, &body)?;
            eprintln!(
                "created key {} ({}) through the running server",
                reply["id"].as_str().unwrap_or("?"),
                name
            );
            println!(
                "{}",
                reply["key"].as_str().context("the server sent no key")?
            );
        }
        KeysCmd::List { json } => {
            let reply = admin.get(base)?;
            let keys = reply["keys"].as_array().cloned().unwrap_or_default();
            print_keys(&keys, *json)?;
        }
        KeysCmd::Revoke { id } => {
            let escaped: String = url::form_urlencoded::byte_serialize(id.as_bytes()).collect();
            let reply = admin.post(&format!("{base}/{escaped}/revoke"), &serde_json::json!({}))?;
            eprintln!(
                "revoked key {} through the running server",
                reply["id"].as_str().unwrap_or(id)
            );
        }
    }
    Ok(())
}

fn print_keys(keys: &[serde_json::Value], json: bool) -> anyhow::Result<()> {
    print_records(keys, json, |k| {
        let s = |f: &str| k[f].as_str().unwrap_or("").to_string();
        let revoked = k["revoked_at"]
            .as_str()
            .map(|t| format!("revoked {t}"))
            .unwrap_or_else(|| "active".into());
        let admin = if k["admin"].as_bool() == Some(true) {
            " admin"
        } else {
            ""
        };
        format!(
            "{}  {:<8}{admin}  {:<24}  team {:<16}  created {}  {revoked}",
            s("id"),
            s("kind"),
            s("name"),
            s("team"),
            s("created_at")
        )
    })
}
