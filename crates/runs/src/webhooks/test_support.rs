//! What the webhooks' unit tests share: a store with one run's first event in its log and a
//! configuration with one subscription, and an owed delivery of that run. Test code only.

use super::Owed;
use runledger_config::Config;
use runledger_domain::{sample_created, Event, RunAdmitted, RunId, Timestamp, Topic};
use runledger_store::{self as store, Store};

/// A store with the first event of one run in its log, and a configuration with one
/// subscription, `ci`.
pub(super) fn setup(dir: &std::path::Path) -> (Config, Store, RunId) {
    let secret = dir.join("secret");
    std::fs::write(&secret, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("write");
    let path = dir.join("runledger.toml");
    std::fs::write(
        &path,
        format!(
            "[[webhooks]]\nname = \"ci\"\nurl = \"https://hooks.example/x\"\nsecret_file = {:?}\n",
            secret.display().to_string()
        ),
    )
    .expect("write");
    let overrides = runledger_config::Overrides {
        data_dir: Some(dir.join("data")),
        ..Default::default()
    };
    let config = Config::load(Some(&path), &overrides).expect("config");
    let store = Store::open(&dir.join("data"), &store::Options::default()).expect("store");
    let id = RunId::new(Timestamp(1_000), 1);
    let admitted = Event::Admitted(RunAdmitted::from_legacy(sample_created(1)));
    store
        .append(&store::envelopes(
            id,
            0,
            Timestamp(1_000),
            vec![admitted],
            None,
        ))
        .expect("append");
    (config, store, id)
}

pub(super) fn owed(id: RunId, seq: u64, subscription: &str) -> Owed {
    Owed {
        at: Timestamp(1_000),
        run_id: id,
        seq,
        subscription: subscription.into(),
        topic: Topic::Queued,
    }
}
