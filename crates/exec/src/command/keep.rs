//! The last step of an execution: its snapshot (`snapshot::take`), when its environment keeps
//! them and its workspace was made whole (setup succeeded once). The copy runs on a blocking
//! thread; its result is a system line of the execution's transcript: what was kept and what
//! was left out, or why nothing was (over `snapshot_max_mb`, a path the agent made unsafe).

use super::execution::Execution;
use crate::snapshot;

pub(super) async fn keep_snapshot(x: &mut Execution<'_>) {
    let Some(limits) = x.job.environment.snapshots else {
        return;
    };
    let Some(files) = x.setup_done.parent().map(|p| p.to_path_buf()) else {
        return;
    };
    if !x.setup_done.exists() {
        return;
    }
    let (workspace, home, session) = (x.workspace.clone(), x.home.clone(), x.session_path.clone());
    let execution = x.job.execution;
    let reader = x.sup.sandboxes.owner();
    let taken = tokio::task::spawn_blocking(move || {
        let source = snapshot::Source {
            files: &files,
            workspace: &workspace,
            home: &home,
            session: &session,
        };
        snapshot::take(&source, execution, reader, limits.max_bytes)
    })
    .await;
    let line = match taken {
        Ok(Ok(copied)) => {
            let mut line = format!(
                "snapshot of execution {execution} kept ({} KiB counted)",
                copied.counted.div_ceil(1024)
            );
            if copied.special > 0 {
                line.push_str(&format!(
                    "; {} FIFO(s), socket(s) or device(s) left out",
                    copied.special
                ));
            }
            if copied.unreadable > 0 {
                line.push_str(&format!(
                    "; {} file(s) the agent's user cannot read left out",
                    copied.unreadable
                ));
            }
            line
        }
        Ok(Err(e)) => format!("snapshot of execution {execution} not kept: {e}"),
        Err(e) => format!("snapshot of execution {execution} not kept: {e}"),
    };
    x.system(line);
}
