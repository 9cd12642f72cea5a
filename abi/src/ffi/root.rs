//! The root module every plugin exports, checked by the host at load.

use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RResult, RStr, RString};
use abi_stable::{StableAbi, declare_root_module_statics, package_version_strings};

use super::objects::{HostBox, PluginBox};

/// Bumped on any change of the interface's meaning that the layout check cannot see.
pub const ABI_VERSION: u32 = 9;

/// The root module: the plugin's name and its init. A prefix type, so fields can be added later
/// without breaking older plugins.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModRef)))]
#[sabi(missing_field(panic))]
pub struct PluginMod {
    /// [`ABI_VERSION`] of the crate the plugin was built with.
    pub abi_version: u32,
    /// The plugin's name (`bash`, `tasks`).
    pub name: extern "C" fn() -> RStr<'static>,
    /// Initializes the plugin: registers its tools, attaches its surfaces. Must not panic (the SDK
    /// catches panics and reports them as an error).
    #[sabi(last_prefix_field)]
    pub init: extern "C" fn(host: HostBox) -> RResult<PluginBox, RString>,
}

impl RootModule for PluginModRef {
    declare_root_module_statics! {PluginModRef}
    const BASE_NAME: &'static str = "taskhost_plugin";
    const NAME: &'static str = "taskhost_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
