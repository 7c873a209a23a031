//! `runledger secrets rotate-session`: replaces the instance secret that signs session links,
//! offline only. It must not run beside a server, which reads the secret when it starts. The
//! rotation is recorded in the admin audit log (channel `cli`), never the secret.

use anyhow::bail;

use runledger_base::clock::now;
use runledger_domain::AdminEvent;
use runledger_store as store;

use crate::audit_admin::cli_origin;
use crate::commands::{Cli, SecretsCmd};
use crate::open::{open, require_store};

/// `runledger secrets rotate-session`.
pub fn secrets(cli: &Cli, command: &SecretsCmd) -> anyhow::Result<()> {
    let config = cli.load_config(None)?;
    match command {
        SecretsCmd::RotateSession => {
            require_store(&config)?;
            let store = match open(&config, false) {
                Ok(store) => store,
                Err(store::Error::Locked(dir)) => bail!(
                    "a running server holds {}: stop it, rotate the secret, and start it again \
                     (the server reads the session-link secret when it starts, so links keep \
                     working until it restarts)",
                    dir.display()
                ),
                Err(e) => return Err(e.into()),
            };
            store.rotate_secret(store::SESSION_SECRET)?;
            let event = AdminEvent::SecretRotated {
                name: store::SESSION_SECRET.to_string(),
            };
            store.append_admin(now(), event, cli_origin("secrets rotate-session"))?;
            store.sync_blocking()?;
            eprintln!(
                "rotated the session-link secret of {}: every session link given out before \
                 now answers 404; runs answer new links once the server starts",
                config.data_dir.display()
            );
        }
    }
    Ok(())
}
