//! The fixtures of the official MCP conformance suite (`@modelcontextprotocol/conformance`), as a
//! plugin: the `test_*` tools, prompts, resources, the resource template and completions its server
//! scenarios call, all through the plugin interface (never in the product's default plugins). What
//! each returns is what the suite's reference server (`everything-server`) returns.
//!
//! Tools are in `tools.rs`, the multi-round (`input_required`) tools in `rounds.rs`, the tasks
//! extension's in `tasks.rs`, prompts, resources and completions in `items.rs`.

#![allow(clippy::unwrap_used, reason = "fixtures built from literals")]

mod items;
mod rounds;
mod tasks;
mod tools;

use taskhost_abi::sdk::NoState;
use taskhost_abi::{Host, export_plugin};

/// A 1x1 red PNG, base64.
pub(crate) const IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";
/// A WAV of silence, base64.
pub(crate) const AUDIO: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

fn init(host: Host) -> Result<NoState, String> {
    tools::register(&host)?;
    rounds::register(&host)?;
    items::register(&host)?;
    tasks::register(&host)?;
    Ok(NoState)
}

export_plugin!(name: "conformance", init: init);
