//! Sample runs for unit tests, here and in the crates above (through the `testing` feature,
//! which their dev-dependencies turn on). Built through `evolve`, as the log would build them;
//! never compiled into the service.

use crate::events::{
    AgentConfig, Creator, CreatorKind, Event, RunAdmitted, RunCreated, SourceType,
};
use crate::ids::{RunId, Timestamp};
use crate::run::{evolve, Run};

/// A freshly created run (id time `1_000_000 + i` ms, title `run {i}`), for unit tests.
pub fn sample_run(i: u64) -> Run {
    let id = RunId::new(Timestamp(1_000_000 + i), u128::from(i));
    match evolve(
        None,
        id,
        &Event::Admitted(RunAdmitted::from_legacy(sample_created(i))),
        id.created_at(),
    ) {
        Some(run) => run,
        None => unreachable!("a Created event always makes a run"),
    }
}

/// The creation of `sample_run(i)`.
pub fn sample_created(i: u64) -> RunCreated {
    RunCreated {
        title: format!("run {i}"),
        prompt: "p".into(),
        config: AgentConfig::default(),
        creator: Creator {
            kind: CreatorKind::User,
            uid: "k".into(),
            display_name: "k".into(),
        },
        source: SourceType::Api,
        metadata: Default::default(),
    }
}
