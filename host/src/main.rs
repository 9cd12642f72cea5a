//! The `taskhost` binary: the command line, wired to the host library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use taskhost::client_cli::Outcome;
use taskhost::serve::{ServeArgs, serve};
use taskhost::terminal::{Address, ClientArgs, TerminalCommand};

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
    /// Loads the plugins and serves MCP: on stdio (one session), or on a Unix socket.
    Serve(ServeArgs),
    /// Prints the task table of a state directory (no host need run): running tasks and those
    /// that ended in the last day, or every record with `--all`.
    Tasks {
        /// The state directory (default `$XDG_STATE_HOME/taskhost`, else `~/.local/state/taskhost`).
        #[arg(long, value_name = "DIR")]
        state: Option<PathBuf>,
        /// One JSON object per task and line.
        #[arg(long)]
        json: bool,
        /// Every record, not only running and recent ones.
        #[arg(long)]
        all: bool,
        /// Print this task's kept output instead.
        #[arg(long, value_name = "ID")]
        output: Option<String>,
    },
    /// The principals of a state directory: bearer tokens that name the owner of an HTTP client's
    /// tasks (`create` prints the token once, as its last line; the state keeps its hash).
    Token {
        #[command(subcommand)]
        command: taskhost::token_cli::TokenCommand,
        /// The state directory (default `$XDG_STATE_HOME/taskhost`, else `~/.local/state/taskhost`).
        #[arg(long, value_name = "DIR", global = true)]
        state: Option<PathBuf>,
    },
    /// Joins a host serving `--listen unix:PATH` as one MCP session: stdin goes to the host, the
    /// host's answers to stdout. Register this as the server command in any MCP client to share one
    /// host. The client's end is the session's end; when the host's side closes (a restart), the
    /// bridge dials again and resumes the session as the same owner.
    Connect {
        /// `unix:PATH` of the host (default: $TASKHOST_CONNECT, else
        /// unix:$XDG_RUNTIME_DIR/taskhost.sock).
        socket: Option<String>,
        /// How long to keep dialing a host that went away (0: exit at once).
        #[arg(long, value_name = "MS", default_value_t = 60_000)]
        reconnect_for_ms: u64,
        #[command(flatten)]
        server: ServerTrust,
    },
    /// Prints the plugin table of a running host.
    Plugins {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Internal: the keeper a host starts, which spawns the host's task processes and ends them when
    /// the host dies (serves the host on the socket that is its stdin until it closes).
    #[command(hide = true)]
    Keeper {
        /// What the host's task processes' markers start with.
        #[arg(long)]
        marker: String,
        /// The host's cgroup, which the keeper joins and ends when the host is gone.
        #[arg(long)]
        cgroup: Option<PathBuf>,
        /// Run as the keeper's watchdog during a handover wait (reads what to end on stdin).
        #[arg(long)]
        watchdog: bool,
    },
    /// Internal: applies a policy's bounds to itself and executes PROGRAM (how the host starts every
    /// bounded process; see `taskhost policy-check`).
    #[command(hide = true)]
    Bounded {
        /// The bounds, as the host wrote them.
        #[arg(long)]
        bounds: String,
        /// The program and its arguments.
        #[arg(last = true, required = true)]
        program: Vec<std::ffi::OsString>,
    },
    /// Internal: writes the manual pages (roff), `taskhost.1` and one per command
    /// (`taskhost-serve.1`, ...), into DIR (how `scripts/package` makes the package's pages).
    #[command(hide = true)]
    Manual {
        /// Where to write them (an existing directory).
        #[arg(long)]
        dir: PathBuf,
    },
    /// The reload regression check for a plugin file: loads it into a fresh host, runs the calls
    /// between N reloads, then unloads it and reports what was left (exit 0 only when nothing was).
    Check {
        /// The plugin file.
        plugin: PathBuf,
        /// How many reloads.
        #[arg(long, default_value_t = 20)]
        reloads: u32,
        /// A tool call to run before the first reload and after each: TOOL JSON (repeatable).
        #[arg(long = "call", num_args = 2, value_names = ["TOOL", "JSON"])]
        calls: Vec<String>,
        /// Load the file even if others could have written it.
        #[arg(long)]
        allow_untrusted_plugins: bool,
    },
    /// Writes a plugin crate NAME (outside any workspace) that depends on taskhost-abi at this
    /// binary's version: a typed tool, a background producer, a reload test with the testkit, a
    /// README.
    NewPlugin {
        /// The crate's name (lower case; letters, digits, '-', '_').
        name: String,
        /// Where to put it (default: the current directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Depend on this checkout's abi/ and host/testkit by path (for work on taskhost itself)
        /// instead of on the published crates at this binary's version.
        #[arg(long)]
        path_deps: bool,
    },
    /// Says which of this environment's variables `serve` would withhold from its tasks, and why
    /// (names only, never values), under the `[env]` policy of `--config`.
    EnvCheck {
        /// A TOML config file whose `[env]` section is used.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Says what each `[policy.NAME]` of the config enforces on this machine, part by part, and by
    /// which mechanism; exit 2 when one cannot be enforced here (`serve` refuses to start then).
    PolicyCheck {
        /// The TOML config file whose policies are checked.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Calls one tool on a running host, as you (a task it starts in the background is yours, as
    /// with `run`), and prints its text.
    Call {
        #[command(flatten)]
        client: ClientArgs,
        /// The tool.
        tool: String,
        /// Its arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
    },
    #[command(flatten)]
    Terminal(TerminalCommand),
}

/// Which servers a client command talks to: its own user's and root's, and those allowed here.
#[derive(clap::Args)]
struct ServerTrust {
    /// Also talk to a host whose server runs as this uid (repeatable). A host of this user or of
    /// root is always accepted; anyone else's is refused before anything is sent.
    #[arg(long = "allow-server-uid", value_name = "UID")]
    allow_server_uids: Vec<u32>,
}

/// `taskhost new-plugin`: writes the crate and says where.
fn new_plugin(name: &str, dir: Option<PathBuf>, path_deps: bool) -> Outcome {
    use taskhost::new_plugin::Dependencies;
    let dir = dir.unwrap_or_else(|| PathBuf::from("."));
    let deps = match path_deps {
        true => Dependencies::Checkout,
        false => Dependencies::Published,
    };
    let root =
        taskhost::new_plugin::new_plugin(name, &dir, deps).map_err(|e| (2, e.to_string()))?;
    taskhost::outln!(
        "wrote {}: cd there, then `cargo build` and `cargo test` (see its README)",
        root.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `taskhost manual`: the manual pages, from the same definitions as `--help`.
fn manual(dir: &std::path::Path) -> Outcome {
    use clap::CommandFactory;
    clap_mangen::generate_to(Cli::command(), dir)
        .map(|()| ExitCode::SUCCESS)
        .map_err(|e| {
            (
                1,
                format!("cannot write the manual pages into {}: {e}", dir.display()),
            )
        })
}

/// `taskhost check`: prints the report; exit 0 when nothing was left, 1 when something was, 2 for bad
/// arguments.
fn check(
    runtime: &tokio::runtime::Runtime,
    plugin: PathBuf,
    reloads: u32,
    calls: &[String],
    allow_untrusted: bool,
) -> Result<ExitCode, (u8, String)> {
    let mut parsed = Vec::new();
    for pair in calls.chunks(2) {
        let [tool, json] = pair else {
            return Err((2, "--call takes TOOL JSON".to_owned()));
        };
        match serde_json::from_str::<serde_json::Value>(json) {
            Ok(v @ serde_json::Value::Object(_)) => parsed.push((tool.clone(), v)),
            _ => {
                return Err((
                    2,
                    format!("--call {tool}: the arguments must be a JSON object"),
                ));
            }
        }
    }
    let args = taskhost::check::CheckArgs {
        plugin,
        reloads,
        calls: parsed,
        allow_untrusted,
    };
    let report = taskhost::check::run(runtime, &args).map_err(|e| (1, e))?;
    for line in &report.lines {
        taskhost::outln!("{line}");
    }
    Ok(if report.clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The command line, with `--version` (and `-V`) saying the commit and the plugin ABI too.
fn parse() -> Cli {
    // One string for the process's life (clap takes a `'static` one).
    let version: &'static str = Box::leak(taskhost::version::line().into_boxed_str());
    let matches = Cli::command().version(version).get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn main() -> ExitCode {
    let cli = parse();
    if let Command::Keeper {
        marker,
        cgroup,
        watchdog,
    } = &cli.command
    {
        if *watchdog {
            taskhost::process::keeper::watchdog(std::io::stdin());
            return ExitCode::SUCCESS;
        }
        taskhost::process::keeper::serve(
            std::os::fd::AsFd::as_fd(&std::io::stdin()),
            marker,
            cgroup.as_deref(),
        );
        return ExitCode::SUCCESS;
    }
    if let Command::Bounded { bounds, program } = &cli.command {
        let (program, args) = program.split_first().unzip();
        let error = taskhost::process::bounds::enter(
            bounds,
            program.map_or(std::ffi::OsStr::new(""), |p| p.as_os_str()),
            args.unwrap_or_default(),
        );
        eprintln!("taskhost: {error}");
        return ExitCode::from(taskhost::process::bounds::REFUSED_EXIT);
    }
    match &cli.command {
        Command::Serve(args) => taskhost::logs::init(true, args.log_format),
        _ => taskhost::logs::init(false, taskhost::logs::LogFormat::Text),
    }
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
    let result = run(&runtime, cli.command);
    // A stdin reader may still block in its thread (the client has not closed stdin): do not wait
    // for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(code) => code,
        Err((code, message)) => {
            eprintln!("taskhost: {message}");
            ExitCode::from(code)
        }
    }
}

/// Runs one command (the keeper's is handled before a runtime exists).
fn run(runtime: &tokio::runtime::Runtime, command: Command) -> Outcome {
    match command {
        Command::Serve(args) => serve(runtime, args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| (e.code, e.message)),
        Command::Plugins { client } => {
            runtime.block_on(taskhost::client_cli::plugins(&client.target()?))
        }
        Command::Connect {
            socket,
            reconnect_for_ms,
            server,
        } => bridge(runtime, socket.as_deref(), reconnect_for_ms, server),
        Command::Keeper { .. } | Command::Bounded { .. } => Ok(ExitCode::SUCCESS),
        Command::Check {
            plugin,
            reloads,
            calls,
            allow_untrusted_plugins,
        } => check(runtime, plugin, reloads, &calls, allow_untrusted_plugins),
        Command::NewPlugin {
            name,
            dir,
            path_deps,
        } => new_plugin(&name, dir, path_deps),
        Command::Manual { dir } => manual(&dir),
        Command::Token { command, state } => taskhost::token_cli::run(state, &command).map(printed),
        Command::EnvCheck { config } => taskhost::env_check::run(config.as_deref()),
        Command::PolicyCheck { config } => taskhost::policy_check::policy_check(config.as_deref()),
        Command::Tasks {
            state,
            json,
            all,
            output,
        } => taskhost::tasks_cli::run(&taskhost::tasks_cli::TasksArgs {
            state,
            json,
            all,
            output,
        })
        .map(printed),
        Command::Call {
            client,
            tool,
            arguments,
        } => runtime.block_on(taskhost::client_cli::call(
            &client.target()?,
            &tool,
            &arguments,
        )),
        Command::Terminal(command) => taskhost::terminal::run(runtime, command),
    }
}

/// `taskhost connect`: the bridge, until its client leaves or its host stays gone.
fn bridge(
    runtime: &tokio::runtime::Runtime,
    socket: Option<&str>,
    reconnect_for_ms: u64,
    server: ServerTrust,
) -> Outcome {
    let path = match taskhost::terminal::address::resolve(socket).map_err(|e| (2, e.to_string()))? {
        Address::Unix(path) => path,
        Address::Http { url, .. } => {
            return Err((
                2,
                format!("connect bridges a socket (unix:PATH), not {url}"),
            ));
        }
    };
    let options = taskhost::bridge::BridgeOptions {
        path,
        allowed_server_uids: server.allow_server_uids,
        reconnect_for: std::time::Duration::from_millis(reconnect_for_ms),
    };
    runtime
        .block_on(taskhost::bridge::run(options))
        .map(|()| ExitCode::SUCCESS)
        .map_err(|e| (1, e))
}

/// Prints a command's text; success.
fn printed(text: String) -> ExitCode {
    taskhost::outln!("{text}");
    ExitCode::SUCCESS
}

/// Every thread this process starts is created here: the dynamic linker binds each plugin's
/// `pthread_create` to this definition (`build.rs` exports it), so a thread a plugin starts on its
/// own keeps that plugin's code mapped until it has ended (`taskhost::plugin::own_threads`).
///
/// # Safety
/// `pthread_create`'s own contract.
#[expect(
    unsafe_code,
    reason = "the exported pthread_create: plugins' own threads hold their code"
)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: taskhost::plugin::own_threads::StartRoutine,
    argument: *mut std::ffi::c_void,
) -> std::ffi::c_int {
    // SAFETY: the caller's arguments, with pthread_create's contract, passed on unchanged.
    unsafe { taskhost::plugin::own_threads::create(thread, attr, routine, argument) }
}
