//! The admin audit log's state inside the `Store` handle: its sled tree and the lock that
//! serialises appends and caches the head (the next sequence number and the link to chain
//! onto). Only state and its opening live here; what the records are and how they are written
//! and checked is `admin_log`'s.

use crate::layout::ADMIN_LOG;
use crate::Error;

/// The admin log's tree and the lock that serialises its appends.
pub(crate) struct AdminLog {
    pub(crate) tree: sled::Tree,
    /// The next sequence number and the link to chain onto; `None` until the first append
    /// reads them from the tree (and again after a restore or an overwrite).
    pub(crate) head: std::sync::Mutex<Option<(u64, [u8; 32])>>,
}

impl AdminLog {
    pub(crate) fn open(db: &sled::Db) -> Result<AdminLog, Error> {
        Ok(AdminLog {
            tree: db.open_tree(ADMIN_LOG)?,
            head: std::sync::Mutex::new(None),
        })
    }
}
