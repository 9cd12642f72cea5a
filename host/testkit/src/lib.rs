//! An in-process taskhost for a plugin author's tests: the real loader loads the author's built
//! cdylib, tools are called as an MCP session would call them, tasks are started and read through
//! the registry, the plugin is reloaded on demand (a new generation of the same file), and the checks
//! our own reload tests make are one call each: every task settled once, its output complete, and
//! retired generations really unmapped.
//!
//! ```ignore
//! use taskhost_testkit::TestHost;
//!
//! #[test]
//! fn a_task_survives_reloads() {
//!     let host = TestHost::new().unwrap();
//!     host.load(TestHost::build_cdylib(env!("CARGO_MANIFEST_DIR")).unwrap()).unwrap();
//!     host.open_session("s");
//!     let id = host.start("s", "count", serde_json::json!({"to": 50})).unwrap();
//!     for _ in 0..5 {
//!         host.reload().unwrap();
//!     }
//!     let (output, end) = host.read_to_end("s", &id, std::time::Duration::from_secs(30)).unwrap();
//!     assert_eq!(end.status.to_string(), "completed");
//!     host.check_settled_once().unwrap();
//!     host.wait_unmapped(std::time::Duration::from_secs(5)).unwrap();
//! }
//! ```
//!
//! A plugin crate's unit tests need no cdylib: [`TestHost::load_linked`] runs the crate's own
//! linked code on the same host (nushell's `nu-plugin-test-support` is the model):
//!
//! ```ignore
//! #[test]
//! fn greet_answers() {
//!     let host = taskhost_testkit::TestHost::new().unwrap();
//!     host.load_linked(crate::__taskhost_root_module()).unwrap();
//!     host.open_session("s");
//!     assert_eq!(host.call("s", "greet", json!({"name": "Ada"})).unwrap(), "hello, Ada");
//! }
//! ```
//!
//! A control surface is attached by the test host itself, so background starts work without the
//! tasks plugin; load it too to test through `task_output`.

mod cargo;
mod error;
mod host;

pub use error::TestkitError;
pub use host::TestHost;
pub use taskhost_registry::{TaskSnapshot, TaskStatus};
