//! The terminal client: the commands a person runs against a host (`run`, `follow`, `kill`, and
//! `call`, `plugins`), each one request or a few, through one session as the person
//! ([`link`]), at the address [`address`] resolves.

pub mod address;
mod follow;
pub mod link;
mod tasks;

pub use address::{Address, AddressError};
pub use link::Target;

use crate::client_cli::Outcome;

/// Where a client command finds its host, and whom it trusts to serve it.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ClientArgs {
    /// The host: `unix:PATH` or `http://HOST:PORT` (with the token in $TASKHOST_TOKEN); default
    /// $TASKHOST_CONNECT, else unix:$XDG_RUNTIME_DIR/taskhost.sock.
    #[arg(long, value_name = "ADDRESS")]
    pub connect: Option<String>,
    /// Also talk to a host whose server runs as this uid (repeatable). A host of this user or of
    /// root is always accepted; anyone else's is refused before anything is sent.
    #[arg(long = "allow-server-uid", value_name = "UID")]
    pub allow_server_uids: Vec<u32>,
}

impl ClientArgs {
    /// The host these arguments name.
    ///
    /// # Errors
    /// `(2, why)` for an address that cannot be used ([`AddressError`]).
    pub fn target(&self) -> Result<Target, (u8, String)> {
        let address = address::resolve(self.connect.as_deref()).map_err(|e| (2, e.to_string()))?;
        Ok(Target {
            address,
            allowed_server_uids: self.allow_server_uids.clone(),
        })
    }
}

/// The person's task commands.
#[derive(Debug, clap::Subcommand)]
pub enum TerminalCommand {
    /// Starts COMMAND (run by bash -c, in this directory on a local host) as a background task
    /// of yours on the host; prints the host's answer on stderr and the task's id as the last line
    /// on stdout. Your tasks outlive the command: `follow`, `kill`, `tasks` find them.
    Run {
        /// The host.
        #[command(flatten)]
        client: ClientArgs,
        /// The command and its arguments (one argument is a shell line as it is).
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Prints a task's output as it comes (what no read took before), then its status line; goes
    /// on through a restart of the host. Exit 0 when the task completed with exit code 0, 1 when
    /// it ended otherwise.
    Follow {
        /// The task's id (as `run` printed it).
        id: String,
        /// The host.
        #[command(flatten)]
        client: ClientArgs,
        /// How long to keep dialing a host that went away (0: exit at once).
        #[arg(long, value_name = "MS", default_value_t = 60_000)]
        reconnect_for_ms: u64,
    },
    /// Stops a task of yours (SIGTERM to its process group, then SIGKILL after its grace).
    Kill {
        /// The task's id.
        id: String,
        /// The host.
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// Runs one of the person's task commands.
///
/// # Errors
/// `(2, why)` for bad arguments or an unknown task, `(1, why)` when the host cannot be reached.
pub fn run(runtime: &tokio::runtime::Runtime, command: TerminalCommand) -> Outcome {
    match command {
        TerminalCommand::Run { client, command } => {
            runtime.block_on(tasks::start(&client.target()?, &command))
        }
        TerminalCommand::Follow {
            id,
            client,
            reconnect_for_ms,
        } => {
            let reconnect_for = std::time::Duration::from_millis(reconnect_for_ms);
            runtime.block_on(follow::follow(&client.target()?, &id, reconnect_for))
        }
        TerminalCommand::Kill { id, client } => {
            runtime.block_on(tasks::kill(&client.target()?, &id))
        }
    }
}
