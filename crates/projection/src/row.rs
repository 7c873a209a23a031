//! The encoding of a row: a run's folded state as the `runs` tree stores it. Changing it means
//! bumping `LAYOUT_VERSION` (`layout.rs`).

use runledger_domain::{Run, RunId};

use crate::Error;

pub(crate) fn encode_row(run: &Run) -> Result<Vec<u8>, Error> {
    postcard::to_allocvec(run).map_err(|e| Error::CorruptRow {
        run_id: run.id.to_string(),
        detail: e.to_string(),
    })
}

pub(crate) fn decode_row(id: RunId, bytes: &[u8]) -> Result<Run, Error> {
    postcard::from_bytes(bytes).map_err(|e| Error::CorruptRow {
        run_id: id.to_string(),
        detail: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of an older layout is a row of this one without its trailing fields
    /// (`Run::schedule` since 10, `Run::session_epoch` since 11): it fails to decode rather
    /// than reading as some other run (the start rebuilds such an index anyway,
    /// `LAYOUT_VERSION`), and a row of this layout reads back whole.
    #[test]
    fn a_row_without_the_later_fields_does_not_decode() {
        let mut run = runledger_domain::sample_run(3);
        let row = encode_row(&run).expect("encodes");
        assert_eq!(row.last(), Some(&0), "epoch 0 is the last byte");
        assert_eq!(decode_row(run.id, &row).expect("decodes"), run);
        for cut in [1, 2] {
            let old = &row[..row.len() - cut];
            assert!(matches!(
                decode_row(run.id, old),
                Err(Error::CorruptRow { .. })
            ));
        }
        run.session_epoch = 300;
        let row = encode_row(&run).expect("encodes");
        assert_eq!(decode_row(run.id, &row).expect("decodes"), run);
        run.schedule = Some(runledger_domain::RunSchedule {
            schedule_id: RunId(7),
            schedule_name: "n".into(),
            cron_schedule: "@daily".into(),
            due: runledger_domain::Timestamp(5),
        });
        let row = encode_row(&run).expect("encodes");
        assert_eq!(decode_row(run.id, &row).expect("decodes"), run);
    }
}
