//! `taskhost serve`: everything between the command line and a host that serves until it is stopped.
//!
//! In order: the process is hardened (non-dumpable, the open-file limit raised), the config read and
//! checked, the stop signals installed, the private runtime directory made and the socket bound; the
//! host is created, its plugins loaded and watched; then it serves (stdio, or one session per socket
//! connection) until the client leaves or a stop signal arrives, and shuts down: tasks cancelled and
//! awaited, children ended, the socket and the directory removed.

use std::path::PathBuf;
use std::sync::Arc;

mod activation;
pub(crate) mod default_plugins;
mod first_run;
mod handover;
mod listeners;
mod signals;
mod state;

use crate::config::Config;
use crate::listen::PeerPolicy;
use crate::mcp::Peers;
use crate::process::keeper::Handed;
use crate::rundir::RunDir;
use crate::{LoadOptions, ServiceOptions, Taskhost};
use handover::Handover;
pub use listeners::unix_path;
use listeners::{Listeners, TlsChoice};
use signals::StopSignals;

/// What `serve` was asked: the arguments of `taskhost serve`.
#[derive(Debug, Default, clap::Args)]
pub struct ServeArgs {
    /// A TOML config file (its `[tasks]`, `[[plugin]]` and other tables).
    #[arg(long, help = "A TOML config file ([tasks], [[plugin]])")]
    pub config: Option<PathBuf>,
    /// A plugin file to load (repeatable); without any (here or in the config), the default
    /// plugins next to the binary, else in `../lib/taskhost/plugins` from its directory.
    #[arg(long = "plugin")]
    pub plugins: Vec<PathBuf>,
    /// A plugin directory (repeatable): every *.so in it is loaded; with watching on, one that
    /// appears is loaded and one removed is unloaded.
    #[arg(long = "plugin-dir")]
    pub plugin_dirs: Vec<PathBuf>,
    /// Serve here instead of stdio (repeatable): `unix:PATH`, one MCP session per connection
    /// (once; a listening socket for PATH passed by systemd, `LISTEN_FDS`, is served as it is), or `http://HOST:PORT`, MCP Streamable HTTP at /mcp for bearer-token principals
    /// (`taskhost token create`). Port 0 picks a free port; the URL is printed on stderr.
    #[arg(long)]
    pub listen: Vec<String>,
    /// The HTTP listeners' TLS certificate chain (PEM); with --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The HTTP listeners' TLS private key (PEM); with --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP on an address other machines can reach (behind a proxy that
    /// terminates TLS); without it such an address needs --tls-cert and --tls-key.
    #[arg(long)]
    pub insecure_http: bool,
    /// Do not reload plugins when their files change.
    #[arg(long)]
    pub no_watch: bool,
    /// Load plugin files even if others could have written them.
    #[arg(long = "allow-untrusted-plugins")]
    pub allow_untrusted: bool,
    /// With `--listen`: also accept connections from this uid (repeatable). This user and root
    /// are always accepted; anyone else is refused.
    #[arg(long = "allow-uid", value_name = "UID")]
    pub allow_uids: Vec<u32>,
    /// The durable state directory: task records and kept output outlive the host there (also
    /// `[state] dir`; default `$XDG_STATE_HOME/taskhost`, else `~/.local/state/taskhost`).
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// Keep task records in memory only (also `[state] durable = false`).
    #[arg(long, conflicts_with = "state")]
    pub no_state: bool,
    /// How the log on stderr is written: `text` for people, `json` for log collectors (one
    /// object per line).
    #[arg(long, value_enum, default_value_t)]
    pub log_format: crate::logs::LogFormat,
}

/// Why `serve` stopped with an error: the exit code (2 for bad input, 1 otherwise) and one message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ServeError {
    /// The process exit code.
    pub code: u8,
    /// What went wrong.
    pub message: String,
}

fn fail(code: u8) -> impl Fn(String) -> ServeError {
    move |message| ServeError { code, message }
}

/// What the host is built from, checked before anything is loaded.
struct Prepared {
    config: Config,
    run_dir: RunDir,
    listeners: Listeners,
    /// The state directory, and what a predecessor's keeper handed over there.
    state: Option<(PathBuf, Option<taskhost_store::Takeover>)>,
    handover: Option<Handover>,
    policies: crate::policy::Resolved,
}

/// Serves until the client leaves or a stop signal arrives (a second one exits at once).
///
/// # Errors
/// [`ServeError`] with code 2 for a bad config, a bad `--listen`, a path that is not ours to take;
/// code 1 when the host cannot run (no runtime directory, no watcher, no signal handlers).
pub fn serve(runtime: &tokio::runtime::Runtime, args: ServeArgs) -> Result<(), ServeError> {
    crate::process::reap_inherited();
    harden_process();
    let mut stop = {
        let _runtime = runtime.enter();
        StopSignals::new().map_err(|e| fail(1)(format!("cannot listen for signals: {e}")))?
    };
    let prepared = prepare(&args)?;
    let Prepared {
        config,
        run_dir,
        mut listeners,
        state,
        mut handover,
        policies,
    } = prepared;
    let predecessor = handover.as_mut().and_then(Handover::predecessor);
    let built = ((&config, policies), predecessor);
    let (host, handed) = start_host(runtime, built, &run_dir, &args, state)?;
    if let Some(handover) = &mut handover {
        let listens = listeners.duplicates(&args.listen);
        handover.offer(&host, config.handover_grace_ms(), listens);
    }
    load_plugins(&host, &config, &args, handed)?;
    crate::memory::trim_periodically(runtime.handle());
    let peers = Peers::default();
    {
        let (peers, handle) = (peers.clone(), runtime.handle().clone());
        host.plugins()
            .on_tools_changed(move || peers.tools_changed(&handle));
    }
    {
        let (lists, handle) = (peers.clone(), runtime.handle().clone());
        host.plugins()
            .on_list_changed(move |kind| lists.list_changed(kind, &handle));
        let (resources, handle) = (peers.clone(), runtime.handle().clone());
        host.plugins()
            .on_resource_updated(move |uri| resources.resource_updated(uri, &handle));
    }
    let _watch = if args.no_watch {
        None
    } else {
        Some(
            host.watch_with_dirs(
                crate::plugin::watch::DEFAULT_DEBOUNCE,
                &default_plugins::dirs(&config, &args.plugin_dirs),
            )
            .map_err(|e| fail(1)(e.to_string()))?,
        )
    };
    if listeners.is_stdio() && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        eprint!("{}", first_run::help());
    }
    announce(&host, &listeners);
    let policy = PeerPolicy {
        allowed: args.allow_uids.clone(),
    };
    let served = runtime.block_on(run_until_stopped(
        host,
        peers,
        &mut listeners,
        (policy, config.http.clone()),
        &mut stop,
    ));
    if let Ok(Ended::Upgrade(binary)) = &served {
        // The listeners stay open (the keeper holds them too) and their files in place: the next
        // image serves them.
        drop(run_dir);
        return Err(fail(1)(handover::upgrade::exec_self(binary)));
    }
    // Stopped: nobody is handed anything, so nothing waits on the handover's socket.
    if let Some(handover) = &handover {
        handover.withdraw();
    }
    drop(listeners);
    drop(run_dir);
    served.map(|_| ()).map_err(fail(1))
}

/// The start line: each place the host listens and the tools it serves (after a WARN line when it
/// serves none).
fn announce(host: &Taskhost, listeners: &Listeners) {
    let tools: Vec<String> = host.plugins().tools().into_iter().map(|t| t.name).collect();
    if tools.is_empty() {
        tracing::warn!(
            "serving no tools: the plugins loaded register none (a plugin directory's new files are loaded as they appear)"
        );
    }
    tracing::info!(listening = ?listeners.addresses(), ?tools, "serving");
}

/// How serving ended.
enum Ended {
    /// Stopped: the tasks were cancelled and the host shut down.
    Stopped,
    /// `SIGHUP` to a host that hands over: its keeper holds the tasks for the binary on disk,
    /// opened here once it was found trusted.
    Upgrade(std::fs::File),
}

/// Children (same uid) must not read the host's environment or memory through `/proc`; thousands of
/// tasks need more than the usual 1,024 descriptors.
fn harden_process() {
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!(error = %e, "cannot make the host non-dumpable");
    }
    crate::process::raise_file_limit();
}

/// Reads and checks the config and `--listen`, makes the runtime directory, binds the socket.
fn prepare(args: &ServeArgs) -> Result<Prepared, ServeError> {
    let config = match &args.config {
        Some(path) => Config::load(path).map_err(|e| fail(2)(e.to_string()))?,
        None => Config::default(),
    };
    if let Some(dir) = &config.tasks.spill_dir {
        crate::rundir::ensure_private(dir)
            .map_err(|e| fail(2)(format!("bad config: [tasks] spill_dir: {e}")))?;
    }
    let run_dir = RunDir::create().map_err(|e| fail(1)(e.to_string()))?;
    let tls = TlsChoice {
        cert: args.tls_cert.clone(),
        key: args.tls_key.clone(),
        insecure: args.insecure_http,
    };
    let dir = state::state_dir(&config, args.state.as_deref(), args.no_state).map_err(fail(2))?;
    let config_file = args.config.as_deref();
    let code = default_plugins::code(
        (&config, config_file),
        &args.plugins,
        &default_plugins::dirs(&config, &args.plugin_dirs),
    );
    let policies = state::host_policies((&config, code), &args.listen, &run_dir, dir.as_deref())
        .map_err(fail(2))?;
    let mut handover = dir.as_deref().and_then(|d| Handover::of(d, &args.listen));
    let takeover = match handover.as_mut() {
        Some(handover) => handover.take_waiting().map_err(fail(2))?,
        None => None,
    };
    let inherited = handover
        .as_mut()
        .map(Handover::take_listens)
        .unwrap_or_default();
    let listeners = Listeners::bind(&args.listen, &tls, inherited).map_err(fail(2))?;
    Ok(Prepared {
        config,
        run_dir,
        listeners,
        state: dir.map(|d| (d, takeover)),
        handover,
        policies,
    })
}

/// Creates the host on its state and its keeper, or the keeper a predecessor handed over, whose
/// tasks it returns for [`load_plugins`]; a bad config exits 2.
fn start_host(
    runtime: &tokio::runtime::Runtime,
    ((config, policies), predecessor): Built<'_>,
    run_dir: &RunDir,
    args: &ServeArgs,
    state: Option<(PathBuf, Option<taskhost_store::Takeover>)>,
) -> Result<(Arc<Taskhost>, Option<Handed>), ServeError> {
    let registry = config.registry().map_err(|e| fail(2)(e.to_string()))?;
    let state = match state {
        Some((dir, takeover)) => Some(state::open_state(config, &dir, takeover).map_err(fail(2))?),
        None => None,
    };
    let policies = crate::policy::Policies::new(policies, state.clone()).with_max_running(
        config
            .policy
            .iter()
            .filter_map(|(name, t)| Some((name.clone(), t.max_running?))),
    );
    let options = LoadOptions {
        generation_dir: run_dir.generations(),
        allow_untrusted: args.allow_untrusted,
    };
    let services = ServiceOptions {
        spill_dir: config.tasks.spill_dir.clone(),
        spill_budget: config
            .tasks
            .spill_budget
            .unwrap_or(crate::process::DEFAULT_SPILL_BUDGET),
        env: config.env.policy(),
        keeper: std::env::current_exe().ok(),
        max_foreground_per_owner: config.max_foreground_per_owner(),
        state,
        owner_grace: config.owner_grace(),
        policies: Some(Arc::new(policies)),
        max_running: config.tasks.max_running,
    };
    let runtime_handle = runtime.handle().clone();
    let (host, handed) = match predecessor {
        Some(p) => Taskhost::taking_over(registry, runtime_handle, options, services, p),
        None => (
            Taskhost::new(registry, runtime_handle, options, services),
            None,
        ),
    };
    if let Some(state) = host.services().state.clone() {
        state::retain_hourly(runtime, state, config.state.retention());
    }
    Ok((Arc::new(host), handed))
}

/// The config and policies a host is built from, and what a predecessor handed over.
type Built<'a> = (
    (&'a Config, crate::policy::Resolved),
    Option<crate::services::handover::Predecessor>,
);

/// Loads the plugins: the config's, then `--plugin`s, then the plugin directories' libraries,
/// else the default set; then takes back what a predecessor handed over (`handed`). A plugin that cannot be
/// read, loaded or initialized (its config refused) is an error naming it and why (exit 2), as is
/// a plugin directory that cannot be read: a host never starts without what it was asked to load.
fn load_plugins(
    host: &Taskhost,
    config: &Config,
    args: &ServeArgs,
    handed: Option<Handed>,
) -> Result<(), ServeError> {
    let mut entries: Vec<(PathBuf, Option<String>)> = config
        .plugins
        .iter()
        .map(|p| (p.path.clone(), Some(p.config_json())))
        .collect();
    entries.extend(args.plugins.iter().map(|p| (p.clone(), None)));
    let dirs = default_plugins::dirs(config, &args.plugin_dirs);
    for dir in &dirs {
        let found = crate::plugin::watch::libraries_in(dir).map_err(|e| {
            fail(2)(format!(
                "cannot read the plugin directory {}: {e}",
                dir.display()
            ))
        })?;
        entries.extend(found.into_iter().map(|p| (p, None)));
    }
    if entries.is_empty() && dirs.is_empty() {
        entries = default_plugins::paths()
            .into_iter()
            .map(|p| (p, None))
            .collect();
    }
    for (path, plugin_config) in &entries {
        host.plugins()
            .load(path, plugin_config.clone(), false)
            .map_err(|e| fail(2)(e.to_string()))?;
    }
    let taken = handed.map(|h| host.take_back_tasks(h)).unwrap_or_default();
    if !taken.is_empty() {
        tracing::info!(tasks = ?taken, "running tasks of the previous host are served on");
    }
    if let Some(state) = host.services().state.clone() {
        let adopted = &state.recovered().adopted;
        if !adopted.is_empty() {
            let taken = host.services().adopt_external(adopted);
            tracing::info!(
                tasks = ?taken,
                "external tasks of hosts that stopped are followed on"
            );
        }
        let requeued = &state.recovered().requeued;
        if !requeued.is_empty() {
            let taken = host.services().requeue(requeued);
            tracing::info!(tasks = ?taken, "queued tasks of hosts that stopped are queued again");
        }
    }
    Ok(())
}

/// Serves (the listeners, or stdio) until that ends or a stop signal arrives, then shuts the host
/// down and ends every child left.
async fn run_until_stopped(
    host: Arc<Taskhost>,
    peers: Peers,
    listeners: &mut Listeners,
    (policy, http): (PeerPolicy, crate::http::HttpSection),
    stop: &mut StopSignals,
) -> Result<Ended, String> {
    let serving = listeners.serve(host.clone(), peers.clone(), policy, http);
    tokio::pin!(serving);
    let result = loop {
        tokio::select! {
            r = &mut serving => break r,
            signal = stop.first() => {
                if signal == libc::SIGHUP && host.services().processes.hands_over() {
                    match handover::upgrade::binary_on_disk() {
                        Ok(binary) => {
                            handover::upgrade::hand_over_in_place(&host).await;
                            return Ok(Ended::Upgrade(binary));
                        }
                        Err(why) => {
                            tracing::error!(%why, "SIGHUP: not upgrading; serving on with this binary");
                            continue;
                        }
                    }
                }
                tracing::info!(
                    signal,
                    "stopping: tasks are cancelled and awaited; a second signal exits at once"
                );
                break Ok(());
            }
        }
    };
    // A host that stops has no successor: its tasks end with it, however it ends from here.
    host.services().processes.cancel_handover();
    let shutdown = host.shutdown();
    tokio::pin!(shutdown);
    tokio::select! {
        () = &mut shutdown => {}
        again = stop.first() => {
            tracing::warn!(signal = again, "second signal: exiting without cleanup");
            std::process::exit(128 + again);
        }
    }
    // This process is a taskhost and nothing else: whatever child is left descends from a task (a
    // daemon that cleared its environment, which no sweep can attribute).
    let left = tokio::task::spawn_blocking(|| {
        crate::process::end_all_children(std::time::Duration::from_secs(2))
    })
    .await
    .unwrap_or(0);
    if left > 0 {
        tracing::info!(ended = left, "ended descendants no task claimed");
    }
    result.map(|()| Ended::Stopped)
}
