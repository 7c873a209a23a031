//! Histories made by the rules themselves, for what the stores in the corpus do not hold: each
//! is a list of commands decided (`domain::decide`) against the state its events fold to, so it
//! is a history the service could write, with records of schema version 1 (before origins) and
//! 2, and every event variant among them (a legacy `Created`, a schedule's, a Slurm placement
//! lost and requeued, artifacts of every kind, a cancel with its reason, revoked links, a
//! rerun and a fork).

use runledger::domain::{
    decide, evolve, Attachment, Channel, Command, Derivation, Event, FollowupMode, Origin,
    OriginKey, RepoPin, Run, RunAdmitted, RunDerivation, RunId, StatusMessage, Timestamp,
};
use runledger::store::chain::{envelope_link, GENESIS};
use runledger::store::codec::{encode, encode_run, Envelope, LegacyEnvelope};

/// One synthetic history, ready to be written.
pub struct Made {
    pub name: &'static str,
    pub about: &'static str,
    pub run_id: RunId,
    pub records: Vec<Vec<u8>>,
    pub state: Run,
}

/// The golden sample named `name` (`tests/it/golden.rs`).
fn sample(name: &str) -> Event {
    crate::golden::samples()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, e)| e)
        .unwrap_or_else(|| panic!("no golden sample {name}"))
}

fn admitted() -> RunAdmitted {
    match sample("admitted") {
        Event::Admitted(a) => a,
        _ => unreachable!("the sample is an admission"),
    }
}

fn attachments() -> Vec<Attachment> {
    match sample("attached") {
        Event::Attached { attachments } => attachments,
        _ => unreachable!(),
    }
}

fn api(reason: Option<&str>) -> Option<Origin> {
    Some(Origin {
        channel: Channel::Api,
        key: Some(OriginKey {
            id: "01KEYALICE".into(),
            name: "alice".into(),
            kind: "personal".into(),
            team: "infra".into(),
            admin: false,
        }),
        request_id: Some("01REQ".into()),
        client_addr: Some("203.0.113.7".into()),
        user_agent: Some("oz-agent-sdk/0.15.0".into()),
        cause: None,
        reason: reason.map(str::to_string),
    })
}

fn system(cause: &str) -> Option<Origin> {
    Some(Origin::system(cause))
}

/// Builds one history: `first` (a legacy `Created`, recorded as is) if given, then each
/// command decided against the state so far, its events recorded one second apart.
struct Builder {
    id: RunId,
    at: u64,
    run: Option<Run>,
    envelopes: Vec<Envelope>,
}

impl Builder {
    fn new(n: u128) -> Builder {
        let at = 1_764_000_000_000 + n as u64 * 86_400_000;
        Builder {
            id: RunId::new(Timestamp(at), n),
            at,
            run: None,
            envelopes: Vec::new(),
        }
    }

    fn record(&mut self, event: Event, origin: Option<Origin>) {
        self.at += 1_000;
        self.run = evolve(self.run.take(), self.id, &event, Timestamp(self.at));
        self.envelopes.push(Envelope {
            run_id: self.id,
            seq: self.envelopes.len() as u64,
            at: Timestamp(self.at),
            event,
            origin,
        });
    }

    fn then(mut self, command: Command, origin: Option<Origin>) -> Builder {
        let decision = decide(self.run.as_ref(), command.clone())
            .unwrap_or_else(|r| panic!("{command:?} refused: {r}"));
        for event in decision.events {
            self.record(event, origin.clone());
        }
        self
    }

    fn made(self, name: &'static str, about: &'static str, v1: bool) -> Made {
        let mut prev = GENESIS;
        let records = self
            .envelopes
            .iter()
            .map(|e| {
                if v1 {
                    encode(&LegacyEnvelope {
                        run_id: e.run_id,
                        seq: e.seq,
                        at: e.at,
                        event: e.event.clone(),
                    })
                    .expect("encodes")
                } else {
                    let record = encode_run(e, &prev).expect("encodes");
                    prev = envelope_link(&prev, e).expect("links");
                    record
                }
            })
            .collect();
        Made {
            name,
            about,
            run_id: self.id,
            records,
            state: self.run.expect("a history makes a run"),
        }
    }
}

fn start() -> Command {
    Command::Start { placement: None }
}

fn ok(execution: u32) -> Command {
    Command::Finish {
        execution,
        outcome: Ok(()),
    }
}

fn followup(message: &str) -> Command {
    Command::Followup {
        message: message.into(),
        mode: FollowupMode::Normal,
        by: "01KEYALICE".into(),
    }
}

fn usage(execution: u32) -> Command {
    match sample("usage_recorded") {
        Event::UsageRecorded { usage, .. } => Command::RecordUsage { execution, usage },
        _ => unreachable!(),
    }
}

fn artifact(name: &str) -> Command {
    match sample(name) {
        Event::ArtifactReported { artifact, .. } => Command::ReportArtifact {
            execution: 1,
            artifact,
        },
        _ => unreachable!(),
    }
}

fn status(name: &str) -> StatusMessage {
    match sample(name) {
        Event::Failed { status, .. } | Event::Lost { status, .. } => status,
        _ => unreachable!(),
    }
}

/// Every synthetic history of the corpus.
pub fn all() -> Vec<Made> {
    let mut legacy = Builder::new(1);
    legacy.record(sample("created"), None);
    let placement = match sample("started_on") {
        Event::StartedOn { placement, .. } => placement,
        _ => unreachable!(),
    };
    let schedule = match sample("scheduled") {
        Event::Scheduled { schedule } => schedule,
        _ => unreachable!(),
    };
    let rerun = RunDerivation {
        from: RunId::new(Timestamp(1_764_000_000_000), 2).to_string(),
        kind: Derivation::Rerun {
            pinned: true,
            pins: vec![RepoPin {
                repository: "https://git.example.com/acme/api.git".into(),
                commit: "9fceb02d0ae598e95dc970b74767f19372d61af8".into(),
            }],
        },
    };
    let fork = RunDerivation {
        from: RunId::new(Timestamp(1_764_000_000_000), 2).to_string(),
        kind: Derivation::Fork {
            after_execution: 1,
            message: "Keep the cache this time".into(),
        },
    };
    vec![
        legacy
            .then(start(), None)
            .then(followup("also update the changelog"), None)
            .then(
                Command::Delivered {
                    execution: 1,
                    count: 1,
                },
                None,
            )
            .then(usage(1), None)
            .then(ok(1), None)
            .made(
                "rules-v1-legacy-created",
                "a run from before teams (a legacy Created), one execution taking a follow-up; \
                 schema version 1 records",
                true,
            ),
        Builder::new(2)
            .then(
                Command::create(admitted(), attachments(), Some(schedule)),
                None,
            )
            .then(start(), None)
            .then(artifact("artifact_reported"), None)
            .then(artifact("artifact_reported_pull_request"), None)
            .then(artifact("artifact_reported_plan"), None)
            .then(artifact("artifact_reported_screenshot"), None)
            .then(usage(1), None)
            .then(
                Command::Finish {
                    execution: 1,
                    outcome: Err(status("failed")),
                },
                None,
            )
            .then(followup("try again with the fix"), None)
            .then(start(), None)
            .then(ok(2), None)
            .made(
                "rules-v1-scheduled-attachments-artifacts",
                "a schedule's run with attachments, artifacts of every kind, a failure and a \
                 follow-up that resumed it; schema version 1 records",
                true,
            ),
        Builder::new(3)
            .then(Command::create(admitted(), Vec::new(), None), api(None))
            .then(
                Command::Start {
                    placement: Some(placement.clone()),
                },
                system("a slot came free"),
            )
            .then(
                Command::Lose {
                    execution: 1,
                    status: status("lost"),
                },
                system("node gpu-07 failed"),
            )
            .then(
                Command::Start {
                    placement: Some(placement),
                },
                system("a slot came free"),
            )
            .then(followup("and the docs"), api(None))
            .then(
                Command::RevokeSessionLink {
                    by: "01KEYALICE".into(),
                },
                api(None),
            )
            .then(
                Command::Cancel {
                    by: "01KEYBOB".into(),
                },
                api(Some("superseded by the hotfix")),
            )
            .then(usage(2), system("the agent exited"))
            .made(
                "rules-v2-slurm-lost-cancelled",
                "a Slurm execution lost with its node and requeued, a follow-up, a revoked \
                 session link and a cancel with its reason; schema version 2 records with origins",
                false,
            ),
        Builder::new(4)
            .then(Command::create(admitted(), Vec::new(), None), api(None))
            .then(start(), system("a slot came free"))
            .then(followup("one more thing"), api(None))
            .then(ok(1), system("the agent exited"))
            .then(start(), system("a slot came free"))
            .then(usage(2), system("the agent exited"))
            .then(ok(2), system("the agent exited"))
            .made(
                "rules-v2-requeued",
                "an execution that ended owing a follow-up (Requeued) and the next that took \
                 it; schema version 2 records",
                false,
            ),
        Builder::new(5)
            .then(Command::derive(admitted(), attachments(), rerun), api(None))
            .then(start(), system("a slot came free"))
            .then(ok(1), system("the agent exited"))
            .made(
                "rules-v2-derived-rerun",
                "a pinned rerun of another run, with attachments; schema version 2 records",
                false,
            ),
        Builder::new(6)
            .then(Command::derive(admitted(), Vec::new(), fork), api(None))
            .then(start(), system("a slot came free"))
            .then(ok(1), system("the agent exited"))
            .made(
                "rules-v2-derived-fork",
                "a fork of another run after its first execution; schema version 2 records",
                false,
            ),
        Builder::new(7)
            .then(Command::create(admitted(), Vec::new(), None), api(None))
            .then(start(), system("a slot came free"))
            .then(
                Command::RecordProvenance {
                    execution: 1,
                    provenance: provenance(),
                },
                system("execution 1 is about to start its agent"),
            )
            .then(ok(1), system("the agent exited"))
            .made(
                "rules-v2-provenance",
                "an execution that recorded its provenance before its agent; schema version 2 \
                 records",
                false,
            ),
        Builder::new(8)
            .then(Command::create(admitted(), Vec::new(), None), api(None))
            .then(start(), system("a slot came free"))
            .then(
                Command::RecordChanges {
                    execution: 1,
                    changes: changes(),
                },
                system("execution 1's agent exited: what it changed was computed"),
            )
            .then(ok(1), system("the agent exited"))
            .made(
                "rules-v2-changes",
                "an execution that recorded what it changed before its end; schema version 2 \
                 records",
                false,
            ),
    ]
}

fn changes() -> runledger::domain::ExecutionChanges {
    match sample("changes") {
        Event::Changes { changes, .. } => changes,
        _ => unreachable!("the sample is changes"),
    }
}

fn provenance() -> runledger::domain::ExecutionProvenance {
    match sample("provenance") {
        Event::Provenance { provenance, .. } => provenance,
        _ => unreachable!("the sample is a provenance"),
    }
}
