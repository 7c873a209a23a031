//! Wiring: opens the store and index, recovers, binds the HTTP server. `Application::build`
//! binds (port 0 works) and exposes the port, so tests and `main` boot the same thing.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use actix_web::{web, HttpServer};
use anyhow::Context as _;

use crate::actor::{now, Runs};
use crate::config::Config;
use crate::exec::{Executor, Transcripts};
use crate::http::{self, AppState};
use crate::projection::Index;
use crate::store::keys::KeyKind;
use crate::store::{self, Store};

pub struct Application {
    server: actix_web::dev::Server,
    addr: SocketAddr,
}

/// Opens the store and brings the read index up to date with the log.
pub fn open_store(config: &Config) -> Result<(Store, Index), anyhow::Error> {
    let store = Store::open(
        &config.data_dir,
        &store::Options {
            cache_bytes: config.cache_bytes,
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
        let fixed = index.catch_up(&store, &dirty)?;
        store.sync_blocking()?;
        tracing::info!(
            checked = dirty.len(),
            fixed,
            "read index caught up with the log"
        );
    }
    Ok((store, index))
}

impl Application {
    /// Opens everything and binds the listener; the service starts with `run`.
    pub async fn build(config: Config) -> Result<Application, anyhow::Error> {
        let config = Arc::new(config);
        let (store, index) = open_store(&config)?;
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
        let transcripts = Transcripts::open(&config.data_dir).with_context(|| {
            format!(
                "cannot create transcripts under {}",
                config.data_dir.display()
            )
        })?;
        let executor = Executor::new(config.environments.clone(), transcripts);
        let runs = Runs::new(store.clone(), index, executor);
        let secret = store.instance_secret("session_secret")?;
        store.sync().await?;
        // Bind first, so that a port-0 address is known before the links are built.
        let listener = std::net::TcpListener::bind(config.bind)
            .with_context(|| format!("cannot listen on {}", config.bind))?;
        let addr = listener.local_addr()?;
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}"));
        let state = web::Data::new(AppState::new(
            runs.clone(),
            config.clone(),
            public_url,
            secret,
        ));
        let app_state = state.clone();
        let server = HttpServer::new(move || http::app(app_state.clone())).listen(listener)?;
        let server = server.run();
        // Recovery runs beside the server: /healthz answers at once, /readyz once it is done.
        actix_rt::spawn(async move {
            match runs.recover().await {
                Ok(report) => {
                    tracing::info!(
                        failed = report.failed,
                        requeued = report.requeued,
                        "recovery complete"
                    );
                    state.ready.store(true, Ordering::Release);
                }
                Err(e) => tracing::error!(error = %e, "recovery failed; the service stays unready"),
            }
        });
        Ok(Application { server, addr })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub async fn run(self) -> std::io::Result<()> {
        self.server.await
    }
}
