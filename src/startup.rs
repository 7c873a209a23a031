//! Wiring: opens the store and index, recovers, binds the HTTP server (plain or TLS), and shuts
//! it all down again on SIGTERM or SIGINT. `Application::build` binds (port 0 works) and exposes
//! the port, so tests and `main` boot the same thing.
//!
//! Shutdown order matters: the run actors and the tasks that supervise agents live on the HTTP
//! workers' threads, so agents are stopped and their runs recorded *before* the workers stop,
//! and the last group-commit sync comes after both.

use runledger_domain::{Origin, DEFAULT_TEAM};

use crate::admin_acts::Identity;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, HttpServer};
use tokio::signal::unix::{signal, Signal, SignalKind};

use runledger_base::clock::now;
use runledger_config::Config;
use runledger_exec::{Executor, Supervision, Transcripts};
use runledger_http::{self as http, AppState};
use runledger_projection::Index;
use runledger_runs::actor::Runs;
use runledger_runs::schedules::Schedules;
use runledger_runs::seals::Sealer;
use runledger_runs::webhooks::Webhooks;
use runledger_store::api_keys::KeyKind;
use runledger_store::{self as store, Store};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] runledger_store::Error),
    #[error("cannot read the configuration file again for its digest: {0}")]
    ConfigDigest(std::io::Error),
    #[error(transparent)]
    Index(#[from] runledger_projection::Error),
    #[error("cannot create the transcripts directory under {path}: {source}")]
    Transcripts {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("recovery failed: {0}")]
    Recovery(runledger_runs::actor::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot handle shutdown signals: {0}")]
    Signals(std::io::Error),
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
    #[error("the final sync at shutdown failed: {0}")]
    FinalSync(runledger_store::Error),
    #[error("webhooks: {0}")]
    Webhooks(runledger_runs::webhooks::Error),
    #[error(transparent)]
    Sandbox(#[from] runledger_exec::sandbox::Error),
    #[error(transparent)]
    Cgroup(#[from] runledger_exec::cgroup::Error),
    #[error(transparent)]
    Slurm(#[from] runledger_exec::slurm::Unavailable),
    #[error(
        "cannot end the Slurm jobs an earlier server of this data directory left: {0}. They \
         would work on beside the executions this start would begin; cancel them (scancel) or \
         bring the Slurm controller back, then start again"
    )]
    SlurmReconcile(String),
    #[error(
        "RUNLEDGER_ADMIN_KEY is set in the server's environment. It is for the command line \
         (`runledger keys ...` against a running server); the server needs no key, and any \
         process of the same user can read a server's environment from /proc/<pid>/environ. \
         Unset it for `serve`"
    )]
    AdminKeyInEnvironment,
}

/// The variable the command line reads an admin key from; never the server's.
const ADMIN_KEY_VAR: &str = "RUNLEDGER_ADMIN_KEY";

/// Beyond `stop_grace_secs`, how long start-up waits for Slurm to end the jobs of an earlier
/// server after cancelling them.
const SLURM_RECONCILE_SLACK: Duration = Duration::from_secs(30);

/// How long requests still in flight when the workers are told to stop may take to finish.
/// They have also had the whole time of stopping the agents before that.
const REQUEST_DRAIN_SECS: u64 = 10;
/// Beyond `stop_grace_secs`, what stopping the agents may take: draining their output (at most
/// 2 s, alongside the grace) and recording their runs.
const AGENT_STOP_SLACK: Duration = Duration::from_secs(5);

pub struct Application {
    server: actix_web::dev::Server,
    addr: SocketAddr,
    scheme: &'static str,
    runs: Runs,
    store: Store,
    executor: Executor,
    state: web::Data<AppState>,
    grace: Duration,
    /// Seals the chains' heads (`runledger_runs::seals`); `None` when read-only.
    sealer: Option<Sealer>,
    terminate: Signal,
    interrupt: Signal,
    /// The version and configuration the admin log's start and stop records name.
    identity: Identity,
}

/// Opens the store and brings the read index up to date (`runledger_projection::open`), with the
/// cache size the configuration names.
pub fn open_store(config: &Config, accept_lost_writes: bool) -> Result<(Store, Index), Error> {
    let options = store::Options {
        cache_bytes: config.cache_bytes,
        accept_lost_writes,
    };
    Ok(runledger_projection::open(&config.data_dir, &options)?)
}

/// How long a clean stop waits for the last handle of the store to be dropped before it gives
/// up on the snapshot (which then only costs the next start a scan).
const SNAPSHOT_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// After a clean shutdown: lets sled snapshot its page table, so that the next start need not
/// scan the log this run of the server wrote (seconds per million runs). A failure only costs
/// that scan and is logged.
pub fn refresh_snapshot(data_dir: &std::path::Path) {
    let started = std::time::Instant::now();
    // The HTTP workers end on their own threads and drop their handles of the store as they
    // go, which can be just after the server reports that it stopped; until the last one is
    // gone sled's file lock refuses the open.
    let result = loop {
        match store::refresh_snapshot(data_dir) {
            Err(store::Error::Locked(_)) if started.elapsed() < SNAPSHOT_LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other,
        }
    };
    match result {
        Ok(()) => tracing::info!(
            took_ms = started.elapsed().as_millis() as u64,
            "storage snapshot written for a fast next start"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "could not write a storage snapshot; the next start scans the log")
        }
    }
}

impl Application {
    /// Opens everything and binds the listener; the service starts with `run`.
    pub async fn build(config: Config) -> Result<Application, Error> {
        // A key in the server's environment would stay readable for as long as it runs.
        if std::env::var_os(ADMIN_KEY_VAR).is_some() {
            return Err(Error::AdminKeyInEnvironment);
        }
        // Installed first: from here on SIGTERM and SIGINT start a shutdown instead of killing
        // the process (actix-web's own handlers are disabled below; its SIGINT does not wait).
        let terminate = signal(SignalKind::terminate()).map_err(Error::Signals)?;
        let interrupt = signal(SignalKind::interrupt()).map_err(Error::Signals)?;
        let config = Arc::new(config);
        // Before anything is created: every file and directory of this process is its user's.
        store::private_umask();
        // Before anything is opened: a host that cannot contain the agents stops start-up.
        let sandboxes = runledger_exec::sandbox::Sandboxes::prepare(&config)?;
        // The same for Slurm: its commands answer and every partition named exists.
        runledger_exec::slurm::check(&config.environments)?;
        let (store, index) = open_store(&config, false)?;
        // Before anything is written: the runs a crash, an upgrade or an offline writer left
        // unsealed, which the seal task seals at once (`sealing`).
        let unsealed = crate::sealing::find_tail(&store)?;
        make_store_private(&config.data_dir, sandboxes.agents_of_another_user());
        let sandboxes = sandboxes.with_store(store.clone());
        if sandboxes.agents_of_another_user() {
            reachable_by_agents(&config);
        }
        create_first_key(&store).await?;
        let executor = executor(&config, &store, sandboxes)?;
        // Watched from here on: before this, a start on a full disk fails on its own writes.
        store.watch_space(config.disk_reserve_bytes);
        // Before any command: the outbox is settled against the log (`runledger_runs::webhooks`).
        let webhooks = Webhooks::open(&config, &store).map_err(Error::Webhooks)?;
        let runs = Runs::new(store.clone(), index, executor.clone(), webhooks.clone());
        let secret = store.instance_secret(store::SESSION_SECRET)?;
        // Made durable by the sync below, before any request is served.
        let identity = Identity::of(&config).map_err(Error::ConfigDigest)?;
        store.append_admin(now(), identity.started(), Origin::system("server start"))?;
        store.sync().await?;
        // The Slurm jobs of an earlier server are ended first: their runs are recorded below as
        // lost (or queued again), and must not work on beside what this start begins.
        let read_only = config.read_only;
        if !read_only && config.environments.iter().any(|e| e.slurm.is_some()) {
            let cancelled = executor
                .cluster()
                .reconcile(Duration::from_secs(config.stop_grace_secs) + SLURM_RECONCILE_SLACK)
                .await
                .map_err(Error::SlurmReconcile)?;
            if cancelled > 0 {
                tracing::warn!(
                    cancelled,
                    "cancelled the Slurm jobs a previous server of this data directory left"
                );
            }
        }
        // Executions that were in progress when the service stopped are lost; they are failed
        // before any request is served, so nothing started by this process is mistaken for one.
        // A read-only server (`runledger inspect`) records nothing: its runs stay as recorded.
        let failed_lost = match read_only {
            true => 0,
            false => runs.fail_lost_executions().await.map_err(Error::Recovery)?,
        };
        let schedules = Schedules::open(&store, &runs, config.clone());
        let Serving {
            server,
            addr,
            scheme,
            state,
        } = serve(&config, &runs, &schedules, secret)?;
        // Read-only: no agent, schedule or webhook; the server only answers reads.
        if read_only {
            state.ready.store(true, Ordering::Release);
        } else {
            webhooks
                .start(render_for_webhooks(&state))
                .map_err(Error::Webhooks)?;
            spawn_recovery(&runs, &executor, &state, failed_lost);
            spawn_resume(&runs, &executor, &store);
        }
        let sealer = crate::sealing::start(&config, &store, unsealed)?;
        Ok(Application {
            server,
            addr,
            scheme,
            runs,
            store,
            executor,
            state,
            grace: Duration::from_secs(config.stop_grace_secs),
            sealer,
            terminate,
            interrupt,
            identity,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https` when the listener speaks TLS, otherwise `http`.
    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// Serves until SIGTERM or SIGINT, then shuts down in order:
    /// 1. stop accepting connections, and answer `/readyz` with 503 on the ones still open;
    /// 2. stop every running agent's process tree and record its run as interrupted (durably),
    ///    while requests in flight go on;
    /// 3. end the live event streams (after the interruptions), and stop the HTTP workers once
    ///    their requests are done (at most `REQUEST_DRAIN_SECS`);
    /// 4. a last group-commit sync, so that everything written is on disk.
    ///
    /// `Ok` means a clean shutdown. Runs left `QUEUED` stay queued and start after the next
    /// start; see `docs/operations.md`.
    pub async fn run(self) -> Result<(), Error> {
        let Application {
            server,
            runs,
            store,
            executor,
            state,
            grace,
            sealer,
            mut terminate,
            mut interrupt,
            identity,
            ..
        } = self;
        let handle = server.handle();
        let mut serving = actix_rt::spawn(server);
        let signal = tokio::select! {
            ended = &mut serving => {
                // Without signal handling of its own, the server only ends on a fatal error.
                return match ended {
                    Ok(result) => result.map_err(Error::Serve),
                    Err(e) => Err(Error::Serve(std::io::Error::other(e.to_string()))),
                };
            }
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        };
        tracing::info!(signal, "shutting down");
        state.ready.store(false, Ordering::Release);
        state.schedules.stop();
        handle.pause().await;
        if !executor.shutdown(grace + AGENT_STOP_SLACK).await {
            tracing::warn!(
                "some runs were not recorded in time; the next start fails them as lost"
            );
        }
        // Live event streams have had the interruptions published; now they may end.
        state.closing.send_replace(true);
        handle.stop(true).await;
        if let Err(e) = serving.await {
            tracing::warn!(error = %e, "the HTTP server task ended abnormally");
        }
        // Deliveries in flight are abandoned (still owed, so the next start sends them); the
        // dispatcher lets go of the store.
        runs.webhooks().stop();
        // Index what is acknowledged, so the next start has no dirty run to catch up.
        let projecting = runs.clone();
        if actix_web::web::block(move || projecting.stop_projector())
            .await
            .is_err()
        {
            tracing::warn!("the projector did not stop cleanly; the next start catches up");
        }
        // After everything else this server wrote, so that the record of the stop follows it.
        if let Err(e) = store.append_admin(
            now(),
            identity.stopped(signal),
            Origin::system(format!("{signal} received")),
        ) {
            tracing::warn!(error = %e, "could not record the stop in the admin audit log");
        }
        // After the last write (the stop's record included): the final seal covers everything,
        // and says so.
        if let Err(e) = crate::sealing::finish(sealer).await {
            tracing::warn!(error = %e, "the final seal failed; the next start seals what is left");
        }
        store.sync().await.map_err(Error::FinalSync)?;
        tracing::info!("shutdown complete");
        Ok(())
    }
}

/// A webhook's `data`: the run as `GET /api/v1/agent/runs/{id}` answers it, with the clock read
/// as the event's time, so that every attempt of a delivery sends the same bytes.
fn render_for_webhooks(state: &web::Data<AppState>) -> runledger_runs::webhooks::Render {
    let public_url = state.public_url.clone();
    let secret = state.session_secret;
    let ttl_secs = state.config.session_link_ttl_secs;
    Arc::new(move |run, at| {
        let links = http::wire::Links {
            public_url: &public_url,
            secret: &secret,
            now: at,
            ttl_secs,
        };
        serde_json::to_vec(&http::wire::RunItem::from(run, &links)).map_err(|e| e.to_string())
    })
}

/// The data directory is this user's alone (0700), with the store and transcripts 0700/0600:
/// a directory made by an earlier version, or restored by hand, is tightened here, once, with
/// a log line naming what changed. When agents run as another user without a sandbox, the
/// directory is 0711 instead: they reach the workspace and files the server made for them by
/// path, and can list nothing (see docs/security.md).
fn make_store_private(data_dir: &std::path::Path, agents_of_another_user: bool) {
    let mode = if agents_of_another_user { 0o711 } else { 0o700 };
    match store::tighten(data_dir, mode) {
        Ok(changed) if changed.is_empty() => {}
        Ok(changed) => {
            let shown: Vec<String> = changed
                .iter()
                .take(5)
                .map(|p| p.display().to_string())
                .collect();
            tracing::warn!(
                tightened = changed.len(),
                examples = %shown.join(", "),
                "took group and other permissions off the data directory, its store and its \
                 transcripts (they were readable by other users)"
            );
        }
        Err(e) => tracing::warn!(error = %e, "cannot make the data directory private"),
    }
}

/// Under the private umask, the directories that hold agents' workspaces and files would be
/// created 0700, out of reach of agents that run as another user; they are made 0711 here
/// (traversable, not listable) when missing, as the data directory is.
fn reachable_by_agents(config: &Config) {
    use std::os::unix::fs::DirBuilderExt;
    let mut roots = vec![
        config.data_dir.join("workspaces"),
        config.data_dir.join("agent-files"),
    ];
    roots.extend(
        config
            .environments
            .iter()
            .filter_map(|e| e.workspace_root.clone()),
    );
    for root in roots {
        if root.exists() {
            continue;
        }
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o711)
            .create(&root)
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                // The umask applies to `mode` too.
                std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o711))
            });
        if let Err(e) = made {
            tracing::warn!(path = %root.display(), error = %e, "cannot create a directory for agents");
        }
    }
}

/// A store without keys gets an admin key, shown once on standard output (and recorded in the
/// admin audit log as the server's own act).
async fn create_first_key(store: &Store) -> Result<(), Error> {
    if store.keys().is_empty() {
        let at = now();
        let (record, secret) =
            store
                .keys()
                .create("admin", KeyKind::Personal, true, DEFAULT_TEAM, at)?;
        store.append_admin(
            at,
            store::admin_log::key_created(&record),
            Origin::system("first start: the store had no API key"),
        )?;
        store.sync().await?;
        eprintln!(
            "runledger: created the first API key (an admin key named {:?}, id {}). It is shown once:",
            record.name, record.id
        );
        println!("{secret}");
    }
    Ok(())
}

/// The executor and what it supervises agents with: the transcripts, this data directory's
/// instance id (after killing the agents an earlier server orphaned), cgroups and mirrors.
fn executor(
    config: &Config,
    store: &Store,
    sandboxes: runledger_exec::sandbox::Sandboxes,
) -> Result<Executor, Error> {
    // Agents' output stops being recorded while the store refuses writes, so that it
    // cannot eat the room kept for recording how their runs end (`store::space`).
    let gated = store.clone();
    let transcripts = Transcripts::open(&config.data_dir)
        .map_err(|source| Error::Transcripts {
            path: config.data_dir.clone(),
            source,
        })?
        .with_gate(Arc::new(move || {
            gated.condition() != store::health::Condition::Writable
        }))
        .with_cap(config.transcript_max_bytes);
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
    runledger_exec::process::raise_open_file_limit();
    let orphans = runledger_exec::process::kill_orphans(&instance);
    if orphans > 0 {
        tracing::warn!(orphans, "killed agent processes left by a previous server");
    }
    let cgroups = runledger_exec::cgroup::Cgroups::prepare(config, &instance)?;
    let cluster = runledger_exec::slurm::Cluster::new(&instance);
    Ok(Executor::new(
        config.environments.clone(),
        Supervision {
            transcripts,
            data_dir: config.data_dir.clone(),
            instance,
            grace: std::time::Duration::from_secs(config.stop_grace_secs),
            sandboxes,
            cgroups,
            mirrors: runledger_exec::repos::Mirrors::new(&config.data_dir),
            secrets: Arc::new(config.secrets.clone()),
            prices: Arc::new(config.prices.clone()),
            credentials: runledger_store::credentials::Credentials::new(
                store.instance_secret(store::CREDENTIAL_KEY)?,
            ),
            content: store.content().clone(),
            artifact_limits: config.artifacts,
            cluster,
        },
    )
    .with_team_queue_cap(config.max_queued_per_team))
}

/// The HTTP server, bound and running (it serves once the runtime polls it).
struct Serving {
    server: actix_web::dev::Server,
    addr: SocketAddr,
    scheme: &'static str,
    state: web::Data<AppState>,
}

fn serve(
    config: &Arc<Config>,
    runs: &Runs,
    schedules: &Schedules,
    secret: [u8; 32],
) -> Result<Serving, Error> {
    // Bind first, so that a port-0 address is known before the links are built.
    let listener = std::net::TcpListener::bind(config.bind).map_err(|source| Error::Listen {
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
        runs.edge_handles(),
        schedules.clone(),
        config.clone(),
        public_url,
        secret,
    ));
    let app_state = state.clone();
    http::install_dispatcher_answers();
    let server = HttpServer::new(move || {
        // Called on each worker's thread, inside its runtime.
        runledger_base::memory::watch_this_thread();
        http::app(app_state.clone())
    })
    .disable_signals()
    .shutdown_timeout(REQUEST_DRAIN_SECS);
    let server = match &config.tls {
        Some(tls) => server.listen_rustls_0_23(listener, (*tls.server_config).clone()),
        None => server.listen(listener),
    }
    .map_err(listen_error)?
    .run();
    Ok(Serving {
        server,
        addr,
        scheme,
        state,
    })
}

/// Waiting runs are re-queued beside the server: /healthz answers at once, /readyz once every
/// waiting run is back in its queue.
fn spawn_recovery(
    runs: &Runs,
    executor: &Executor,
    state: &web::Data<AppState>,
    failed_lost: usize,
) {
    let (requeue_runs, requeue_state, executor) = (runs.clone(), state.clone(), executor.clone());
    actix_rt::spawn(async move {
        match requeue_runs.requeue_waiting().await {
            Ok(requeued) => {
                tracing::info!(failed_lost, requeued, "recovery complete");
                // A shutdown that began meanwhile has made the service unready for good.
                if !executor.is_shutting_down() {
                    requeue_state.ready.store(true, Ordering::Release);
                    // Firings make runs: they wait until the waiting runs are queued again,
                    // so a catch-up run never jumps ahead of them.
                    actix_rt::spawn(requeue_state.schedules.clone().run());
                }
            }
            Err(e) => tracing::error!(error = %e, "recovery failed; the service stays unready"),
        }
    });
}

/// Queued runs wait while the store refuses new work; they start when it writes again.
fn spawn_resume(runs: &Runs, executor: &Executor, store: &Store) {
    let (resume_runs, executor) = (runs.clone(), executor.clone());
    let mut condition = store.watch_condition();
    actix_rt::spawn(async move {
        while condition.changed().await.is_ok() {
            let writable = *condition.borrow_and_update() == store::health::Condition::Writable;
            if writable {
                executor.resume(&resume_runs);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{evolve, Event, RunId};

    fn config(dir: &std::path::Path) -> Config {
        let overrides = runledger_config::Overrides {
            data_dir: Some(dir.to_path_buf()),
            bind: None,
        };
        Config::load(None, &overrides).expect("config")
    }

    /// A `replay --verify` that was killed leaves its scratch database (about the index's
    /// size) in the data directory; the next open of the store removes it.
    #[test]
    fn an_open_removes_the_scratch_database_of_an_interrupted_verify() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config(dir.path());
        drop(open_store(&config, false).expect("open"));
        let scratch = dir.path().join("verify-scratch");
        std::fs::create_dir_all(scratch.join("blobs")).expect("mkdir");
        std::fs::write(scratch.join("db"), b"half a scratch index").expect("write");
        drop(open_store(&config, false).expect("reopen"));
        assert!(!scratch.exists());
    }

    /// A crash between a young run's durable append and its index update leaves no marker:
    /// the index floor is what makes the next start catch the run up.
    #[test]
    fn a_start_catches_up_the_runs_created_since_the_index_floor() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config(dir.path());
        let (store, index) = open_store(&config, false).expect("open");
        let floor = store
            .index_floor()
            .expect("floor")
            .expect("set by the open");
        let id = RunId::new(now().max(floor), 7);
        let event = Event::Created(runledger_domain::sample_created(7));
        let run = evolve(None, id, &event, id.created_at()).expect("created");
        store
            .append(&store::envelopes(id, 0, id.created_at(), vec![event], None))
            .expect("append");
        store.sync_blocking().expect("sync");
        assert!(!store.is_dirty(id).expect("dirty"));
        assert_eq!(index.get(id).expect("get"), None);
        drop((store, index));

        let (store, index) = open_store(&config, false).expect("reopen");
        assert_eq!(index.get(id).expect("get"), Some(run));
        let raised = store.index_floor().expect("floor").expect("floor");
        assert!(raised >= floor);
        let (_, _, differences) = index.verify(&store, 8 << 20).expect("verify");
        assert!(differences.is_empty(), "{differences:?}");
    }

    /// The run side of a schedule's firing, through `Runs` as the scheduler calls it: the run
    /// is made once under the firing's id (a retry, even with the queues full, finds it), it
    /// is a `SCHEDULED_AGENT` run carrying its schedule, `run_exists` tells it from an id
    /// never used, and the list filter `schedule_id` finds exactly the runs of one schedule,
    /// in one team, from the index, also after a restart.
    #[actix_rt::test]
    async fn a_firing_makes_one_scheduled_run_listed_under_its_schedule() {
        use runledger_domain::{RunSchedule, SourceType, Timestamp};
        use runledger_projection::Query;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = config(dir.path());
        config.max_queued_per_team = 2;
        config.environments[0].max_concurrent = 1;
        config.environments[0].demo_duration_ms = 600_000;
        let sandboxes = runledger_exec::sandbox::Sandboxes::prepare(&config).expect("sandboxes");
        let (store, index) = open_store(&config, false).expect("open");
        let executor = executor(&config, &store, sandboxes).expect("executor");
        let webhooks = Webhooks::open(&config, &store).expect("webhooks");
        let runs = Runs::new(store.clone(), index, executor, webhooks);

        let schedule = |n: u128, due: u64| RunSchedule {
            schedule_id: RunId::new(Timestamp(1_763_700_000_000), n),
            schedule_name: format!("nightly {n}"),
            cron_schedule: "0 3 * * *".into(),
            due: Timestamp(due),
        };
        let admitted = |team: &str| {
            let mut a =
                runledger_domain::RunAdmitted::from_legacy(runledger_domain::sample_created(1));
            a.team = team.into();
            a
        };
        let fire = |n: u128, due: u64, team: &'static str| {
            let runs = runs.clone();
            let id = runs.new_id();
            async move {
                let outcome = runs
                    .create_scheduled(id, admitted(team), schedule(n, due))
                    .await;
                (id, outcome)
            }
        };
        // Schedule 1 fires twice in team `infra`, schedule 2 once; schedule 1's id in another
        // team names other runs.
        let (first, made) = fire(1, 1_000, "infra").await;
        let made = made.expect("created");
        assert_eq!(made.run.id, first);
        assert_eq!(made.run.source, SourceType::ScheduledAgent);
        assert_eq!(made.run.schedule, Some(schedule(1, 1_000)));
        let (second, made) = fire(1, 2_000, "infra").await;
        made.expect("created");
        let (other, made) = fire(2, 1_000, "infra").await;
        made.expect("created");
        let (elsewhere, made) = fire(1, 1_000, "web").await;
        made.expect("created");
        assert!(runs.run_exists(first).expect("exists"));
        assert!(!runs.run_exists(runs.new_id()).expect("exists"));

        // `infra` now has as many runs waiting as it may: a new firing is refused, a retried
        // one is answered with the run it made, unchanged.
        let (_, refused) = fire(2, 2_000, "infra").await;
        assert!(
            matches!(refused, Err(runledger_runs::actor::Error::QueueFull(_))),
            "{refused:?}"
        );
        let retried = runs
            .create_scheduled(second, admitted("infra"), schedule(1, 2_000))
            .await
            .expect("the retry finds its run");
        assert_eq!(retried.run.id, second);
        assert_eq!(retried.run.next_seq, 2);
        let again = runs
            .create_scheduled(first, admitted("infra"), schedule(1, 1_000))
            .await
            .expect("the retry finds its run");
        assert_eq!(again.run.schedule, Some(schedule(1, 1_000)));

        let listed = |runs: Runs, team: &'static str, schedule_id: RunId| async move {
            let query = Query {
                team: team.into(),
                schedule_id: Some(runledger_projection::keys::schedule_value(schedule_id)),
                limit: 10,
                ..Query::default()
            };
            let page = runs.list(&query).await.expect("list");
            let mut ids: Vec<RunId> = page.runs.iter().map(|r| r.id).collect();
            ids.sort();
            ids
        };
        let one = schedule(1, 0).schedule_id;
        let two = schedule(2, 0).schedule_id;
        assert_eq!(listed(runs.clone(), "infra", one).await, [first, second]);
        assert_eq!(listed(runs.clone(), "infra", two).await, [other]);
        assert_eq!(listed(runs.clone(), "web", one).await, [elsewhere]);
        assert!(listed(runs.clone(), "web", two).await.is_empty());
        // A schedule id that made nothing, e.g. one of the run ids.
        assert!(listed(runs.clone(), "infra", first).await.is_empty());

        // From a fresh handle on the index once the projector has written everything (what
        // a restart lists from), and the index is what a rebuild from the log makes.
        runs.stop_projector();
        let index = runledger_projection::Index::open(store.db()).expect("reopen");
        let query = Query {
            team: "infra".into(),
            schedule_id: Some(runledger_projection::keys::schedule_value(one)),
            limit: 10,
            ..Query::default()
        };
        let mut ids: Vec<RunId> = index
            .list(&query)
            .expect("list")
            .runs
            .iter()
            .map(|r| r.id)
            .collect();
        ids.sort();
        assert_eq!(ids, [first, second]);
        let (_, _, differences) = index.verify(&store, 8 << 20).expect("verify");
        assert!(differences.is_empty(), "{differences:?}");
    }
}
