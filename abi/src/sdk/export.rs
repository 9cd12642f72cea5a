//! The export every plugin makes: [`export_plugin!`](crate::export_plugin) writes the root module
//! the host's loader reads, and its init runs the plugin's own under `catch_unwind`.

use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};

use super::glue::PluginGlue;
use super::host::Host;
use super::plugin::{Plugin, contained};
use crate::ffi::{ABI_VERSION, HostBox, PluginBox, PluginInstance_TO, PluginMod, PluginModRef};

/// Runs a plugin's init under `catch_unwind`; used by [`crate::export_plugin!`].
#[doc(hidden)]
pub fn run_init<P: Plugin>(
    host: HostBox,
    init: fn(Host) -> Result<P, String>,
) -> RResult<PluginBox, RString> {
    let host = Host(Arc::new(host));
    match contained("init", || init(host)) {
        Ok(Ok(plugin)) => ROk(PluginInstance_TO::from_value(PluginGlue(plugin), TD_Opaque)),
        Ok(Err(e)) | Err(e) => RErr(e.into()),
    }
}

/// Builds the root module; used by [`crate::export_plugin!`].
#[doc(hidden)]
pub fn root_module(
    name: extern "C" fn() -> RStr<'static>,
    init: extern "C" fn(HostBox) -> RResult<PluginBox, RString>,
) -> PluginModRef {
    use abi_stable::prefix_type::PrefixTypeTrait;
    PluginMod {
        abi_version: ABI_VERSION,
        name,
        init,
    }
    .leak_into_prefix()
}

/// The symbol abi_stable's loader reads (`abi_stable::library::ROOT_MODULE_LOADER_NAME`), spelled out
/// because [`export_plugin!`](crate::export_plugin) must name it literally; a unit test keeps the two equal.
pub const ROOT_MODULE_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

/// Exports a plugin: `export_plugin!(name: "bash", init: my_init)`, where
/// `fn my_init(host: Host) -> Result<impl Plugin, String>` registers the plugin's tools. Call it once
/// per cdylib. (It writes what `abi_stable::export_root_module` would, through this crate's paths, so a
/// plugin needs no dependency but `taskhost-abi`.)
#[macro_export]
macro_rules! export_plugin {
    (name: $name:expr, init: $init:path $(,)?) => {
        #[doc(hidden)]
        pub fn __taskhost_root_module() -> $crate::PluginModRef {
            extern "C" fn __taskhost_name() -> $crate::abi_stable::std_types::RStr<'static> {
                $crate::abi_stable::std_types::RStr::from_str($name)
            }
            extern "C" fn __taskhost_init(
                host: $crate::HostBox,
            ) -> $crate::abi_stable::std_types::RResult<
                $crate::PluginBox,
                $crate::abi_stable::std_types::RString,
            > {
                $crate::sdk::run_init(host, $init)
            }
            $crate::sdk::root_module(__taskhost_name, __taskhost_init)
        }

        /// The root module header the host reads at load.
        #[allow(non_upper_case_globals, reason = "the symbol abi_stable's loader looks up")]
        #[allow(unsafe_code, reason = "the root module header abi_stable's loader reads")]
        #[unsafe(no_mangle)]
        pub static _1as_0lib_1header_0root_bmodule_bloader: $crate::abi_stable::library::LibHeader = {
            extern "C" fn erased() -> $crate::abi_stable::library::RootModuleResult {
                $crate::abi_stable::library::__call_root_module_loader(__taskhost_root_module)
            }
            // SAFETY: `erased` builds the root module of exactly the type named here.
            unsafe {
                $crate::abi_stable::library::LibHeader::from_constructor::<$crate::PluginModRef>(
                    erased,
                    $crate::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_exported_symbol_is_the_one_abi_stable_reads() {
        assert_eq!(
            super::ROOT_MODULE_SYMBOL,
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }
}
