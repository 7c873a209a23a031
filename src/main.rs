//! The `runledger` binary: parses the command line and hands over to `cli` or `startup`.

use clap::Parser as _;
use runledger::cli::{self, Cli, Cmd};

// Responses allocate many small strings per run (JSON, timestamps, links); with glibc's
// allocator, malloc and free were a quarter of a list request's CPU. See
// docs/decisions/0005-allocator.md (built without transparent huge pages, which would inflate
// RSS).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (v3's `mi_option_e`, which `libmimalloc-sys` does not
/// name); a test checks that this index holds the purge delay's default.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Makes mimalloc give memory back to the OS as soon as it frees it while the server starts;
/// returns the delay to put back once it has started (`None` when the operator chose one).
///
/// A start frees a great deal (the storage snapshot, the index catch-up, recovery), and a
/// delayed purge is carried out by whichever thread next frees or allocates a page: a server
/// that goes idle after its start kept that memory resident, about 10 MB at 1M runs of the
/// 150 MB it may use while idle. Purging at once costs a page fault wherever the memory is
/// used again: under creates that was 5–10 % more CPU per request, and 13 % in a `replay`, so
/// the delay is put back once the server serves (`docs/decisions/0007-allocator-purge.md`).
/// An operator's `MIMALLOC_PURGE_DELAY` wins throughout.
fn purge_at_once_while_starting() -> Option<std::ffi::c_long> {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return None;
    }
    let delay = allocator_option(MI_OPTION_PURGE_DELAY);
    set_allocator_option(MI_OPTION_PURGE_DELAY, 0);
    Some(delay)
}

fn restore_purge_delay(delay: Option<std::ffi::c_long>) {
    if let Some(delay) = delay {
        set_allocator_option(MI_OPTION_PURGE_DELAY, delay);
    }
}

/// Gives back what the calling thread freed: its empty pages, and every span freed to
/// mimalloc's arenas whether or not its purge delay has passed. Registered with
/// `runledger::memory`, which calls it on an HTTP worker's thread once the worker has gone
/// quiet after serving: mimalloc purges freed memory only when some thread next allocates or
/// collects, and keeps a thread's empty pages for that thread, so a server that went quiet
/// after a burst of large responses kept that memory resident for as long as it stayed quiet
/// (`docs/decisions/0011-purge-after-bursts.md`).
#[allow(unsafe_code)]
fn collect_allocator() {
    // SAFETY: `mi_collect` takes no pointer and may be called from any thread at any time; it
    // collects the calling thread's heap and purges the arenas.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

#[allow(unsafe_code)]
fn set_allocator_option(option: libmimalloc_sys::mi_option_t, value: std::ffi::c_long) {
    // SAFETY: mimalloc reads its options with atomic loads; setting one takes no pointer and is
    // allowed from any thread at any time (it is how the `MIMALLOC_*` variables are applied).
    unsafe { libmimalloc_sys::mi_option_set(option, value) }
}

#[allow(unsafe_code)]
fn allocator_option(option: libmimalloc_sys::mi_option_t) -> std::ffi::c_long {
    // SAFETY: as above; reading an option has no preconditions.
    unsafe { libmimalloc_sys::mi_option_get(option) }
}

fn main() -> std::process::ExitCode {
    runledger::telemetry::init();
    // clap exits 2 on a wrong command line, which `run --wait` uses for a cancelled run.
    let args = match Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return std::process::ExitCode::from(if e.use_stderr() {
                cli::remote::exit::USAGE
            } else {
                0
            });
        }
    };
    match run(&args) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            cli::report(&e, args.debug);
            std::process::ExitCode::from(failure_code(&e, &args.command))
        }
    }
}

/// The exit code of a failed command: the terminal client's codes never collide with a run's
/// outcome (`--help` lists them); the other commands exit 1.
fn failure_code(error: &anyhow::Error, command: &Cmd) -> u8 {
    if let Some(e) = error.downcast_ref::<cli::remote::Error>() {
        return e.exit_code();
    }
    match command {
        Cmd::Run { .. }
        | Cmd::Runs { .. }
        | Cmd::Audit { .. }
        | Cmd::Login { .. }
        | Cmd::Logout => cli::remote::exit::SOFTWARE,
        _ => 1,
    }
}

/// A command's exit code when it did not fail: a run's outcome for the commands that wait for
/// one, else 0.
fn run(args: &Cli) -> anyhow::Result<u8> {
    let done = |result: anyhow::Result<()>| result.map(|()| 0);
    match &args.command {
        Cmd::Run {
            prompt,
            environment,
            model,
            title,
            follow,
            wait,
            api,
        } => cli::run(
            api,
            prompt,
            environment.as_deref(),
            model.as_deref(),
            title.as_deref(),
            *follow,
            *wait,
        ),
        Cmd::Runs { command, api } => cli::runs(api, command),
        Cmd::Audit {
            command: Some(cli::AuditCmd::Pubkey { base64 }),
            ..
        } => done(cli::audit_pubkey(args, *base64)),
        Cmd::Audit {
            command,
            events,
            api,
        } => cli::audit(api, command.as_ref(), events),
        Cmd::Login { api } => cli::login(api),
        Cmd::Logout => cli::logout(),
        Cmd::Serve { bind } => {
            // The server's start only: its idle memory is what issue #2 bounds.
            let purge_delay = purge_at_once_while_starting();
            runledger::memory::set_collector(collect_allocator);
            let config = args.load_config(bind.clone())?;
            let data_dir = config.data_dir.clone();
            actix_rt::System::new().block_on(async move {
                let app = runledger::startup::Application::build(config).await?;
                restore_purge_delay(purge_delay);
                eprintln!("runledger listening on {}://{}", app.scheme(), app.addr());
                app.run().await
            })?;
            // A clean stop; every handle on the store is gone with the actix system.
            runledger::startup::refresh_snapshot(&data_dir);
            Ok(0)
        }
        Cmd::Keys { command, server } => done(cli::keys(args, command, server)),
        Cmd::Teams { command, server } => done(cli::teams(args, command, server)),
        Cmd::Events { run_id, json } => done(cli::events(args, run_id, *json)),
        Cmd::Export {
            run: Some(run),
            output,
            ..
        } => done(cli::export_run(args, run, output.as_deref())),
        Cmd::Export {
            with_keys, output, ..
        } => done(cli::export(args, *with_keys, output.as_deref())),
        Cmd::Import {
            run: Some(bundle),
            unverified,
            ..
        } => done(cli::import_run(args, bundle, *unverified)),
        Cmd::Import {
            file, unverified, ..
        } => done(cli::import(args, file.as_deref(), *unverified)),
        Cmd::Inspect { file, bind } => {
            // An import and a server start in one process, on a laptop: memory freed by the
            // import is given back before the server takes its own (issue #39 bounds both).
            purge_at_once_while_starting();
            runledger::memory::set_collector(collect_allocator);
            runledger::inspect::inspect(args, file, bind.clone())?;
            Ok(0)
        }
        Cmd::Verify {
            export,
            proof,
            pubkey,
        } => done(cli::verify(
            args,
            export.as_deref(),
            proof.as_deref(),
            pubkey.as_deref(),
        )),
        Cmd::Replay {
            check: true,
            cache_mb,
            ..
        } => done(cli::replay_check(args, *cache_mb)),
        Cmd::Replay {
            verify, cache_mb, ..
        } => done(cli::replay(args, *verify, *cache_mb)),
        Cmd::Secrets { command } => done(cli::secrets(args, command)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_is_zero_while_starting_and_put_back_after() {
        // The index is mimalloc's, not named by the binding crate: an upgrade that moved it
        // would set some other option. mimalloc v3's default purge delay is 1000 ms.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(allocator_option(MI_OPTION_PURGE_DELAY), 1000);
            let saved = purge_at_once_while_starting();
            assert_eq!(allocator_option(MI_OPTION_PURGE_DELAY), 0);
            restore_purge_delay(saved);
            assert_eq!(allocator_option(MI_OPTION_PURGE_DELAY), 1000);
        }
    }
}
