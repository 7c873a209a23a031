//! `runledger replay [--verify]`: rebuilds the read index from the log of a stopped store, or
//! builds it aside and reports how the one in place differs (and checks the schedules' logs).
//! A verification changes nothing in the store; a rebuild may set sled's snapshot aside to
//! recover a damaged store, and accepts a loss of writes the operator chose to serve past.

use std::path::Path;
use std::time::Instant;

use anyhow::bail;

use runledger_projection::Index;
use runledger_store::{self as store, LostWrites, Store};

use crate::commands::Cli;
use crate::open::{held, lost_warning, open_salvage, require_store};
use crate::schedule_logs;

pub fn replay(cli: &Cli, verify: bool, cache_mb: u64) -> anyhow::Result<()> {
    let mut config = cli.load_config(None)?;
    let cache_bytes = cache_mb * 1024 * 1024;
    // A verification builds its scratch index in a database of its own: the two share the
    // cache given, so that it takes no more memory than a rebuild.
    let scratch_cache_bytes = cache_bytes / 2;
    config.cache_bytes = if verify {
        cache_bytes - scratch_cache_bytes
    } else {
        cache_bytes
    };
    // Opened as the server opens it: runs whose index entry was left behind by a crash
    // (marked dirty) are caught up first, so verify reports real differences only.
    // A rebuild accepts a store that lost writes (it is how an operator chooses to serve what
    // is left). A verification reports the loss and changes nothing: opening the index may
    // commit a catch-up, which would move the watermark past the loss.
    if verify {
        require_store(&config)?;
        let probe = open_salvage(&config)?;
        if probe.lost_writes().is_some() {
            bail!("the store lost acknowledged writes; `runledger replay` (without --verify) accepts the loss");
        }
    }
    let options = store::Options {
        cache_bytes: config.cache_bytes,
        accept_lost_writes: true,
    };
    let (store, index) = match runledger_projection::open(&config.data_dir, &options) {
        Err(runledger_projection::Error::Store(store::Error::Locked(dir))) => {
            return Err(held(&dir))
        }
        // Accepting the loss is what a rebuild is for: recover from sled's log alone.
        Err(e @ runledger_projection::Error::Store(store::Error::Damaged { .. })) if !verify => {
            let Some(aside) = store::set_aside_snapshots(&config.data_dir)? else {
                return Err(e.into());
            };
            eprintln!(
                "runledger: {e}\nrunledger: moved sled's snapshot to {}; recovering from sled's \
                 log alone",
                aside.display()
            );
            runledger_projection::open(&config.data_dir, &options)?
        }
        other => other?,
    };
    let lost = store.lost_writes();
    if let Some(lost) = lost {
        eprintln!("{}", lost_warning(&config.data_dir, lost));
    }
    let started = Instant::now();
    if verify {
        verify_index(&store, &index, scratch_cache_bytes, started)
    } else {
        rebuild_index(&config.data_dir, store, index, lost, started)
    }
}

/// `--verify`: the schedules' logs checked, then the index compared with one built aside;
/// every difference printed on stdout, and an error when there is any.
fn verify_index(
    store: &Store,
    index: &Index,
    scratch_cache_bytes: u64,
    started: Instant,
) -> anyhow::Result<()> {
    let schedules = schedule_logs::verify_logs(store);
    for d in &schedules.differences {
        println!("{d}");
    }
    for p in &schedules.pending {
        eprintln!("runledger: note: {p}; the next start makes it");
    }
    eprintln!(
        "verified {} events of {} schedules: {} differences",
        schedules.events,
        schedules.schedules,
        schedules.differences.len()
    );
    let (runs, events, differences) = index.verify(store, scratch_cache_bytes)?;
    let secs = started.elapsed().as_secs_f64();
    for d in &differences {
        println!("{d}");
    }
    eprintln!(
        "verified {events} events of {runs} runs in {secs:.2} s ({:.0} events/s): {} differences",
        events as f64 / secs.max(1e-9),
        differences.len()
    );
    if !differences.is_empty() {
        bail!("the read index differs from the log; run `runledger replay` to rebuild it");
    }
    if !schedules.differences.is_empty() {
        bail!("the schedules' logs are damaged or incomplete (see above); restore a backup");
    }
    Ok(())
}

/// A rebuild of the index in place, made durable, then sled's snapshot refreshed so that the
/// next start is quick.
fn rebuild_index(
    data_dir: &Path,
    store: Store,
    index: Index,
    lost: Option<LostWrites>,
    started: Instant,
) -> anyhow::Result<()> {
    let rebuilt = index.rebuild(&store)?;
    let event = runledger_domain::AdminEvent::IndexRebuilt {
        runs: rebuilt.runs,
        events: rebuilt.events,
        accepted_loss: lost.is_some(),
    };
    store.append_admin(
        runledger_base::clock::now(),
        event,
        crate::audit_admin::cli_origin("replay"),
    )?;
    // This commit's number passes the acknowledged one, so the next open is clean.
    store.sync_blocking()?;
    if lost.is_some() {
        eprintln!("runledger: accepted the loss; the server will serve what is left");
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "rebuilt the read index from {} events of {} runs in {secs:.2} s ({:.0} events/s): \
         {:.2} s to build it, {:.2} s to drop the previous one",
        rebuilt.events,
        rebuilt.runs,
        rebuilt.events as f64 / secs.max(1e-9),
        rebuilt.build.as_secs_f64(),
        rebuilt.drop.as_secs_f64(),
    );
    // sled snapshots its page table only when it opens a database, so the next start would
    // scan everything the rebuild wrote (at 1M runs, seconds: 2.6-6.3 s before the server
    // was ready, against under 1 s). Closed, then opened once more, it snapshots now.
    drop((index, store));
    let started = Instant::now();
    match store::refresh_snapshot(data_dir) {
        Ok(()) => eprintln!(
            "wrote sled's snapshot of its page table in {:.2} s, so that the next start \
             need not scan what the rebuild wrote",
            started.elapsed().as_secs_f64()
        ),
        Err(e) => eprintln!(
            "runledger: warning: could not write sled's snapshot ({e}); the next start \
             scans what the rebuild wrote"
        ),
    }
    Ok(())
}
