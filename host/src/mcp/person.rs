//! The person at the terminal: one owner per user on a host's socket, shared by every command that
//! user runs (`taskhost run`, `follow`, `kill`, `call`, `plugins`), so a task one command starts is
//! there for the next.
//!
//! A client command opens its connection with [`PERSON_HELLO`] where a bridge says
//! `#taskhost hello owner=...` ([`crate::owners`]). The host names the owner after the connecting
//! user's uid, read with `SO_PEERCRED` (`person-UID`), and answers one line,
//! `#taskhost welcome session=person-UID person=yes`; then MCP flows. Unlike a bridge's owner it
//! never ends with a connection, nor after a grace: it is open while the host runs (as an HTTP
//! principal's is), and the first connection of the user on a later host of the same state
//! directory brings its settled tasks back from the records. Its notices are not kept for it:
//! `taskhost follow` ends with the status line instead.

use std::collections::HashSet;
use std::sync::Arc;

use crate::Taskhost;

/// The hello of a person's command.
pub const PERSON_HELLO: &str = "#taskhost hello owner=person\n";

/// What the welcome of a person's connection carries besides the session.
pub const PERSON_WELCOMED: &str = "person=yes";

/// The owner of user `uid`'s commands.
pub fn person_owner(uid: u32) -> String {
    format!("person-{uid}")
}

/// The people served on one socket: whose records were brought back on this host.
#[derive(Default)]
pub(super) struct Persons {
    restored: tokio::sync::Mutex<HashSet<u32>>,
}

impl Persons {
    /// The owner of `uid`'s connection, opened (and its records brought back) at its first
    /// connection on this host.
    pub(super) async fn admit(&self, host: &Arc<Taskhost>, uid: u32) -> String {
        let id = person_owner(uid);
        let mut restored = self.restored.lock().await;
        if restored.insert(uid) {
            // Open already when this host took back running tasks of its.
            if !host.sessions().is_open(&id) {
                host.sessions().open(&id);
            }
            let (h, i) = (host.clone(), id.clone());
            let count = tokio::task::spawn_blocking(move || h.restore_owner(&i))
                .await
                .unwrap_or(0);
            tracing::info!(session = %id, restored = count, "a person's commands are served");
        }
        id
    }
}

/// The welcome line of a person's connection, newline included.
pub(super) fn welcome(id: &str) -> String {
    format!(
        "{} session={id} {PERSON_WELCOMED}\n",
        crate::owners::WELCOME
    )
}

/// True when `line` is a person's hello.
pub(super) fn is_hello(line: &str) -> bool {
    line.trim_end() == PERSON_HELLO.trim_end()
}
