//! The `runledger` binary: parses the command line and hands over to `cli` or `startup`.

use clap::Parser;
use runledger::cli::{self, Cli, Cmd};

// Responses allocate many small strings per run (JSON, timestamps, links); with glibc's
// allocator, malloc and free were a quarter of a list request's CPU. See
// docs/decisions/0005-allocator.md (built without transparent huge pages, which would inflate
// RSS).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    runledger::telemetry::init();
    let args = Cli::parse();
    match &args.command {
        Cmd::Serve { bind } => {
            let config = args.load_config(bind.clone())?;
            let data_dir = config.data_dir.clone();
            actix_rt::System::new().block_on(async move {
                let app = runledger::startup::Application::build(config).await?;
                eprintln!("runledger listening on {}://{}", app.scheme(), app.addr());
                app.run().await
            })?;
            // A clean stop; every handle on the store is gone with the actix system.
            runledger::startup::refresh_snapshot(&data_dir);
            Ok(())
        }
        Cmd::Keys {
            command,
            admin_key,
            url,
        } => cli::keys(&args, command, admin_key.as_deref(), url.as_deref()),
        Cmd::Events { run_id, json } => cli::events(&args, run_id, *json),
        Cmd::Export { with_keys, output } => cli::export(&args, *with_keys, output.as_deref()),
        Cmd::Import { file } => cli::import(&args, file.as_deref()),
        Cmd::Replay { verify, cache_mb } => cli::replay(&args, *verify, *cache_mb),
    }
}
