//! The owners of HTTP clients: principals, named by their bearer token. A principal's owner is
//! opened on this host at its first request (its settled tasks brought back from the records, as an
//! owner that comes back over a socket) and stays open while the host runs, whatever connections
//! come and go: two clients with one token share its tasks. Revoking its token ends it (its tasks
//! are cancelled), within [`REVOCATION_CHECK`]; the HTTP listeners follow [`PrincipalOwners::revoked`]
//! to end that principal's sessions and streams as soon.

use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use super::hub::Hub;
use crate::Taskhost;

/// The principal a request's bearer token names; the HTTP layer puts it in the request's
/// extensions after checking the token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// Its name (`taskhost token create NAME`).
    pub name: String,
    /// The owner of its tasks (`principal-N`).
    pub owner: String,
}

/// How often the principals served are checked for a revoked token.
pub const REVOCATION_CHECK: Duration = Duration::from_millis(500);

/// The principals served on this host, by owner.
pub struct PrincipalOwners {
    host: Arc<Taskhost>,
    hubs: Mutex<HashMap<String, Arc<Hub>>>,
    /// Held while an owner is opened, so two first requests of one principal open it once.
    opening: tokio::sync::Mutex<()>,
    /// The owners of every revoked principal, as last read.
    revoked: tokio::sync::watch::Sender<Arc<BTreeSet<String>>>,
}

impl PrincipalOwners {
    /// No principal served yet.
    pub fn new(host: Arc<Taskhost>) -> Arc<Self> {
        Arc::new(Self {
            host,
            hubs: Mutex::default(),
            opening: tokio::sync::Mutex::new(()),
            revoked: tokio::sync::watch::Sender::new(Arc::default()),
        })
    }

    /// The owners of the revoked principals, changed within [`REVOCATION_CHECK`] of a revocation
    /// (once [`PrincipalOwners::end_revoked`] runs).
    pub fn revoked(&self) -> tokio::sync::watch::Receiver<Arc<BTreeSet<String>>> {
        self.revoked.subscribe()
    }

    /// The hub of `principal`'s owner, opened (and its records brought back) at its first request.
    pub(crate) async fn hub(&self, principal: &Principal) -> Arc<Hub> {
        if let Some(hub) = self.hubs.lock().get(&principal.owner) {
            return hub.clone();
        }
        let _opening = self.opening.lock().await;
        if let Some(hub) = self.hubs.lock().get(&principal.owner) {
            return hub.clone();
        }
        let id = principal.owner.clone();
        let sessions = self.host.sessions();
        if !sessions.is_open(&id) {
            sessions.open(&id);
        }
        let (host, owner) = (self.host.clone(), id.clone());
        let restored = tokio::task::spawn_blocking(move || host.restore_owner(&owner))
            .await
            .unwrap_or(0);
        tracing::info!(principal = %principal.name, owner = %id, restored, "a principal is served");
        let hub = Hub::install(&self.host, &id);
        self.hubs.lock().insert(id, hub.clone());
        hub
    }

    /// Ends `owner` (its token was revoked): its tasks are cancelled and awaited, its session closed.
    pub async fn end(&self, owner: &str) {
        let _opening = self.opening.lock().await;
        if self.hubs.lock().remove(owner).is_some() {
            tracing::info!(
                owner,
                "a principal's token was revoked: its tasks are cancelled"
            );
            self.host.close_session(owner).await;
        }
    }

    /// Checks the principals served against the state's records every [`REVOCATION_CHECK`], ending
    /// each whose token was revoked, for as long as the host runs.
    pub fn end_revoked(self: &Arc<Self>, state: Arc<taskhost_store::Store>) {
        let owners = self.clone();
        self.host.services().runtime.spawn(async move {
            let mut every = tokio::time::interval(REVOCATION_CHECK);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                if owners.hubs.lock().is_empty() && owners.revoked.receiver_count() == 0 {
                    continue;
                }
                let state = state.clone();
                let Ok(Ok(principals)) =
                    tokio::task::spawn_blocking(move || state.principals()).await
                else {
                    continue;
                };
                let all: BTreeSet<String> = principals
                    .into_iter()
                    .filter(|p| p.revoked_at_ms.is_some())
                    .map(|p| p.owner)
                    .collect();
                let revoked: Vec<String> = {
                    let served = owners.hubs.lock();
                    all.iter()
                        .filter(|owner| served.contains_key(*owner))
                        .cloned()
                        .collect()
                };
                owners.revoked.send_if_modified(|known| {
                    let changed = **known != all;
                    if changed {
                        *known = Arc::new(all);
                    }
                    changed
                });
                for owner in revoked {
                    owners.end(&owner).await;
                }
            }
        });
    }
}
