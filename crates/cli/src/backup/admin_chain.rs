//! The admin audit records of a backup, checked as they are restored: each must be the next
//! of the chain (sequence numbers from 0 without a gap), chain onto the link of the one before,
//! and have the link its content gives. A record edited in the export (its data, its origin,
//! its time) no longer does, and the import is refused naming its sequence number. It writes
//! nothing itself; `restore` stores what passes.

use runledger_format::admin::{admin_record_from_json, AdminItem};
use runledger_store::admin_log::{self, GENESIS};
use runledger_store::AdminRecord;

/// Where the chain of the records read so far ends.
pub(super) struct AdminChain {
    next_seq: u64,
    prev: [u8; 32],
}

impl Default for AdminChain {
    fn default() -> Self {
        AdminChain {
            next_seq: 0,
            prev: GENESIS,
        }
    }
}

impl AdminChain {
    /// The record `item` names, if it is the next link of the chain.
    pub(super) fn next(&mut self, item: &AdminItem) -> Result<AdminRecord, String> {
        let (record, claimed) = admin_record_from_json(item).map_err(|e| e.to_string())?;
        let seq = record.seq;
        if seq != self.next_seq {
            return Err(format!(
                "admin record {seq} where admin record {} was due: the admin log is not whole",
                self.next_seq
            ));
        }
        if record.prev != self.prev {
            let before = seq.saturating_sub(1);
            return Err(format!(
                "admin record {seq} does not chain onto admin record {before}: record {before} \
                 (or the prev of {seq}) was changed after it was written"
            ));
        }
        let (_, link) = admin_log::encode(&record).map_err(|e| e.to_string())?;
        if link != claimed {
            return Err(format!(
                "admin record {seq} was changed after it was written: its content does not \
                 give its link"
            ));
        }
        self.next_seq = seq + 1;
        self.prev = link;
        Ok(record)
    }
}
