//! The names the file lists, checked alike wherever they appear: team names (an environment's
//! or a webhook's `teams`) and the names of agents' variables (`inherit_env`, `[secrets]`).
//! Knows no section beyond the field (`at`) it is handed for its errors.

use crate::error::Error;

/// An environment's or a webhook's `teams`: valid team names, each once; absent means every
/// team, and an empty list would mean no team at all, which is refused as a mistake (a webhook
/// refuses it first, in its own words).
pub(crate) fn teams(at: &str, teams: Option<Vec<String>>) -> Result<Vec<String>, Error> {
    let Some(teams) = teams else {
        return Ok(Vec::new());
    };
    if teams.is_empty() {
        return Err(Error::Invalid(format!(
            "{at}.teams: an empty list would let no team use the environment; leave `teams` \
             out to let every team use it"
        )));
    }
    for (i, team) in teams.iter().enumerate() {
        if !runledger_domain::valid_team_name(team) {
            return Err(Error::Invalid(format!(
                "{at}.teams[{i}]: {team:?} is not a team name ({})",
                runledger_domain::TEAM_NAME_RULE
            )));
        }
        if teams[..i].contains(team) {
            return Err(Error::Invalid(format!(
                "{at}.teams[{i}]: {team:?} is listed twice"
            )));
        }
    }
    Ok(teams)
}

/// A name an agent's variable can have: a portable shell name that is not one of ours.
pub(crate) fn variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("RUNLEDGER_")
}
