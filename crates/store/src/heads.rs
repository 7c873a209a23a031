//! The chain heads the store keeps in memory between seals: the heads of the runs written since
//! the last seal (the next seal's leaves), and whether this process has marked the store as
//! holding writes no seal covers. Only the state; `chain.rs` and `seals/` use it.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use runledger_domain::RunId;

/// A chain's head: the sequence number of its last record and that record's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub link: [u8; 32],
}

/// The chain heads `append` keeps: those of the runs written since the last seal (the next
/// seal's leaves), and whether this process has already marked the store as holding writes no
/// seal covers.
#[derive(Default)]
pub(crate) struct Heads {
    pub(crate) written: Mutex<HashMap<RunId, Head>>,
    pub(crate) unsealed_marked: AtomicBool,
}
