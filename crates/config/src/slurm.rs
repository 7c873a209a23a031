//! `runs_on = "slurm"` and `[environments.slurm]`: what an environment that runs its agents as
//! Slurm job steps needs, refused where Slurm would reject it or where runledger sets it itself,
//! so that a typo stops start-up instead of failing every run. Nothing here talks to Slurm
//! (`exec::slurm` does).

use runledger_domain::harness::{Harness, RunsOn, Sandbox, Slurm};

use crate::error::Error;
use crate::file::EnvironmentFile;

/// The options `runledger` gives `salloc` itself: `extra_args` may not name them.
const SLURM_OPTIONS_OF_OURS: &[&str] = &[
    "--job-name",
    "-J",
    "--partition",
    "-p",
    "--constraint",
    "-C",
    "--account",
    "-A",
    "--qos",
    "-q",
    "--gres",
    "--mem",
    "--mem-per-cpu",
    "--mem-per-gpu",
    "--cpus-per-task",
    "-c",
    "--time",
    "-t",
    "--nodes",
    "-N",
    "--ntasks",
    "-n",
    "--no-shell",
    "--requeue",
    "--no-requeue",
    "--export",
    "--chdir",
    "-D",
    "--jobid",
    "--comment",
];

/// `runs_on` and `[environments.slurm]`: both or neither; the settings Slurm would reject or
/// that runledger sets itself are refused here, so a typo stops start-up instead of failing
/// every run.
pub(crate) fn slurm(
    at: &str,
    env: &EnvironmentFile,
    sandbox: Option<Sandbox>,
) -> Result<Option<Slurm>, Error> {
    let runs_on = env.runs_on.unwrap_or_default();
    if runs_on == RunsOn::Local {
        if env.slurm.is_some() {
            return Err(Error::Invalid(format!(
                "{at}.slurm: the environment runs on the server's host; set runs_on = \"slurm\" \
                 to run it on Slurm, or remove [environments.slurm]"
            )));
        }
        if env.on_node_failure.is_some() {
            return Err(Error::Invalid(format!(
                "{at}.on_node_failure: only an environment with runs_on = \"slurm\" has nodes \
                 that can fail"
            )));
        }
        return Ok(None);
    }
    if env.harness == Harness::Demo {
        return Err(Error::Invalid(format!(
            "{at}.runs_on: the 'demo' harness runs in-process; only agents that are processes \
             can run on Slurm"
        )));
    }
    if sandbox != Some(Sandbox::Bwrap) {
        return Err(Error::Invalid(format!(
            "{at}.sandbox: runs_on = \"slurm\" runs every agent in bubblewrap on its node, \
             which is how the agent gets its variables and secrets without them passing \
             through Slurm; leave sandbox out or set it to \"bwrap\""
        )));
    }
    if env.workspace_root.is_none() {
        return Err(Error::Invalid(format!(
            "{at}.workspace_root: runs_on = \"slurm\" needs a workspace_root on a filesystem \
             the server and every node share at the same path (docs/slurm.md)"
        )));
    }
    if env.pids_max.is_some() {
        return Err(Error::Invalid(format!(
            "{at}.pids_max: Slurm has no per-job limit on processes; leave pids_max out of an \
             environment with runs_on = \"slurm\""
        )));
    }
    let Some(file) = &env.slurm else {
        return Err(Error::Invalid(format!(
            "{at}.slurm: runs_on = \"slurm\" needs an [environments.slurm] table with at least \
             the partition, e.g. partition = \"agents\""
        )));
    };
    let Some(partition) = file.partition.clone() else {
        return Err(Error::Invalid(format!(
            "{at}.slurm.partition: required (the Slurm partition the environment's executions \
             are allocated in)"
        )));
    };
    for (field, value) in [
        ("partition", Some(&partition)),
        ("constraint", file.constraint.as_ref()),
        ("account", file.account.as_ref()),
        ("qos", file.qos.as_ref()),
        ("gres", file.gres.as_ref()),
    ] {
        if let Some(value) = value {
            if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(Error::Invalid(format!(
                    "{at}.slurm.{field}: {value:?} must be non-empty, without spaces or control \
                     characters"
                )));
            }
        }
    }
    check_extra_args(at, &file.extra_args)?;
    Ok(Some(Slurm {
        partition,
        constraint: file.constraint.clone(),
        account: file.account.clone(),
        qos: file.qos.clone(),
        gres: file.gres.clone(),
        extra_args: file.extra_args.clone(),
        on_node_failure: env.on_node_failure.unwrap_or_default(),
    }))
}

/// `[environments.slurm]`'s `extra_args`: each an option (with its value in the same element),
/// none of those runledger sets itself.
fn check_extra_args(at: &str, extra_args: &[String]) -> Result<(), Error> {
    for (i, arg) in extra_args.iter().enumerate() {
        if !arg.starts_with('-') || arg.chars().any(char::is_control) {
            return Err(Error::Invalid(format!(
                "{at}.slurm.extra_args[{i}]: {arg:?} is not an option; write each option with its \
                 value as one element, e.g. \"--reservation=agents\""
            )));
        }
        let name = arg.split('=').next().unwrap_or(arg);
        // A short option with its value attached (`-c4`) is named by its first two bytes; a
        // first character beyond ASCII names no option of ours (and is no char boundary).
        let name = match name.get(..2) {
            Some(short) if !name.starts_with("--") => short,
            _ => name,
        };
        if SLURM_OPTIONS_OF_OURS.contains(&name) {
            return Err(Error::Invalid(format!(
                "{at}.slurm.extra_args[{i}]: {arg:?} is set by runledger itself (from the \
                 environment's slurm table, limits and max_runtime_secs); remove it"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::load_text;
    use runledger_domain::harness::OnNodeFailure;

    const SLURM_ENV: &str = "[[environments]]\nid = \"hpc\"\nharness = \"command\"\ncommand = [\"agent\"]\nworkspace_root = \"/shared/ws\"\nruns_on = \"slurm\"\nmemory_mb = 2048\ncpu_percent = 150\n";

    #[test]
    fn a_slurm_environment_reads_its_table_and_defaults_to_failing_lost_executions() {
        let config = load_text(&format!(
            "{SLURM_ENV}on_node_failure = \"requeue\"\n[environments.slurm]\npartition = \"agents\"\nconstraint = \"zone-a\"\naccount = \"lab\"\nqos = \"normal\"\ngres = \"gpu:1\"\nextra_args = [\"--reservation=r1\", \"--exclusive\"]\n"
        ))
        .expect("valid");
        let slurm = config.environment("hpc").and_then(|e| e.slurm.clone());
        assert_eq!(
            slurm,
            Some(Slurm {
                partition: "agents".into(),
                constraint: Some("zone-a".into()),
                account: Some("lab".into()),
                qos: Some("normal".into()),
                gres: Some("gpu:1".into()),
                extra_args: vec!["--reservation=r1".into(), "--exclusive".into()],
                on_node_failure: OnNodeFailure::Requeue,
            })
        );
        let config = load_text(&format!(
            "{SLURM_ENV}[environments.slurm]\npartition = \"agents\"\n"
        ))
        .expect("valid");
        let env = config.environment("hpc").expect("hpc");
        assert_eq!(
            env.slurm.as_ref().map(|s| s.on_node_failure),
            Some(OnNodeFailure::Fail)
        );
        let local =
            load_text("[[environments]]\nid = \"l\"\nharness = \"command\"\ncommand = [\"a\"]\n")
                .expect("valid");
        assert_eq!(local.environment("l").and_then(|e| e.slurm.clone()), None);
    }

    #[test]
    fn an_extra_arg_beyond_ascii_is_read_without_panicking() {
        let config = load_text(&format!(
            "{SLURM_ENV}[environments.slurm]\npartition = \"agents\"\nextra_args = [\"-é\", \"-€x\"]\n"
        ))
        .expect("valid");
        let slurm = config.environment("hpc").and_then(|e| e.slurm.clone());
        assert_eq!(
            slurm.map(|s| s.extra_args),
            Some(vec!["-é".into(), "-€x".into()])
        );
    }

    #[test]
    fn slurm_settings_that_cannot_work_are_refused_naming_the_field() {
        let table = "[environments.slurm]\npartition = \"agents\"\n";
        for (text, field) in [
            // A table without runs_on, and the other way round.
            (
                "[[environments]]\nid = \"x\"\nharness = \"command\"\ncommand = [\"a\"]\n[environments.slurm]\npartition = \"p\"\n".to_string(),
                "environments[0].slurm:",
            ),
            (
                "[[environments]]\nid = \"x\"\nharness = \"command\"\ncommand = [\"a\"]\non_node_failure = \"requeue\"\n".to_string(),
                "environments[0].on_node_failure",
            ),
            (SLURM_ENV.to_string(), "environments[0].slurm:"),
            (
                format!("{SLURM_ENV}[environments.slurm]\nconstraint = \"a\"\n"),
                "environments[0].slurm.partition",
            ),
            (
                format!("{SLURM_ENV}[environments.slurm]\npartition = \"two words\"\n"),
                "environments[0].slurm.partition",
            ),
            (
                format!("{SLURM_ENV}{table}extra_args = [\"--mem=1G\"]\n"),
                "environments[0].slurm.extra_args[0]",
            ),
            (
                format!("{SLURM_ENV}{table}extra_args = [\"-c4\"]\n"),
                "environments[0].slurm.extra_args[0]",
            ),
            (
                format!("{SLURM_ENV}{table}extra_args = [\"--exclusive\", \"reservation\"]\n"),
                "environments[0].slurm.extra_args[1]",
            ),
            (
                format!("{}{table}", SLURM_ENV.replace("workspace_root = \"/shared/ws\"\n", "")),
                "environments[0].workspace_root",
            ),
            (
                format!("{}sandbox = \"none\"\n{table}", SLURM_ENV),
                "environments[0].sandbox",
            ),
            (
                format!("{}pids_max = 64\n{table}", SLURM_ENV),
                "environments[0].pids_max",
            ),
            (
                "[[environments]]\nid = \"d\"\nharness = \"demo\"\nruns_on = \"slurm\"\n".to_string(),
                "environments[0].runs_on",
            ),
        ] {
            let err = load_text(&text).expect_err(&text).to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
    }
}
