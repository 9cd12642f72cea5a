//! The plugins a host loads when it is given none: `tasks`, `bash` and `subagent`, found beside the
//! binary (as a build leaves them) or, for an installed binary, in `../lib/taskhost/plugins` from
//! its directory (`/usr/lib/taskhost/plugins` for `/usr/bin/taskhost`, as the package puts them);
//! and the host's code, which no policy's write root may hold.

use std::path::{Path, PathBuf};

/// The default plugins' files (`tasks` first): each beside the binary when it is there, else in the installed
/// plugin directory when it is there, else beside the binary (so a load that fails names where a
/// build would have put it).
pub(crate) fn paths() -> Vec<PathBuf> {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_default();
    chosen(&dir)
}

/// [`paths`] for a binary in `dir`.
fn chosen(dir: &Path) -> Vec<PathBuf> {
    let installed = dir
        .parent()
        .map(|prefix| prefix.join("lib/taskhost/plugins"));
    ["tasks", "bash", "subagent"]
        .iter()
        .map(|name| {
            let file = format!("libtaskhost_plugin_{name}.so");
            let beside = dir.join(&file);
            match &installed {
                Some(installed) if !beside.exists() && installed.join(&file).exists() => {
                    installed.join(file)
                }
                _ => beside,
            }
        })
        .collect()
}

/// The plugin directories: the config's, then `cli`'s (`--plugin-dir`), each absolute.
pub(crate) fn dirs(config: &crate::config::Config, cli: &[PathBuf]) -> Vec<PathBuf> {
    config
        .host
        .plugin_dir
        .iter()
        .chain(cli)
        .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()))
        .collect()
}

/// The host's code (see `HostPaths::code`): its binary, the bounds wrapper beside it, the config
/// at `config_file`, and the plugins it loads: the config's and `cli`'s, the directories `dirs`
/// and the libraries in them, or, with none of these, the default plugins.
pub(crate) fn code(
    (config, config_file): (&crate::config::Config, Option<&Path>),
    cli: &[PathBuf],
    dirs: &[PathBuf],
) -> Vec<PathBuf> {
    let plugins: Vec<PathBuf> = (config.plugins.iter().map(|p| p.path.clone()))
        .chain(cli.iter().cloned())
        .collect();
    let exe = std::env::current_exe().ok();
    let wrapper = exe.as_deref().map(|e| {
        taskhost_process::bounds::Wrapper::beside(e)
            .program()
            .to_owned()
    });
    let defaults = (plugins.is_empty() && dirs.is_empty()).then(paths);
    let in_dirs = dirs
        .iter()
        .flat_map(|d| crate::plugin::watch::libraries_in(d).unwrap_or_default());
    exe.into_iter()
        .chain(wrapper)
        .chain(config_file.map(Path::to_path_buf))
        .chain(plugins)
        .chain(dirs.iter().cloned())
        .chain(in_dirs)
        .chain(defaults.into_iter().flatten())
        .map(|p| std::path::absolute(&p).unwrap_or(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::chosen;

    #[test]
    fn plugins_beside_the_binary_come_first_then_the_installed_directory() {
        let root = std::env::temp_dir().join(format!("taskhost-defaults-{}", std::process::id()));
        let (bin, lib) = (root.join("bin"), root.join("lib/taskhost/plugins"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("libtaskhost_plugin_tasks.so"), "").unwrap();
        std::fs::write(lib.join("libtaskhost_plugin_bash.so"), "").unwrap();
        std::fs::write(bin.join("libtaskhost_plugin_bash.so"), "").unwrap();
        let found = chosen(&bin);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            found,
            [
                lib.join("libtaskhost_plugin_tasks.so"),
                bin.join("libtaskhost_plugin_bash.so"),
                bin.join("libtaskhost_plugin_subagent.so"),
            ]
        );
    }
}
