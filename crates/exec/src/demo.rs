//! The built-in `demo` agent: needs nothing installed. It writes what it was asked and its
//! configuration to the transcript, works for the environment's `demo_duration_ms` in four
//! steps (so every state can be seen by polling, and a run can be cancelled while in
//! progress), acknowledges follow-ups as they arrive, and succeeds.

use std::time::Duration;

use tokio::sync::mpsc;

use super::transcript::{Entry, Transcripts};
use super::{Assignment, Control, Deliveries};
use runledger_domain::StatusMessage;

const STEPS: u32 = 4;

/// Works on one execution. `None` if it was stopped, otherwise its outcome.
pub(super) async fn run(
    job: &Assignment,
    transcripts: &Transcripts,
    mut control: mpsc::UnboundedReceiver<Control>,
    deliveries: Deliveries,
) -> Option<Result<(), StatusMessage>> {
    let id = job.run.id;
    // One open per execution, not per line: opening a file in a directory of a million
    // transcripts was 7 % of the server's CPU under load with runs that finish at once.
    let mut writer = match transcripts.writer(id) {
        Ok(w) => w,
        Err(e) => return Some(Err(transcript_failure(e))),
    };
    let mut write = |stream: &str, text: String| {
        let entry = Entry {
            at: runledger_base::clock::now(),
            execution: job.execution,
            stream: stream.into(),
            text,
            continued: false,
        };
        writer.append(&entry)
    };
    let config = serde_json::json!({
        "name": job.run.config.name,
        "model_id": job.run.config.model_id,
        "environment_id": job.environment.id,
        "skill_spec": job.run.config.skill_spec,
        "base_prompt": job.run.config.base_prompt,
        "mcp_servers": job.run.config.mcp_servers.keys().collect::<Vec<_>>(),
    });
    let mut intro = vec![
        format!("demo agent: execution {} of run {id}", job.execution),
        format!("prompt: {}", job.run.prompt),
        format!("config: {config}"),
    ];
    if let Some(f) = &job.resumed_by {
        intro.push(format!(
            "resumed by follow-up ({}): {}",
            f.mode.as_str(),
            f.message
        ));
    }
    for f in &job.followups {
        intro.push(format!(
            "queued follow-up ({}): {}",
            f.mode.as_str(),
            f.message
        ));
    }
    for line in intro {
        if let Err(e) = write("stdout", line) {
            return Some(Err(transcript_failure(e)));
        }
    }
    // The follow-ups that waited for this execution are in its intro.
    deliveries.took(u32::try_from(job.followups.len()).unwrap_or(u32::MAX));
    let step = Duration::from_millis(job.environment.demo_duration_ms / u64::from(STEPS));
    for n in 1..=STEPS {
        let sleep = tokio::time::sleep(step);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                message = control.recv() => match message {
                    Some(Control::Followup(f)) => {
                        if let Err(e) = write("followup", format!("({}) {}", f.mode.as_str(), f.message)) {
                            return Some(Err(transcript_failure(e)));
                        }
                        deliveries.took(1);
                    }
                    Some(Control::Stop) | None => {
                        let _ = write("system", "demo agent: stopped".into());
                        return None;
                    }
                },
            }
        }
        if let Err(e) = write("stdout", format!("working… step {n}/{STEPS}")) {
            return Some(Err(transcript_failure(e)));
        }
    }
    if let Err(e) = write("stdout", "done".into()) {
        return Some(Err(transcript_failure(e)));
    }
    Some(Ok(()))
}

fn transcript_failure(e: std::io::Error) -> StatusMessage {
    tracing::error!(error = %e, "cannot write transcript");
    let cause = runledger_store::health::Cause::of_io(&e);
    StatusMessage {
        message: match cause {
            runledger_store::health::Cause::Io => {
                "the service could not write the run's transcript".into()
            }
            _ => format!(
                "{}: the service could not write the run's transcript",
                cause.words()
            ),
        },
        error_code: Some("internal_error".into()),
        retryable: Some(true),
    }
}
