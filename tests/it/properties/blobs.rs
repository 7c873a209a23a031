//! Values on both sides of sled's blob threshold sync without a false failure and read back whole
//! after a reopen.

use super::support::*;
use proptest::prelude::*;
use runledger::domain::{decide, Command, RunAdmitted, RunId, Timestamp};
use runledger::store::{self, Store};

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, .. ProptestConfig::default() })]

    /// sled writes messages over its blob threshold (a quarter segment, 128 KiB; a node page
    /// of several large values gets there too) to blob files it removes again once superseded.
    /// Group commits racing those removals must never fail, and every acknowledged value must
    /// read back whole, on either side of the threshold.
    #[test]
    fn values_across_the_blob_threshold_sync_and_read_back(
        sizes in proptest::collection::vec(1_024usize..200 * 1024, 4..24),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = store::Options { cache_bytes: 8 << 20, ..store::Options::default() };
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let mut written = Vec::new();
        {
            let store = Store::open(dir.path(), &options).expect("open");
            for (i, size) in sizes.iter().enumerate() {
                let spec = one_queued_run();
                let mut created = created(&spec);
                created.prompt = char::from(b'a' + (i % 26) as u8).to_string().repeat(*size);
                let id = RunId::new(Timestamp(1_000_000 + i as u64), i as u128);
                let decision = decide(
                    None,
                    Command::create(RunAdmitted::from_legacy(created), Vec::new(), None),
                )
                .expect("create");
                let envelopes = store::envelopes(id, 0, Timestamp(1_000_000), decision.events, None);
                store.append(&envelopes).expect("append");
                runtime.block_on(store.sync()).expect("no false sync failure");
                written.push((id, envelopes));
            }
        }
        // A value over the threshold went to a blob file: the test covers both sides.
        if sizes.iter().any(|s| *s > 130 * 1024) {
            let blobs = std::fs::read_dir(dir.path().join("sled/blobs")).expect("blobs").count();
            prop_assert!(blobs > 0, "no blob file for values up to {:?}", sizes.iter().max());
        }
        // The dropped store's background threads let go of sled's file lock a moment after
        // the drop: the reopen waits for it (as `store::tests` does).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let store = loop {
            match Store::open(dir.path(), &options) {
                Err(store::Error::Locked(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                result => break result.expect("reopen"),
            }
        };
        for (id, envelopes) in &written {
            let stored: Vec<_> = store
                .run_events(*id, 0)
                .collect::<Result<_, _>>()
                .expect("read");
            prop_assert_eq!(&stored, envelopes);
        }
    }
}
