//! Whether the store can durably write, and the refusals that follow when it cannot.
//!
//! Two conditions stop writes, and they differ in how they end:
//! - **Failed** (sticky until a restart): a group commit, or a sled write, returned an error.
//!   After a failed fsync the kernel may have dropped the dirty pages it could not write and
//!   a retried fsync can report success without them (PostgreSQL's "fsyncgate"), so no later
//!   sync of this process is trusted: every append is refused from then on, before anything
//!   reaches the log, and the next start recovers from what is on disk.
//! - **Low on space** (clears by itself): the space monitor saw the data directory's
//!   filesystem fall below the reserve before any write failed. Requests that add work
//!   (create, follow-up, cancel, key changes) and the start of queued runs are refused, while
//!   the runs in progress may still record how they end; once space is back, writes resume.
//!
//! The check on the append path is one atomic load. This module owns the condition, the
//! operator's words for each cause, the refused-writes counter and the log line per change of
//! state; it knows nothing of HTTP (`http/problem.rs` turns a `Refusal` into an answer) and
//! does no I/O itself (`space.rs` watches the filesystem).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// Why the store cannot write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The filesystem has no space left (`ENOSPC`, or a quota: `EDQUOT`).
    NoSpace,
    /// The filesystem is mounted read-only (or was switched to it after an error).
    ReadOnly,
    /// Any other I/O error: a failing device, a failed fsync.
    Io,
}

impl Cause {
    /// The cause an I/O error shows.
    pub fn of_io(e: &std::io::Error) -> Cause {
        use std::io::ErrorKind;
        match (e.raw_os_error(), e.kind()) {
            (Some(libc_errno::ENOSPC | libc_errno::EDQUOT), _) => Cause::NoSpace,
            (Some(libc_errno::EROFS), _) => Cause::ReadOnly,
            // sled copies the errors it records (`Error::clone`), keeping only their kind.
            (_, ErrorKind::StorageFull | ErrorKind::QuotaExceeded) => Cause::NoSpace,
            (_, ErrorKind::ReadOnlyFilesystem) => Cause::ReadOnly,
            _ => Cause::Io,
        }
    }

    /// The cause a sled error shows; sled wraps the I/O errors of its writes.
    pub fn of_sled(e: &sled::Error) -> Cause {
        match e {
            sled::Error::Io(io) => Cause::of_io(io),
            _ => Cause::Io,
        }
    }

    /// The cause in an operator's words.
    pub fn words(self) -> &'static str {
        match self {
            Cause::NoSpace => "the data directory's filesystem is full",
            Cause::ReadOnly => "the data directory's filesystem is read-only",
            Cause::Io => "the data directory's storage reported an I/O error",
        }
    }

    /// The short label of the log line.
    pub fn label(self) -> &'static str {
        match self {
            Cause::NoSpace => "no_space",
            Cause::ReadOnly => "read_only",
            Cause::Io => "io_error",
        }
    }
}

/// The errno values this module tells apart (Linux's, which `std::io::Error` carries raw).
mod libc_errno {
    pub const ENOSPC: i32 = nix::errno::Errno::ENOSPC as i32;
    pub const EDQUOT: i32 = nix::errno::Errno::EDQUOT as i32;
    pub const EROFS: i32 = nix::errno::Errno::EROFS as i32;
}

/// The store's condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    Writable,
    /// Below the space reserve; clears by itself once space is back.
    LowSpace,
    /// A write or sync failed; only a restart clears it.
    Failed(Cause),
}

impl Condition {
    fn encode(self) -> u8 {
        match self {
            Condition::Writable => 0,
            Condition::LowSpace => 1,
            Condition::Failed(Cause::NoSpace) => 2,
            Condition::Failed(Cause::ReadOnly) => 3,
            Condition::Failed(Cause::Io) => 4,
        }
    }

    fn decode(v: u8) -> Condition {
        match v {
            0 => Condition::Writable,
            1 => Condition::LowSpace,
            2 => Condition::Failed(Cause::NoSpace),
            3 => Condition::Failed(Cause::ReadOnly),
            _ => Condition::Failed(Cause::Io),
        }
    }

    /// What stops writes, in an operator's words (`None` when writable).
    pub fn reason(self) -> Option<String> {
        match self {
            Condition::Writable => None,
            Condition::LowSpace => Some(
                "the data directory's filesystem is almost full (below the space reserve)"
                    .to_string(),
            ),
            Condition::Failed(cause) => Some(format!(
                "{}; a write to the store failed, so nothing more is written until the \
                 server is restarted",
                cause.words()
            )),
        }
    }
}

/// Who asks to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// A request that adds work or changes keys, or the start of a queued run: refused in
    /// either condition.
    Client,
    /// What records how work already under way ends (an agent's finish, a shutdown's
    /// interruption): refused only once the store has failed.
    Internal,
}

/// A write the store refused, before anything was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the store refuses writes: {}", .condition.reason().unwrap_or_default())]
pub struct Refusal {
    pub condition: Condition,
}

impl Refusal {
    /// Whether the condition can clear without a restart.
    pub fn retryable(&self) -> bool {
        self.condition == Condition::LowSpace
    }
}

/// The shared condition of one open store.
pub struct Health {
    condition: AtomicU8,
    refused: AtomicU64,
    changed: tokio::sync::watch::Sender<Condition>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            condition: AtomicU8::new(0),
            refused: AtomicU64::new(0),
            changed: tokio::sync::watch::Sender::new(Condition::Writable),
        }
    }
}

impl Health {
    pub fn condition(&self) -> Condition {
        Condition::decode(self.condition.load(Ordering::Acquire))
    }

    /// Whether `writer` may write now; a refusal is counted. One atomic load when writable.
    pub fn admit(&self, writer: Writer) -> Result<(), Refusal> {
        let condition = self.condition();
        let refused = match condition {
            Condition::Writable => false,
            Condition::LowSpace => writer == Writer::Client,
            Condition::Failed(_) => true,
        };
        if refused {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(Refusal { condition });
        }
        Ok(())
    }

    /// Writes refused since the store was opened.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Records a failed write or sync. Sticky: the first cause stays until a restart.
    pub fn fail(&self, cause: Cause, error: &dyn std::fmt::Display) {
        let failed = Condition::Failed(cause).encode();
        let mut current = self.condition.load(Ordering::Acquire);
        loop {
            if Condition::decode(current) != Condition::Writable
                && Condition::decode(current) != Condition::LowSpace
            {
                return;
            }
            match self.condition.compare_exchange(
                current,
                failed,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => current = now,
            }
        }
        tracing::error!(
            cause = cause.label(),
            %error,
            "{}: the store refuses every write until the server is restarted; reads go on",
            cause.words()
        );
        self.changed.send_replace(Condition::Failed(cause));
    }

    /// Records what the space monitor saw: below the reserve or not. Never clears a failure.
    pub fn set_low_space(&self, low: bool) {
        let (from, to) = if low {
            (Condition::Writable, Condition::LowSpace)
        } else {
            (Condition::LowSpace, Condition::Writable)
        };
        if self
            .condition
            .compare_exchange(
                from.encode(),
                to.encode(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            return;
        }
        if low {
            tracing::warn!(
                "the data directory's filesystem is almost full: new work is refused, runs in \
                 progress may still finish; writes resume by themselves once space is freed"
            );
        } else {
            tracing::info!("space is available again in the data directory; writes resume");
        }
        self.changed.send_replace(to);
    }

    /// Wakes on every change of condition.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Condition> {
        self.changed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_space_refuses_clients_only_and_clears() {
        let health = Health::default();
        assert_eq!(health.admit(Writer::Client), Ok(()));
        health.set_low_space(true);
        let refusal = health.admit(Writer::Client).expect_err("refused");
        assert!(refusal.retryable());
        assert_eq!(health.admit(Writer::Internal), Ok(()));
        health.set_low_space(false);
        assert_eq!(health.admit(Writer::Client), Ok(()));
        assert_eq!(health.refused(), 1);
    }

    #[test]
    fn a_failure_refuses_everyone_and_sticks() {
        let health = Health::default();
        health.set_low_space(true);
        let enospc = std::io::Error::from_raw_os_error(libc_errno::ENOSPC);
        health.fail(Cause::of_io(&enospc), &enospc);
        let erofs = std::io::Error::from_raw_os_error(libc_errno::EROFS);
        health.fail(Cause::of_io(&erofs), &erofs);
        health.set_low_space(false);
        assert_eq!(health.condition(), Condition::Failed(Cause::NoSpace));
        let refusal = health.admit(Writer::Internal).expect_err("refused");
        assert!(!refusal.retryable());
        assert!(refusal.to_string().contains("filesystem is full"));
    }

    #[test]
    fn errors_are_told_apart() {
        let e = |n| Cause::of_io(&std::io::Error::from_raw_os_error(n));
        assert_eq!(e(libc_errno::ENOSPC), Cause::NoSpace);
        assert_eq!(e(libc_errno::EDQUOT), Cause::NoSpace);
        assert_eq!(e(libc_errno::EROFS), Cause::ReadOnly);
        assert_eq!(e(nix::errno::Errno::EIO as i32), Cause::Io);
        let sled = sled::Error::Io(std::io::Error::from_raw_os_error(libc_errno::EROFS));
        assert_eq!(Cause::of_sled(&sled), Cause::ReadOnly);
        // The copy sled keeps of an error it recorded has only the kind.
        let copied = sled::Error::Io(std::io::Error::from_raw_os_error(libc_errno::ENOSPC)).clone();
        assert_eq!(Cause::of_sled(&copied), Cause::NoSpace);
    }
}
