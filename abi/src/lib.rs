//! The stable ABI between the taskhost host and its plugins, and the SDK plugin authors use.
//!
//! A plugin is a cdylib that depends on this crate alone and calls [`export_plugin!`] once. Three
//! rooms:
//! - [`ffi`]: everything that crosses the boundary, as `abi_stable` types checked for layout when the
//!   host loads the file (data, requests, the trait objects both sides implement, the root module);
//! - [`sdk`]: the plugin author's side in plain Rust ([`Host`], [`Tool`], [`Plugin`],
//!   [`TaskControl`], typed config), every plugin call under `catch_unwind`;
//! - [`wording`]: the words the model reads, shared by host and plugins (from `taskhost-common`,
//!   the crate the host's crates share with this one without `abi_stable`).
//!
//! Boundary rules the SDK enforces so plugin authors need not: no panic crosses; plugins never run an
//! async runtime or spawn raw threads (the host runs plugin code on threads of the plugin's
//! generation, see [`Host::spawn_worker`]); logs cross as plain records.
//!
//! Architecture invariant: this crate holds types and glue only; it loads nothing and knows nothing of
//! the registry's internals.
//!
//! Architecture invariant: `unsafe` lives only where abi_stable's macros expand it, in two modules
//! (the tidy test checks this list): `ffi::objects` (the trait objects' vtable calls) and
//! `sdk::export` (the root module header the export macro emits).

pub mod ffi;
pub mod prelude;
pub mod sdk;
pub use taskhost_common::wording;

pub use abi_stable;
pub use ffi::*;
pub use schemars;
pub use sdk::{Host, Plugin, TaskControl, TaskHandle, Tool};
pub use serde;
pub use serde_json;
