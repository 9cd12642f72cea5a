//! A plugin built against a different interface: its root module has the same name and version as
//! taskhost-abi's but `abi_version` is a `u64`. The host's layout check must refuse it.
#![allow(
    non_local_definitions,
    missing_docs,
    reason = "abi_stable's derives expand impls and items it does not document"
)]

use abi_stable::library::RootModule;
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::RStr;
use abi_stable::{
    StableAbi, declare_root_module_statics, export_root_module, package_version_strings,
};

#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModRef)))]
#[sabi(missing_field(panic))]
pub struct PluginMod {
    pub abi_version: u64,
    #[sabi(last_prefix_field)]
    pub name: extern "C" fn() -> RStr<'static>,
}

impl RootModule for PluginModRef {
    declare_root_module_statics! {PluginModRef}
    const BASE_NAME: &'static str = "taskhost_plugin";
    const NAME: &'static str = "taskhost_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

extern "C" fn name() -> RStr<'static> {
    RStr::from_str("mismatch")
}

#[export_root_module]
pub fn root() -> PluginModRef {
    PluginMod {
        abi_version: 1,
        name,
    }
    .leak_into_prefix()
}
