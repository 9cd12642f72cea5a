//! Connections that read the database: a fresh one for a caller that keeps it or writes through
//! it, and a few kept open for the short reads made many times a second (a task's record at each
//! step of every page following it): opening a connection parses the schema, which costs more
//! than such a read.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags};

use crate::StoreError;

/// The most idle connections kept.
const KEPT: usize = 4;

/// The database's readers.
pub(crate) struct Readers {
    db: PathBuf,
    /// Why the database is lost, once it is (see `lost.rs`): then no connection is given.
    lost: Arc<OnceLock<String>>,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    pub(crate) fn new(db: PathBuf, lost: Arc<OnceLock<String>>) -> Self {
        Self {
            db,
            lost,
            idle: Mutex::new(Vec::new()),
        }
    }

    fn not_lost(&self) -> Result<(), StoreError> {
        match self.lost.get() {
            Some(why) => Err(StoreError::Lost(why.clone())),
            None => Ok(()),
        }
    }

    /// A connection of its own to the database, never making one (a removed database is not made
    /// again empty).
    pub(crate) fn open(&self) -> Result<Connection, StoreError> {
        self.not_lost()?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.db, flags)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(conn)
    }

    /// A connection lent for one read, an idle one when there is one; it is kept again when the
    /// loan ends (up to [`KEPT`]).
    pub(crate) fn lend(&self) -> Result<Lent<'_>, StoreError> {
        self.not_lost()?;
        let idle = self.idle.lock().pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.open()?,
        };
        Ok(Lent {
            conn: Some(conn),
            readers: self,
        })
    }
}

/// A connection lent by [`Readers::lend`].
pub(crate) struct Lent<'a> {
    conn: Option<Connection>,
    readers: &'a Readers,
}

impl std::ops::Deref for Lent<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
            .as_ref()
            .expect("a loan holds its connection until it is dropped")
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        let mut idle = self.readers.idle.lock();
        if idle.len() < KEPT
            && let Some(conn) = self.conn.take()
        {
            idle.push(conn);
        }
    }
}
