//! What the integration tests (`tests/it`, `tests/soak`) and the host's benchmarks share: where the
//! cargo build they drive lives, how to make a plugin file look like a fresh build of itself, and a
//! real browser to look at the web view with ([`webdriver`]).

use std::path::{Path, PathBuf};

pub mod http1;
pub mod webdriver;

/// The task a tool call started, as its MCP result (`result` of the JSON-RPC answer) names it:
/// `_meta: {"taskhost/started": {"task": ID}}`. The text is the model's and is never parsed.
pub fn started_task(result: &serde_json::Value) -> Option<String> {
    result["_meta"]["taskhost/started"]["task"]
        .as_str()
        .map(str::to_owned)
}

/// Polls `f` every 10 ms until it holds or `timeout` passes; whether it held. A test waits for
/// what it can observe this way, never for a fixed time.
pub fn eventually(timeout: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The cargo profile directory (`target/<profile>`) holding the built binaries and cdylibs, found
/// from the running test or bench binary, which cargo puts in its `deps/`.
///
/// # Panics
/// If the running binary is not two levels below a directory (not run by cargo).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<binary>")
        .to_path_buf()
}

/// `bytes` of a plugin as a rebuild numbered `n` would make them: the same code under another GNU
/// build id (which the host uses to tell builds of the same size apart).
///
/// # Panics
/// If the bytes carry no GNU build id note in their first 4 KiB (the workspace's linker writes one).
pub fn with_build_id(mut bytes: Vec<u8>, n: u32) -> Vec<u8> {
    // An ELF note header: name size 4, descriptor size 20, type NT_GNU_BUILD_ID, name "GNU".
    const NOTE: &[u8] = b"\x04\0\0\0\x14\0\0\0\x03\0\0\0GNU\0";
    let at = bytes
        .windows(NOTE.len())
        .take(4096)
        .position(|w| w == NOTE)
        .expect("the plugin has a GNU build id note in its first 4 KiB")
        + NOTE.len();
    bytes[at..at + 4].copy_from_slice(&n.to_le_bytes());
    bytes
}

/// A fresh private directory (mode 0700) under the temp dir, removed with everything in it when
/// dropped: tests and benches leave nothing behind.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// Creates `<temp dir>/<prefix>-<pid>-<name>`, replacing what a crashed earlier run of the same
    /// process id may have left.
    ///
    /// # Panics
    /// If the directory cannot be created.
    pub fn new(prefix: &str, name: &str) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        Self(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_build_id_changes_only_the_note_descriptor() {
        let mut elf = vec![0u8; 64];
        elf.extend_from_slice(b"\x04\0\0\0\x14\0\0\0\x03\0\0\0GNU\0");
        elf.extend_from_slice(&[0xaa; 20]);
        elf.extend_from_slice(&[7; 16]);
        let rebuilt = with_build_id(elf.clone(), 0x0102_0304);
        assert_eq!(rebuilt.len(), elf.len());
        assert_eq!(&rebuilt[80..84], &[4, 3, 2, 1]);
        assert_eq!(rebuilt[..80], elf[..80]);
        assert_eq!(rebuilt[84..], elf[84..]);
    }
}
