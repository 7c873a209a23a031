//! Time travel against the log: for generated histories and every N, the state `History::as_of`
//! answers (`runledger::actor::state_at`, the fold it runs after bounding N by the durable
//! events) equals folding the first N+1 events with `domain::fold`, and one past the end is no
//! state. `tests/it/travel.rs` checks the handle and `…/states` through the real binary.

use super::support::*;
use proptest::prelude::*;
use runledger::actor::{fold_through, state_at};
use runledger::domain::fold;
use runledger::store::Envelope;

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn the_state_as_of_every_event_is_the_fold_of_the_events_up_to_it(
        specs in proptest::collection::vec(run_spec(), 1..8)
    ) {
        let (_dir, store, index) = open();
        let live = populate(&store, &index, &specs);
        for run in &live {
            let log: Vec<Envelope> = store
                .run_events(run.id, 0)
                .collect::<Result<_, _>>()
                .expect("log");
            prop_assert_eq!(log.len() as u64, run.next_seq);
            for n in 0..log.len() {
                let expected = fold(run.id, log[..=n].iter().map(|e| (&e.event, e.at)));
                prop_assert!(expected.is_some());
                let got = state_at(&store, run.id, n as u64).expect("state");
                prop_assert_eq!(&got, &expected, "run {} event {}", run.id, n);
                // The same fold over any iterator, stopped at its event.
                let again = fold_through(run.id, log.iter().cloned().map(Ok::<_, ()>), n as u64);
                prop_assert_eq!(again, Ok(expected));
            }
            prop_assert_eq!(state_at(&store, run.id, run.next_seq).expect("none"), None);
            // The last state is the live one.
            let last = state_at(&store, run.id, run.next_seq - 1).expect("state");
            prop_assert_eq!(last.as_ref(), Some(run));
        }
    }
}
