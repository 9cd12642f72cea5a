//! The high-water marks of the ids a state directory issued, kept beside the database in `ids`
//! (one `KIND NUMBER` line per task kind, `@host NUMBER` for the hosts' rows), where a lost
//! database (removed, or put back from an older copy) cannot take them with it. The writer notes a
//! start's number there once it is committed and before it is answered; a host that opens the
//! database lifts each counter to at least its mark first. So an id is never issued twice in a
//! directory: a lost database costs its records, never the uniqueness of the ids that come after.
//!
//! The file is written over in place, without a sync: it holds what the database's default
//! (`synchronous=NORMAL`) holds, a crash of the host, not a power loss.

use std::collections::BTreeMap;
use std::sync::Arc;

use rusqlite::{Connection, params};

use taskhost_process::private_dir::HeldDir;

/// The marks' file name in the state directory (not `tasks.db*`, which goes with the database).
const FILE: &str = "ids";

/// The key of the hosts' rows.
pub(crate) const HOSTS: &str = "@host";

/// The marks of a state directory, as this host last wrote them.
pub(crate) struct Marks {
    dir: Arc<HeldDir>,
    marks: BTreeMap<String, u64>,
}

impl Marks {
    /// The marks of `dir` (none when it has no file; a line that is not `KEY NUMBER` is skipped).
    pub(crate) fn read(dir: Arc<HeldDir>) -> Self {
        let text = std::fs::read_to_string(dir.through().join(FILE)).unwrap_or_default();
        let marks = text
            .lines()
            .filter_map(|l| {
                let (key, n) = l.rsplit_once(' ')?;
                Some((key.to_owned(), n.parse::<u64>().ok()?))
            })
            .collect();
        Self { dir, marks }
    }

    /// Lifts each task counter of `conn`, and the hosts' row numbers, to at least its mark.
    ///
    /// # Errors
    /// SQLite's.
    pub(crate) fn lift(&self, conn: &Connection) -> rusqlite::Result<()> {
        for (key, &n) in &self.marks {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            if key == HOSTS {
                let lifted = conn.execute(
                    "UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'hosts'",
                    params![n],
                )?;
                if lifted == 0 {
                    conn.execute(
                        "INSERT INTO sqlite_sequence(name, seq) VALUES ('hosts', ?1)",
                        params![n],
                    )?;
                }
            } else {
                conn.execute(
                    "INSERT INTO counters(kind, next) VALUES (?1, ?2)
                     ON CONFLICT(kind) DO UPDATE SET next = max(next, excluded.next)",
                    params![key, n],
                )?;
            }
        }
        Ok(())
    }

    /// Notes ids issued (`key`, number); the file is written when a mark rose. A file that cannot
    /// be written is logged: the database still holds the numbers.
    pub(crate) fn note<'a>(&mut self, issued: impl IntoIterator<Item = (&'a str, u64)>) {
        let mut rose = false;
        for (key, n) in issued {
            let mark = self.marks.entry(key.to_owned()).or_insert(0);
            if n > *mark {
                *mark = n;
                rose = true;
            }
        }
        if rose && let Err(e) = self.write() {
            tracing::warn!(error = %e, "the ids' high-water marks were not written (the file ids beside the database)");
        }
    }

    /// Writes the marks over the file in place: no rename, which on ext4 makes the kernel write the
    /// new file's blocks out at once (`auto_da_alloc`), about a millisecond a start under load.
    /// The text only grows (marks only rise and none is dropped), and one `pwrite` of it is whole
    /// or not done when the host is killed, which is the promise here.
    fn write(&self) -> std::io::Result<()> {
        use std::os::unix::fs::{FileExt, OpenOptionsExt};
        let text: String = self
            .marks
            .iter()
            .map(|(key, n)| format!("{key} {n}\n"))
            .collect();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(self.dir.through().join(FILE))?;
        file.write_all_at(text.as_bytes(), 0)?;
        if file.metadata()?.len() > text.len() as u64 {
            file.set_len(text.len() as u64)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn marks_only_rise_and_are_written_over_the_same_file() {
        let dir = std::env::temp_dir().join(format!("taskhost-marks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let held = Arc::new(HeldDir::ensure(&dir).unwrap());
        std::fs::write(
            dir.join(FILE),
            "bash 1\nstale line that is longer than the marks\n",
        )
        .unwrap();
        let inode = std::fs::metadata(dir.join(FILE)).unwrap().ino();
        let mut marks = Marks::read(held.clone());
        marks.note([("bash", 5)]);
        marks.note([("bash", 3), (HOSTS, 2)]);
        assert_eq!(
            std::fs::read_to_string(dir.join(FILE)).unwrap(),
            "@host 2\nbash 5\n"
        );
        assert_eq!(std::fs::metadata(dir.join(FILE)).unwrap().ino(), inode);
        assert_eq!(Marks::read(held).marks.get("bash"), Some(&5));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
