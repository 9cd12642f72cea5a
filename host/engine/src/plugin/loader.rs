//! Opening a plugin file: the trust check, the generation's private file, and the ABI checks.
//!
//! This module has `unsafe` code (the crate denies it everywhere but here, `own_threads.rs`, which
//! keeps a plugin's own threads from outliving its code, and `memory.rs`; the ABI glue in `abi/` is
//! the other place in the workspace): loading a library runs its initializers, and the root module
//! hands out `'static` references that are only valid while the library stays open. [`Libraries`] owns both handles; a
//! [`Generation`](super::Generation) owns the libraries and every value that could point into them.
//!
//! The file is opened once ([`open_source`]) through the trusted walk of
//! `taskhost_process::trusted_path` (from `/`, one component at a time, each directory root's or ours
//! and not writable by group or others unless sticky, a symlink resolved by the same walk); the
//! signature, the build id and the private copy all read that one descriptor. Each generation gets a
//! private file `<gen dir>/<stem>.g<N>.so`, always a copy in an inode of its own (`copy_file_range`): it
//! used to be a hard link when it could, which shared the inode, so rewriting a loaded plugin in place
//! (`cp`) truncated the running code and the host died of SIGSEGV (a test reproduced it); a fresh inode
//! also keeps glibc, which dedups `dlopen` by device and inode, from handing back an old mapping. The
//! name is created exclusively (a planted symlink is skipped, never followed), reopened `O_NOFOLLOW` and
//! checked to be the inode just made; the ELF structure is checked first (a truncated file would SIGBUS
//! inside `dlopen`); then `dlopen(RTLD_NOW | RTLD_LOCAL)`, abi_stable's header, version and layout check
//! with fresh checking globals per generation, and our `ABI_VERSION`. Not used: `dlopen` of
//! `/proc/self/fd/N` (glibc matches a loaded object by name first, and descriptor numbers are reused).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use abi_stable::StableAbi;
use abi_stable::abi_stability::abi_checking::{
    CheckingGlobals, check_layout_compatibility_with_globals,
};
use abi_stable::library::{LibraryError, RawLibrary, RootModule, lib_header_from_raw_library};
use abi_stable::sabi_types::VersionNumber;
use taskhost_abi::{ABI_VERSION, PluginModRef, abi_stable};

/// Why a plugin file could not be loaded. Each names the file and the cause.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file or its directory is writable by others, or owned by another user.
    #[error(
        "refusing plugin {path}: {why} (loading a library runs its code; pass --allow-untrusted-plugins to override)"
    )]
    Untrusted {
        /// The plugin file.
        path: PathBuf,
        /// What made it untrusted.
        why: String,
    },
    /// The file could not be read or copied.
    #[error("cannot read plugin {path}: {source}")]
    Io {
        /// The plugin file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The dynamic loader refused the file (truncated, not a library, unresolved symbols).
    #[error("plugin {path} is not a loadable library: {cause}")]
    NotALibrary {
        /// The plugin file.
        path: PathBuf,
        /// The loader's message.
        cause: String,
    },
    /// The library exports no taskhost root module.
    #[error("plugin {path} is not a taskhost plugin: it exports no root module ({cause})")]
    NoRootModule {
        /// The plugin file.
        path: PathBuf,
        /// The loader's message.
        cause: String,
    },
    /// The plugin was built against an incompatible interface.
    #[error("plugin {path} has an incompatible ABI: {mismatch}")]
    AbiMismatch {
        /// The plugin file.
        path: PathBuf,
        /// What differs (the tail of abi_stable's report).
        mismatch: String,
    },
    /// The generation directory is not private, or a file in it changed under the host.
    #[error("cannot prepare a private generation file: {0}")]
    GenerationDir(String),
    /// The plugin's init failed or panicked.
    #[error("plugin {plugin} ({path}) failed to initialize: {message}")]
    Init {
        /// The plugin's name.
        plugin: String,
        /// The plugin file.
        path: PathBuf,
        /// The plugin's error.
        message: String,
    },
    /// The plugin's tools clash with another plugin's.
    #[error("plugin {plugin} ({path}) registers tool {tool}, which plugin {owner} already serves")]
    ToolClash {
        /// The plugin's name.
        plugin: String,
        /// The plugin file.
        path: PathBuf,
        /// The contested tool.
        tool: String,
        /// The plugin serving it.
        owner: String,
    },
}

/// The two handles of one generation's file: the `RTLD_NOW` validation handle and abi_stable's.
/// Dropping the last `Arc` of it closes the library (both handles are refcounts on one mapping); its
/// generation holds one, and so does every thread the plugin started on its own (`own_threads.rs`).
pub(crate) struct Libraries {
    _abi: RawLibrary,
    _validated: libloading::os::unix::Library,
}

/// Opens a plugin file once, for everything the load reads from it (its signature, its build id,
/// the private copy): with the trust check, through [`open_trusted_file`] (every directory from the
/// root down, every link on the way and the file itself belong to root or this user and only they
/// can write them); with `allow_untrusted`, as it is, but still only a regular file.
///
/// [`open_trusted_file`]: taskhost_process::trusted_path::open_trusted_file
pub(crate) fn open_source(path: &Path, allow_untrusted: bool) -> Result<fs::File, LoadError> {
    use taskhost_process::trusted_path::{TrustError, open_trusted_file};
    if !allow_untrusted {
        return open_trusted_file(path).map_err(|e| match e {
            TrustError::Untrusted { why, .. } => LoadError::Untrusted {
                path: path.to_owned(),
                why,
            },
            TrustError::Io { source, .. } => LoadError::Io {
                path: path.to_owned(),
                source,
            },
        });
    }
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let file = fs::File::open(path).map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(LoadError::NotALibrary {
            path: path.to_owned(),
            cause: "not a regular file".into(),
        });
    }
    Ok(file)
}

/// A generation's own file: created by the host in its private generation directory, and held open
/// read-only, so what is checked and what is loaded are the inode the host made.
pub(crate) struct PrivateFile {
    pub(crate) path: PathBuf,
    pub(crate) file: fs::File,
}

/// Gives the generation its own file, `<dir>/<stem>.g<N>.so` (`<stem>.g<N>-<k>.so` when another
/// plugin of the same stem took that name): a copy of the bytes of `original` (the source, opened
/// once by [`open_source`]), in an
/// inode of its own. Never a hard link: a link shares the inode, so a plugin file overwritten in place
/// (`cp new.so plugin.so` truncates and rewrites it) would truncate the code of the generation mapped
/// from it, and the host would die of SIGSEGV or SIGBUS (measured: a test that rewrote a loaded
/// plugin in place crashed the host while the loader linked). A copy also gives each generation an
/// inode glibc has not seen, so `dlopen` never hands back an older mapping.
///
/// `dir` is the held private generation directory: the name is created exclusively relative to its
/// descriptor (`O_CREAT|O_EXCL|O_NOFOLLOW` neither follows nor replaces whatever is there, so a
/// planted symlink is skipped, never followed), and the path `dlopen` will be given is checked to
/// name the inode just made.
pub(crate) fn private_copy(
    source: &Path,
    original: &fs::File,
    dir: &crate::rundir::HeldDir,
    number: u64,
) -> Result<PrivateFile, LoadError> {
    use std::io::{ErrorKind, Seek};
    let io = |source_err| LoadError::Io {
        path: source.to_owned(),
        source: source_err,
    };
    let mut original = original;
    original.rewind().map_err(io)?;
    let stem = source
        .file_stem()
        .map_or_else(|| "plugin".into(), |s| s.to_string_lossy().into_owned());
    for k in 0..64u32 {
        let name = match k {
            0 => format!("{stem}.g{number}.so"),
            k => format!("{stem}.g{number}-{k}.so"),
        };
        let mut copy = match dir.create_new(&name, 0o500) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(e)),
        };
        // An in-kernel copy (copy_file_range) of the bytes opened above.
        std::io::copy(&mut original, &mut copy).map_err(io)?;
        let target = dir.path().join(&name);
        // `dlopen` takes a path: it must name the file just made in the held directory.
        let expected = file_id(&copy.metadata().map_err(io)?);
        if fs::symlink_metadata(&target).map(|m| file_id(&m)).ok() != Some(expected) {
            return Err(LoadError::GenerationDir(format!(
                "{} is not the file the host just made there",
                target.display()
            )));
        }
        return Ok(PrivateFile {
            path: target,
            file: copy,
        });
    }
    Err(io(ErrorKind::AlreadyExists.into()))
}

/// (device, inode): what identifies a file to glibc and to us.
pub(crate) fn file_id(meta: &fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// Opens a generation's file and checks it: loadable with every symbol resolved, a taskhost root
/// module, a compatible abi_stable version and interface layout, and our [`ABI_VERSION`].
///
/// Only the ELF headers are read here (from the open file); the rest is left to the dynamic loader,
/// which opens the private file by its path. After the load, the path is checked to still name the
/// inode that was checked; the directory is private, so only this user could have changed it.
pub(crate) fn open(
    source: &Path,
    private: &PrivateFile,
) -> Result<(PluginModRef, Arc<Libraries>), LoadError> {
    let io = |e| LoadError::Io {
        path: source.to_owned(),
        source: e,
    };
    let (head, len) = super::elf::read_head(&private.file, 64 * 1024).map_err(io)?;
    super::elf::check_elf(&head, len).map_err(|cause| LoadError::NotALibrary {
        path: source.to_owned(),
        cause,
    })?;
    let (validated, raw) = dlopen(source, private)?;
    let module = check_module(source, &raw)?;
    let libraries = Arc::new(Libraries {
        _abi: raw,
        _validated: validated,
    });
    let hold: super::own_threads::Hold = libraries.clone();
    super::own_threads::track(&hold, module.name() as usize);
    Ok((module, libraries))
}

/// `dlopen`s the private file twice (the `RTLD_NOW` validation handle, and abi_stable's), then checks
/// its path still names the inode that was checked.
fn dlopen(
    source: &Path,
    private: &PrivateFile,
) -> Result<(libloading::os::unix::Library, RawLibrary), LoadError> {
    let io = |e| LoadError::Io {
        path: source.to_owned(),
        source: e,
    };
    let file = private.path.as_path();
    let flags = libc::RTLD_NOW | libc::RTLD_LOCAL;
    // SAFETY: loading a library runs its initializers; the file passed the trust check and is the
    // generation's private file, created exclusively in a directory only this user can write (checked
    // by `private_copy`), so no other user can have put anything at its path, and nothing rewrites it
    // while it is mapped. RTLD_NOW resolves every
    // symbol here, so a missing one fails the load instead of aborting mid-call; RTLD_LOCAL keeps the
    // root-module symbol every plugin exports from colliding.
    let validated =
        unsafe { libloading::os::unix::Library::open(Some(file), flags) }.map_err(|e| {
            LoadError::NotALibrary {
                path: source.to_owned(),
                cause: e.to_string(),
            }
        })?;
    let raw = RawLibrary::load_at(file).map_err(|e| LoadError::NotALibrary {
        path: source.to_owned(),
        cause: e.to_string(),
    })?;
    let opened = file_id(&private.file.metadata().map_err(io)?);
    if fs::symlink_metadata(file).map(|m| file_id(&m)).ok() != Some(opened) {
        return Err(LoadError::GenerationDir(format!(
            "the generation file {} was replaced while it was loaded",
            file.display()
        )));
    }
    Ok((validated, raw))
}

/// Finds the root module in an opened library and checks it: abi_stable's header and version, the
/// interface layout against ours, and our [`ABI_VERSION`].
fn check_module(source: &Path, raw: &RawLibrary) -> Result<PluginModRef, LoadError> {
    // SAFETY: the header's 'static references point into the library, which `Libraries` keeps open for
    // as long as the generation (the only holder of the module) lives.
    let header = unsafe { lib_header_from_raw_library(raw) }.map_err(|e| match e {
        LibraryError::GetSymbolError { .. } => LoadError::NoRootModule {
            path: source.to_owned(),
            cause: e.to_string(),
        },
        other => LoadError::AbiMismatch {
            path: source.to_owned(),
            mismatch: tail(&other.to_string()),
        },
    })?;
    let mismatch = |m: String| LoadError::AbiMismatch {
        path: source.to_owned(),
        mismatch: m,
    };
    let expected =
        VersionNumber::new(PluginModRef::VERSION_STRINGS).map_err(|e| mismatch(e.to_string()))?;
    let actual =
        VersionNumber::new(header.version_strings()).map_err(|e| mismatch(e.to_string()))?;
    if expected.major != actual.major || (expected.major == 0 && expected.minor > actual.minor) {
        return Err(mismatch(format!(
            "built with taskhost-abi {actual}, the host expects {expected}"
        )));
    }
    let layout = header
        .layout()
        .ok_or_else(|| mismatch("the root module carries no layout".into()))?;
    // A fresh checker per generation: the process-wide one would keep pointers into unloaded files.
    check_layout_compatibility_with_globals(
        <PluginModRef as StableAbi>::LAYOUT,
        layout,
        &CheckingGlobals::new(),
    )
    .map_err(|e| mismatch(tail(&e.to_string())))?;
    // SAFETY: the layout was just checked against ours; the module stays valid while `raw` is open.
    let module = unsafe { header.unchecked_layout::<PluginModRef>() }.map_err(|e| {
        LoadError::NotALibrary {
            path: source.to_owned(),
            cause: format!("root module: {e}"),
        }
    })?;
    if module.abi_version() != ABI_VERSION {
        return Err(mismatch(format!(
            "taskhost ABI version {} (the host speaks {ABI_VERSION})",
            module.abi_version()
        )));
    }
    Ok(module)
}

/// The last lines of abi_stable's long mismatch report: where the actual difference is named.
fn tail(report: &str) -> String {
    let lines: Vec<&str> = report
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let start = lines.len().saturating_sub(10);
    lines[start..].join(" / ")
}
