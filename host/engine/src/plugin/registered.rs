//! What the tool table and the item table share: an entry a generation registers is staged until
//! its swap and in force after, a key is registered once per generation, and a key another plugin
//! serves is refused; an unregistered entry leaves the table only if this generation put it there.

use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::generation::{Generation, ItemEntry, ToolEntry};

/// An entry of a table of what plugins serve.
pub(crate) trait Registered: Sized {
    /// What names it in its table.
    type Key: Ord + Clone;
    /// Its key.
    fn key(&self) -> Self::Key;
    /// The generation that registered it.
    fn owner(&self) -> &Arc<Generation>;
    /// The key as messages name it (`tool bash`, `prompt greet`).
    fn describe(key: &Self::Key) -> String;
}

impl Registered for ToolEntry {
    type Key = String;
    fn key(&self) -> String {
        self.name.clone()
    }
    fn owner(&self) -> &Arc<Generation> {
        self.handler.generation()
    }
    fn describe(key: &String) -> String {
        format!("tool {key}")
    }
}

impl Registered for ItemEntry {
    type Key = (taskhost_abi::McpItemKind, String);
    fn key(&self) -> Self::Key {
        (self.kind, self.key.clone())
    }
    fn owner(&self) -> &Arc<Generation> {
        self.handler.generation()
    }
    fn describe((kind, key): &Self::Key) -> String {
        format!("{} {key}", kind.as_str())
    }
}

/// Registers `entry` of `generation`: staged (in `staged`) until the generation is swapped in, in
/// `table` after. True when the table changed.
///
/// # Errors
/// The key registered twice by this generation, or served by another plugin.
pub(crate) fn register<E: Registered>(
    generation: &Generation,
    swapped_in: bool,
    staged: &mut Vec<E>,
    table: &RwLock<BTreeMap<E::Key, E>>,
    entry: E,
) -> Result<bool, String> {
    let key = entry.key();
    if !swapped_in {
        if staged.iter().any(|e| e.key() == key) {
            return Err(format!("{} registered twice", E::describe(&key)));
        }
        staged.push(entry);
        return Ok(false);
    }
    let mut table = table.write();
    if let Some(existing) = table.get(&key)
        && existing.owner().plugin != generation.plugin
    {
        return Err(format!(
            "{} is already served by plugin {}",
            E::describe(&key),
            existing.owner().plugin
        ));
    }
    table.insert(key, entry);
    Ok(true)
}

/// Unregisters `key` of `generation` from `staged` and from `table` (only if this generation put
/// it there). True when the table changed.
pub(crate) fn unregister<E: Registered>(
    generation: &Arc<Generation>,
    staged: &mut Vec<E>,
    table: &RwLock<BTreeMap<E::Key, E>>,
    key: &E::Key,
) -> bool {
    staged.retain(|e| e.key() != *key);
    let mut table = table.write();
    let ours = table
        .get(key)
        .is_some_and(|e| Arc::ptr_eq(e.owner(), generation));
    ours && table.remove(key).is_some()
}
