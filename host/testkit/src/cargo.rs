//! The plugin's cdylib as cargo builds it, for the tests that load the real file.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::TestkitError;
use crate::host::TestHost;

impl TestHost {
    /// The cdylib `lib<stem>.so` that cargo built next to the running test binary
    /// (`target/<profile>/`): where `cargo test` puts the crate's own plugin.
    pub fn built_cdylib(stem: &str) -> PathBuf {
        let exe = std::env::current_exe().unwrap_or_default();
        let profile = exe
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        profile.join(format!("lib{stem}.so"))
    }

    /// Builds the cdylib of the crate whose manifest is in `manifest_dir` (`cargo build --lib`, the
    /// profile and target directory of the running test) and returns its path: a plugin's own tests
    /// pass `env!("CARGO_MANIFEST_DIR")`, so `cargo test` alone builds what it loads.
    ///
    /// # Errors
    /// [`TestkitError::Setup`] with cargo's output when the build fails or makes no cdylib.
    pub fn build_cdylib(manifest_dir: impl AsRef<Path>) -> Result<PathBuf, TestkitError> {
        let manifest = manifest_dir.as_ref().join("Cargo.toml");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = std::process::Command::new(cargo);
        build
            .args(["build", "--lib", "--message-format=json-render-diagnostics"])
            .arg("--manifest-path")
            .arg(&manifest);
        // The test binary is in target/<profile>/deps: build the same profile into the same place.
        let exe = std::env::current_exe().unwrap_or_default();
        if let Some(profile_dir) = exe.parent().and_then(Path::parent) {
            if profile_dir.file_name().is_some_and(|p| p == "release") {
                build.arg("--release");
            }
            if let Some(target_dir) = profile_dir.parent() {
                build.arg("--target-dir").arg(target_dir);
            }
        }
        let out = build
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| TestkitError::Setup(format!("cannot run cargo: {e}")))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let built = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact")
            .flat_map(|m| {
                m["filenames"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|f| f.as_str().map(PathBuf::from))
                    .collect::<Vec<_>>()
            })
            .rfind(|f| f.extension().is_some_and(|e| e == "so"));
        match built {
            Some(path) if out.status.success() => Ok(path),
            _ => Err(TestkitError::Setup(format!(
                "cargo build --lib of {} made no cdylib ({})",
                manifest.display(),
                out.status
            ))),
        }
    }
}
