//! The `taskhost` binary: the command line, wired to the host library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use taskhost::{LoadOptions, Taskhost, default_generation_dir};
use taskhost_registry::RegistryConfig;

#[derive(Parser)]
#[command(
    name = "taskhost",
    about = "A hot-reloadable plugin host for the background work of coding agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Loads the plugins and serves until interrupted.
    Serve {
        /// A plugin file to load (repeatable); without any, the default plugins next to the binary.
        #[arg(long = "plugin")]
        plugins: Vec<PathBuf>,
        /// Load plugin files even if others could have written them.
        #[arg(long)]
        allow_untrusted_plugins: bool,
        /// Do not reload plugins when their files change.
        #[arg(long)]
        no_watch: bool,
    },
}

/// The default plugin set: the three plugins built next to this binary.
fn default_plugins() -> Vec<PathBuf> {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_default();
    ["bash", "tasks", "subagent"]
        .iter()
        .map(|n| dir.join(format!("libtaskhost_plugin_{n}.so")))
        .collect()
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("taskhost: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Serve {
            plugins,
            allow_untrusted_plugins,
            no_watch,
        } => {
            let options = LoadOptions {
                generation_dir: default_generation_dir(),
                allow_untrusted: allow_untrusted_plugins,
            };
            let host = Arc::new(Taskhost::new(
                RegistryConfig::new(),
                runtime.handle().clone(),
                options,
            ));
            let plugins = if plugins.is_empty() {
                default_plugins()
            } else {
                plugins
            };
            for path in &plugins {
                if let Err(e) = host.plugins().load(path, None, false) {
                    tracing::error!("{e}");
                }
            }
            let _watch = if no_watch {
                None
            } else {
                match host.watch(taskhost::plugin::watch::DEFAULT_DEBOUNCE) {
                    Ok(w) => Some(w),
                    Err(e) => {
                        eprintln!("taskhost: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            };
            let tools: Vec<String> = host.plugins().tools().into_iter().map(|t| t.name).collect();
            tracing::info!(
                ?tools,
                "serving; the MCP front end is not built yet, so nothing connects (Ctrl-C stops)"
            );
            runtime.block_on(async {
                let _ = tokio::signal::ctrl_c().await;
                host.shutdown().await;
            });
            let _ = std::fs::remove_dir_all(
                default_generation_dir()
                    .parent()
                    .unwrap_or(&default_generation_dir()),
            );
            ExitCode::SUCCESS
        }
    }
}
