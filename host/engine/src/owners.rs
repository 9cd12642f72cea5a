//! Owners that outlive a connection: who owns a connection's tasks, and how an owner comes back.
//!
//! A `taskhost connect` bridge opens its connection with a hello line before any MCP byte
//! ([`Claim::parse`]): `#taskhost hello owner=new`, or `owner=SECRET` to come back as the owner that
//! secret names. The host answers one line, `#taskhost welcome session=NAME owner=SECRET
//! resumed=yes|no`, then MCP flows. A connection without a hello (a client on the socket itself,
//! stdio) is an owner for its life only, as before.
//!
//! An owner with a secret whose connection is lost without the bridge's goodbye is *away*: its
//! tasks run on and its notices are kept for `[host] owner_grace_ms`; if it comes back in time
//! (to this host, or to a later host of the same state directory) it is the same owner, else it is
//! ended then (its tasks cancelled, its records kept). The secret (256 random bits) is shown only to
//! its bridge; the database keeps its SHA-256.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use taskhost_store::{OwnerSecret, Store};

/// The hello's start.
pub const HELLO: &str = "#taskhost hello";
/// The welcome's start.
pub const WELCOME: &str = "#taskhost welcome";
/// The longest hello line read.
pub const MAX_LINE: usize = 256;
/// The longest welcome line read (it may name calls that continue as tasks).
pub const MAX_WELCOME: usize = 64 * 1024;
/// The default of `[host] owner_grace_ms`.
pub const DEFAULT_OWNER_GRACE: Duration = Duration::from_secs(60);

/// What a connection claims to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// No hello: an owner for this connection only.
    Anonymous,
    /// A new owner that may come back.
    New,
    /// The owner this secret names.
    Resume(OwnerSecret),
}

impl Claim {
    /// The claim a hello line makes (`None` for a line that is not a hello). A malformed secret
    /// claims a new owner.
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.trim_end().strip_prefix(HELLO)?;
        let owner = rest
            .split_ascii_whitespace()
            .find_map(|word| word.strip_prefix("owner="))?;
        Some(match owner {
            "new" => Self::New,
            secret => OwnerSecret::parse(secret).map_or(Self::New, Self::Resume),
        })
    }

    /// The hello line for this claim, newline included.
    pub fn hello(&self) -> String {
        let owner = match self {
            Self::Resume(secret) => secret.as_str(),
            Self::New | Self::Anonymous => "new",
        };
        format!("{HELLO} owner={owner}\n")
    }
}

/// Whether an admitted owner came back, and from where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CameBack {
    /// A new owner.
    No,
    /// An owner this host still holds (away, or reconnecting).
    Here,
    /// An owner of an earlier host: its records are brought back.
    FromRecords,
}

/// A connection admitted as an owner.
#[derive(Debug)]
pub struct Admission {
    /// The owner's session name.
    pub session: String,
    /// Its secret, for the welcome (none for an anonymous connection).
    pub secret: Option<OwnerSecret>,
    /// Whether it came back.
    pub came_back: CameBack,
    /// This connection's hold on the owner: a later connection of the same owner supersedes it.
    pub lease: u64,
    /// The owner's calls a crash of an earlier host interrupted whose commands continue as tasks
    /// here (each call's JSON-RPC id and task), for its bridge's answers.
    pub continued: Vec<(serde_json::Value, String)>,
}

impl Admission {
    /// The welcome line, newline included (none for an anonymous connection).
    pub fn welcome(&self) -> Option<String> {
        let secret = self.secret.as_ref()?;
        let resumed = if self.came_back == CameBack::No {
            "no"
        } else {
            "yes"
        };
        let continued = if self.continued.is_empty() {
            String::new()
        } else {
            format!(" continued={}", encode_continued(&self.continued))
        };
        Some(format!(
            "{WELCOME} session={} owner={} resumed={resumed}{continued}\n",
            self.session,
            secret.as_str()
        ))
    }
}

/// The welcome's `continued=` value: the JSON array of `[call id, task id]` pairs in hex (a call
/// id may hold spaces; a bridge that does not know the word skips it).
fn encode_continued(continued: &[(serde_json::Value, String)]) -> String {
    use std::fmt::Write;
    let json = serde_json::to_string(continued).unwrap_or_default();
    json.bytes().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    })
}

/// The calls a welcome line says continue as tasks (see [`Admission::continued`]); none when it
/// names none or cannot be read.
pub fn continued_in(welcome: &str) -> Vec<(serde_json::Value, String)> {
    let Some(hex) = welcome
        .split_ascii_whitespace()
        .find_map(|w| w.strip_prefix("continued="))
    else {
        return Vec::new();
    };
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    bytes
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// What the end of a connection means for its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaving {
    /// A later connection holds the owner now: nothing to do.
    Superseded,
    /// The owner ends now.
    End,
    /// The owner is away until its grace passes.
    Away,
}

#[derive(Default)]
struct Book {
    /// Names given without a store.
    next_name: u64,
    next_lease: u64,
    /// The SHA-256 of each secret of an owner this host holds, and the owner's name.
    secrets: HashMap<Vec<u8>, String>,
    /// Each held owner's current connection.
    leases: HashMap<String, u64>,
    /// Owners whose connection is gone, with the lease that left.
    away: HashMap<String, u64>,
}

/// The owners of this host's connections.
pub struct Owners {
    state: Option<Arc<Store>>,
    grace: Duration,
    book: Mutex<Book>,
}

impl Owners {
    /// Owners named by `state` when there is one (names unique within its directory), else by this
    /// host; away owners end after `grace`.
    pub fn new(state: Option<Arc<Store>>, grace: Duration) -> Self {
        Self {
            state,
            grace,
            book: Mutex::new(Book::default()),
        }
    }

    /// How long an away owner is kept.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// Admits a connection. `is_open` tells whether this host holds a session. Blocks on the
    /// store (call it off the runtime's workers).
    ///
    /// # Errors
    /// The store could not name a new owner, or there was no randomness for a secret.
    pub fn admit(&self, claim: Claim, is_open: impl Fn(&str) -> bool) -> Result<Admission, String> {
        let (session, secret, came_back) = match claim {
            Claim::Anonymous => (self.name(None)?, None, CameBack::No),
            Claim::New => self.new_owner()?,
            Claim::Resume(secret) => match self.find(&secret, &is_open)? {
                Some((session, came_back)) => (session, Some(secret), came_back),
                None => self.new_owner()?,
            },
        };
        let mut book = self.book.lock();
        book.next_lease += 1;
        let lease = book.next_lease;
        book.leases.insert(session.clone(), lease);
        book.away.remove(&session);
        if let Some(secret) = &secret {
            book.secrets.insert(secret.sha256(), session.clone());
        }
        Ok(Admission {
            session,
            secret,
            came_back,
            lease,
            continued: Vec::new(),
        })
    }

    fn new_owner(&self) -> Result<(String, Option<OwnerSecret>, CameBack), String> {
        let secret = OwnerSecret::generate()?;
        Ok((self.name(Some(&secret))?, Some(secret), CameBack::No))
    }

    /// A new owner's name: the store's (unique within its directory), else this host's.
    fn name(&self, secret: Option<&OwnerSecret>) -> Result<String, String> {
        if let Some(state) = &self.state {
            return state.mint_owner(secret).map_err(|e| e.to_string());
        }
        let mut book = self.book.lock();
        book.next_name += 1;
        Ok(format!("session-{}", book.next_name))
    }

    /// The owner `secret` names: one this host holds, else one of the records.
    fn find(
        &self,
        secret: &OwnerSecret,
        is_open: &impl Fn(&str) -> bool,
    ) -> Result<Option<(String, CameBack)>, String> {
        let held = self.book.lock().secrets.get(&secret.sha256()).cloned();
        if let Some(session) = held.filter(|s| is_open(s)) {
            return Ok(Some((session, CameBack::Here)));
        }
        let Some(state) = &self.state else {
            return Ok(None);
        };
        let named = state.owner_of(secret).map_err(|e| e.to_string())?;
        Ok(named.map(|session| (session, CameBack::FromRecords)))
    }

    /// The connection holding `lease` on `session` ended, with a goodbye or not.
    pub fn leave(&self, session: &str, lease: u64, goodbye: bool, may_return: bool) -> Leaving {
        let mut book = self.book.lock();
        if book.leases.get(session) != Some(&lease) {
            return Leaving::Superseded;
        }
        if goodbye || !may_return {
            forget(&mut book, session);
            return Leaving::End;
        }
        book.away.insert(session.to_owned(), lease);
        Leaving::Away
    }

    /// True (and the owner forgotten) when `session` is still away since `lease` left: its grace
    /// is over and it ends.
    pub fn expire(&self, session: &str, lease: u64) -> bool {
        let mut book = self.book.lock();
        if book.away.get(session) != Some(&lease) {
            return false;
        }
        forget(&mut book, session);
        true
    }

    /// Marks `session` ended in the records: its secret names nobody from now on.
    pub fn end(&self, session: &str) {
        if let Some(state) = &self.state {
            state.end_owner(session);
        }
    }
}

fn forget(book: &mut Book, session: &str) {
    book.leases.remove(session);
    book.away.remove(session);
    book.secrets.retain(|_, s| s != session);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_claims_a_new_owner_or_the_one_its_secret_names() {
        assert_eq!(
            Claim::parse("#taskhost hello owner=new\n"),
            Some(Claim::New)
        );
        let secret = OwnerSecret::generate().unwrap();
        let line = Claim::Resume(secret.clone()).hello();
        assert_eq!(Claim::parse(&line), Some(Claim::Resume(secret)));
        assert_eq!(Claim::parse("#taskhost hello owner=zz\n"), Some(Claim::New));
        assert_eq!(Claim::parse("{\"jsonrpc\":\"2.0\"}"), None);
    }

    #[test]
    fn an_owner_away_comes_back_within_its_grace_and_a_later_lease_supersedes() {
        let owners = Owners::new(None, DEFAULT_OWNER_GRACE);
        let first = owners.admit(Claim::New, |_| false).unwrap();
        let secret = first.secret.clone().unwrap();
        assert_eq!(
            owners.leave(&first.session, first.lease, false, true),
            Leaving::Away
        );
        let back = owners
            .admit(Claim::Resume(secret.clone()), |s| s == first.session)
            .unwrap();
        assert_eq!(back.session, first.session);
        assert_eq!(back.came_back, CameBack::Here);
        assert!(!owners.expire(&first.session, first.lease));
        assert_eq!(
            owners.leave(&first.session, first.lease, false, true),
            Leaving::Superseded
        );
        assert_eq!(
            owners.leave(&back.session, back.lease, true, true),
            Leaving::End
        );
        let after = owners.admit(Claim::Resume(secret), |_| false).unwrap();
        assert_ne!(after.session, first.session);
        assert_eq!(after.came_back, CameBack::No);
    }
}
