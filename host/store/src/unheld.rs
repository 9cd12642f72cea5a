//! A running task whose keeper died while it held it for a successor: its record says so, so
//! that a crash of the host then records it lost naming the keeper's death.

use crate::hosts::UNHELD;

impl crate::Store {
    /// Marks running task `id` as no longer held for a successor (its keeper died): should the
    /// host stop before it ends, its record says why it was lost (`hosts::LOST_UNHELD`).
    ///
    /// # Errors
    /// The database could not be written.
    pub fn unheld(&self, id: &str) -> Result<(), crate::StoreError> {
        self.reader()?.execute(
            "UPDATE tasks SET detail = ?2 WHERE id = ?1 AND status = 'running'",
            rusqlite::params![id, UNHELD],
        )?;
        Ok(())
    }
}
