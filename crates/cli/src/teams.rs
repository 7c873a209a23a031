//! `runledger teams create|list`: the teams a key's runs belong to, in the store when no
//! server holds it, else through the running server's admin API (`admin` chooses). A team is
//! only a name; nothing here deletes one. A team created on the store is recorded in its admin
//! audit log (channel `cli`).

use anyhow::bail;

use runledger_base::clock::now;
use runledger_domain::AdminEvent;
use runledger_format::time::format_time;
use runledger_store::Store;

use crate::admin::{administer, print_records, Admin};
use crate::audit_admin::cli_origin;
use crate::commands::{Cli, RunningServer, TeamsCmd};

pub fn teams(cli: &Cli, command: &TeamsCmd, server: &RunningServer) -> anyhow::Result<()> {
    administer(
        cli,
        "teams",
        matches!(command, TeamsCmd::List { .. }),
        server,
        |store| teams_offline(store, command),
        |url, admin_key, chain| teams_online(url, admin_key, command, chain),
    )
}

fn teams_offline(store: &Store, command: &TeamsCmd) -> anyhow::Result<()> {
    match command {
        TeamsCmd::Create { name } => {
            check_team_name(name)?;
            let at = now();
            if !store.keys().create_team(name, at)? {
                bail!("team {name:?} exists already");
            }
            let event = AdminEvent::TeamCreated { name: name.clone() };
            store.append_admin(at, event, cli_origin("teams create"))?;
            store.sync_blocking()?;
            eprintln!("created team {name}");
        }
        TeamsCmd::List { json } => {
            let teams: Vec<_> = store
                .keys()
                .teams()?
                .into_iter()
                .map(|(name, at)| {
                    serde_json::json!({ "name": name, "created_at": at.map(format_time) })
                })
                .collect();
            print_teams(&teams, *json)?;
        }
    }
    Ok(())
}

fn teams_online(
    url: &str,
    admin_key: &str,
    command: &TeamsCmd,
    trusted_chain: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let admin = Admin::new(url, admin_key, trusted_chain)?;
    let base = "/api/v1/admin/teams";
    match command {
        TeamsCmd::Create { name } => {
            check_team_name(name)?;
            let body = serde_json::json!({ "name": name });
            admin.post(base, &body)?;
            eprintln!("created team {name} through the running server");
        }
        TeamsCmd::List { json } => {
            let reply = admin.get(base)?;
            let teams = reply["teams"].as_array().cloned().unwrap_or_default();
            print_teams(&teams, *json)?;
        }
    }
    Ok(())
}

pub(crate) fn check_team_name(name: &str) -> anyhow::Result<()> {
    if !runledger_domain::valid_team_name(name) {
        bail!(
            "{name:?} is not a team name: {}",
            runledger_domain::TEAM_NAME_RULE
        );
    }
    Ok(())
}

fn print_teams(teams: &[serde_json::Value], json: bool) -> anyhow::Result<()> {
    print_records(teams, json, |t| {
        let created = t["created_at"]
            .as_str()
            .map(|at| format!("created {at}"))
            .unwrap_or_else(|| "built in".into());
        format!("{:<24}  {created}", t["name"].as_str().unwrap_or(""))
    })
}
