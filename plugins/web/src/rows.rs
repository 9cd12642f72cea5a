//! A task as the page shows it: one row of JSON, and a fingerprint that changes when the row does.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::http::Viewer;

/// The row of `task` for `viewer`: the owner shown by name when it is the viewer's own.
pub(crate) fn row(task: &FfiSnapshot, viewer: &Viewer) -> Value {
    let owner = match task.owner() {
        Some(o) if o == viewer.owner => viewer.name.clone(),
        Some(o) => o.to_owned(),
        None => String::new(),
    };
    json!({
        "id": task.id.as_str(),
        "kind": task.kind.as_str(),
        "command": task.label.as_str(),
        "owner": owner,
        "status": task.status.as_str(),
        "detail": task.detail(),
        "started_at_ms": task.started_at_ms,
        "finished_at_ms": task.finished_at_ms.into_option(),
    })
}

/// A fingerprint of what a row shows that can change (status, detail, end).
pub(crate) fn fingerprint(task: &FfiSnapshot) -> u64 {
    let mut h = DefaultHasher::new();
    task.status.as_str().hash(&mut h);
    task.detail().hash(&mut h);
    task.finished_at_ms.into_option().hash(&mut h);
    h.finish()
}
