//! The boundary's raw types, one name each: everything that crosses between host and plugin is one of
//! these, checked for layout when the host loads a plugin. Plugins rarely touch them directly; the
//! [`crate::sdk`] wraps them.
//!
//! - [`data`]: tool specs and calls, task declarations, outcomes, snapshots;
//! - [`error`]: the host's refusals, typed ([`HostError`]);
//! - [`work`]: what a producer asks the host to run (processes, agents, external work);
//! - [`objects`]: the trait objects (the host handle, and the plugin's tools, starters, hooks,
//!   listeners, workers, instance);
//! - [`root`]: the root module every plugin exports, and [`ABI_VERSION`].

pub mod data;
pub mod error;
#[expect(
    unsafe_code,
    reason = "abi_stable's #[sabi_trait] expands its vtable calls into unsafe blocks"
)]
pub mod objects;
pub mod root;
pub mod work;

pub use data::*;
pub use error::{HostError, HostErrorKind};
pub use objects::*;
pub use root::{ABI_VERSION, PluginMod, PluginModRef};
pub use work::*;
