//! The space monitor: notices that the data directory's filesystem is running out of space
//! before a write fails, and keeps a ballast file so that the service can still record how the
//! runs in progress end and stop cleanly once it has.
//!
//! Every 250 ms a thread reads the filesystem's free space (`statvfs`, the space an
//! unprivileged writer may use). Below the reserve (`server.disk_reserve_mb`), it marks the
//! store low on space (`Health::set_low_space`: new work is refused) and deletes the ballast,
//! a file of the reserve's size (`<data_dir>/space-reserve`) it made while space allowed; that
//! gives the reserve back to the writes still admitted (agents' finishes, the shutdown's
//! records, sled's snapshot). Once three reserves are free again, it makes the ballast anew
//! and clears the condition: writes resume by themselves. The same file is deleted when a write
//! failed for lack of space, so that the shutdown that must follow finds room. This is
//! CockroachDB's emergency ballast; see `docs/decisions/0009-storage-failures.md`.
//!
//! It must not decide anything about requests; it only reports what it sees to `Health`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::health::{Cause, Condition, Health};

/// The ballast file under the data directory.
pub const BALLAST: &str = "space-reserve";
/// How often free space is read: cheap (one `statvfs`), and often enough that a client filling
/// the disk through the API meets the refusal before the disk is full.
const PERIOD: Duration = Duration::from_millis(250);

/// The running monitor; stops its thread when dropped.
pub struct Monitor {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

struct Watch {
    dir: PathBuf,
    ballast: PathBuf,
    reserve: u64,
    health: Arc<Health>,
}

/// Free bytes of the filesystem holding `dir`, for an unprivileged writer.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let stat = nix::sys::statvfs::statvfs(dir).map_err(std::io::Error::from)?;
    Ok((stat.blocks_available() as u64).saturating_mul(stat.fragment_size() as u64))
}

impl Watch {
    fn ballast_present(&self) -> bool {
        std::fs::metadata(&self.ballast).is_ok_and(|m| m.len() >= self.reserve)
    }

    fn release_ballast(&self) {
        match std::fs::remove_file(&self.ballast) {
            Ok(()) => tracing::warn!(
                bytes = self.reserve,
                path = %self.ballast.display(),
                "released the space reserve so that runs in progress can be recorded"
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(error = %e, "cannot release the space reserve"),
        }
    }

    /// Makes the ballast file; a failure leaves none (and is retried later).
    fn make_ballast(&self) -> bool {
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.ballast)
            .and_then(|file| {
                // Allocated, not sparse: the point is to hold real blocks.
                nix::fcntl::posix_fallocate(&file, 0, self.reserve as i64)
                    .map_err(std::io::Error::from)
            });
        match made {
            Ok(()) => true,
            Err(e) => {
                let _ = std::fs::remove_file(&self.ballast);
                tracing::debug!(error = %e, "cannot make the space reserve yet");
                false
            }
        }
    }

    /// One look at the filesystem.
    fn tick(&self) {
        match self.health.condition() {
            Condition::Failed(Cause::NoSpace) => self.release_ballast(),
            Condition::Failed(_) => {}
            Condition::Writable => {
                let Ok(free) = free_bytes(&self.dir) else {
                    return;
                };
                if free < self.reserve {
                    // The ballast goes first, so that whoever is refused for low space finds
                    // its room already given back (the order a client can observe).
                    self.release_ballast();
                    self.health.set_low_space(true);
                } else if !self.ballast_present() && free >= 2 * self.reserve {
                    // A ballast lost or never made (a start on a tight disk): made when there
                    // is room for it and the reserve beside it.
                    self.make_ballast();
                }
            }
            Condition::LowSpace => {
                let Ok(free) = free_bytes(&self.dir) else {
                    return;
                };
                // Three reserves: one for the ballast, one below which writes stop again, and
                // one of headroom so that the condition does not flap.
                if free >= 3 * self.reserve && (self.ballast_present() || self.make_ballast()) {
                    self.health.set_low_space(false);
                }
            }
        }
    }
}

impl Monitor {
    /// Starts watching the filesystem of `data_dir` with a reserve of `reserve` bytes, after a
    /// first look (so the condition is right before anything is served). `None` when the
    /// reserve is 0: no monitor, no ballast (a write then fails only when the disk is full).
    pub fn start(data_dir: &Path, reserve: u64, health: Arc<Health>) -> Option<Monitor> {
        let ballast = data_dir.join(BALLAST);
        if reserve == 0 {
            let _ = std::fs::remove_file(&ballast);
            return None;
        }
        let watch = Watch {
            dir: data_dir.to_path_buf(),
            ballast,
            reserve,
            health,
        };
        watch.tick();
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("runledger-space".into())
            .spawn(move || {
                let (lock, wake) = &*thread_stop;
                let mut stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
                while !*stopped {
                    let (guard, _) = wake
                        .wait_timeout(stopped, PERIOD)
                        .unwrap_or_else(|p| p.into_inner());
                    stopped = guard;
                    if !*stopped {
                        watch.tick();
                    }
                }
            })
            .ok();
        Some(Monitor { stop, thread })
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let (lock, wake) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ballast_is_made_when_there_is_room_and_released_when_space_runs_low() {
        let dir = tempfile::tempdir().expect("tempdir");
        let health = Arc::new(Health::default());
        let reserve = 1 << 20;
        let watch = Watch {
            dir: dir.path().to_path_buf(),
            ballast: dir.path().join(BALLAST),
            reserve,
            health: health.clone(),
        };
        watch.tick();
        assert!(watch.ballast_present(), "a roomy disk gets its ballast");
        assert_eq!(health.condition(), Condition::Writable);
        // A reserve larger than the free space: low at the next look, ballast released.
        let free = free_bytes(dir.path()).expect("statvfs");
        let tight = Watch {
            reserve: free + (2 << 20),
            ..watch
        };
        tight.tick();
        assert_eq!(health.condition(), Condition::LowSpace);
        assert!(!tight.ballast.exists(), "the ballast was released");
        // Space back (a small reserve again): the ballast is made anew and writes resume.
        let roomy = Watch { reserve, ..tight };
        roomy.tick();
        assert_eq!(health.condition(), Condition::Writable);
        assert!(roomy.ballast_present());
    }
}
