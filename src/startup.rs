//! Wiring: opens the store and index, recovers, binds the HTTP server (plain or TLS).
//! `Application::build` binds (port 0 works) and exposes the port, so tests and `main` boot the
//! same thing.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use actix_web::{web, HttpServer};

use crate::actor::{now, Runs};
use crate::config::Config;
use crate::exec::{Executor, Supervision, Transcripts};
use crate::http::{self, AppState};
use crate::projection::Index;
use crate::store::keys::KeyKind;
use crate::store::{self, Store};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    #[error(transparent)]
    Index(#[from] crate::projection::Error),
    #[error("cannot create the transcripts directory under {path}: {source}")]
    Transcripts {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("recovery failed: {0}")]
    Recovery(crate::actor::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

pub struct Application {
    server: actix_web::dev::Server,
    addr: SocketAddr,
    scheme: &'static str,
}

/// Opens the store and brings the read index up to date with the log. A store that lost
/// acknowledged writes is refused unless `accept_lost_writes` (see `store::watermark`).
pub fn open_store(config: &Config, accept_lost_writes: bool) -> Result<(Store, Index), Error> {
    let store = Store::open(
        &config.data_dir,
        &store::Options {
            cache_bytes: config.cache_bytes,
            accept_lost_writes,
        },
    )?;
    let index = Index::open(store.db())?;
    if !Index::layout_is_current(store.db())? {
        if !index.is_empty() || store.event_count() > 0 {
            tracing::info!("read index layout changed; rebuilding it from the log");
            index.rebuild(&store)?;
        } else {
            Index::mark_layout_current(store.db())?;
        }
        store.sync_blocking()?;
    }
    // Runs whose log got ahead of the index before a crash: caught up before any request is
    // served, so no live command can race the repair.
    let dirty = store.dirty_runs()?;
    if !dirty.is_empty() {
        let (mut fixed, mut damaged) = (0, 0);
        for id in &dirty {
            match index.catch_up(&store, &[*id]) {
                Ok(n) => fixed += n,
                // A run whose log is damaged stays dirty and fails on its own (its commands and
                // history answer "damaged"); it must not keep every other run from being served.
                Err(crate::projection::Error::Store(e @ store::Error::Corrupt { .. })) => {
                    tracing::error!(run_id = %id, error = %e, "cannot catch up a run with a damaged log");
                    damaged += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
        store.sync_blocking()?;
        tracing::info!(
            checked = dirty.len(),
            fixed,
            damaged,
            "read index caught up with the log"
        );
    }
    Ok((store, index))
}

impl Application {
    /// Opens everything and binds the listener; the service starts with `run`.
    pub async fn build(config: Config) -> Result<Application, Error> {
        let config = Arc::new(config);
        let (store, index) = open_store(&config, false)?;
        if store.keys().is_empty() {
            let (record, secret) = store
                .keys()
                .create("admin", KeyKind::Personal, true, now())?;
            store.sync().await?;
            eprintln!(
                "runledger: created the first API key (an admin key named {:?}, id {}). It is shown once:",
                record.name, record.id
            );
            println!("{secret}");
        }
        let transcripts =
            Transcripts::open(&config.data_dir).map_err(|source| Error::Transcripts {
                path: config.data_dir.clone(),
                source,
            })?;
        // The instance id marks this data directory's agent processes; any still alive now
        // were orphaned when an earlier server died, and nothing will ever collect them.
        // It includes the data directory's path, so a copy of the directory started elsewhere
        // on the same machine does not take the original's agents for orphans.
        let instance: String = {
            use sha2::{Digest, Sha256};
            let digest = Sha256::new()
                .chain_update(store.instance_secret(store::INSTANCE_ID)?)
                .chain_update(config.data_dir.as_os_str().as_encoded_bytes())
                .finalize();
            digest.iter().take(12).map(|b| format!("{b:02x}")).collect()
        };
        crate::exec::process::raise_open_file_limit();
        let orphans = crate::exec::process::kill_orphans(&instance);
        if orphans > 0 {
            tracing::warn!(orphans, "killed agent processes left by a previous server");
        }
        let executor = Executor::new(
            config.environments.clone(),
            Supervision {
                transcripts,
                data_dir: config.data_dir.clone(),
                instance,
                grace: std::time::Duration::from_secs(config.stop_grace_secs),
            },
        );
        let runs = Runs::new(store.clone(), index, executor);
        let secret = store.instance_secret(store::SESSION_SECRET)?;
        store.sync().await?;
        // Executions that were in progress when the service stopped are lost; they are failed
        // before any request is served, so nothing started by this process is mistaken for one.
        let failed_lost = runs.fail_lost_executions().await.map_err(Error::Recovery)?;
        // Bind first, so that a port-0 address is known before the links are built.
        let listener =
            std::net::TcpListener::bind(config.bind).map_err(|source| Error::Listen {
                addr: config.bind,
                source,
            })?;
        let listen_error = |source| Error::Listen {
            addr: config.bind,
            source,
        };
        let addr = listener.local_addr().map_err(listen_error)?;
        let scheme = config.scheme();
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("{scheme}://{addr}"));
        let state = web::Data::new(AppState::new(
            runs.clone(),
            config.clone(),
            public_url,
            secret,
        ));
        let app_state = state.clone();
        let server = HttpServer::new(move || http::app(app_state.clone()));
        let server = match &config.tls {
            Some(tls) => server.listen_rustls_0_23(listener, (*tls.server_config).clone()),
            None => server.listen(listener),
        }
        .map_err(listen_error)?
        .run();
        // Waiting runs are re-queued beside the server: /healthz answers at once, /readyz once
        // every waiting run is back in its queue.
        actix_rt::spawn(async move {
            match runs.requeue_waiting().await {
                Ok(requeued) => {
                    tracing::info!(failed_lost, requeued, "recovery complete");
                    state.ready.store(true, Ordering::Release);
                }
                Err(e) => tracing::error!(error = %e, "recovery failed; the service stays unready"),
            }
        });
        Ok(Application {
            server,
            addr,
            scheme,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https` when the listener speaks TLS, otherwise `http`.
    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    pub async fn run(self) -> std::io::Result<()> {
        self.server.await
    }
}
