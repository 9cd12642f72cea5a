//! A host never starts without what it was asked to load: a plugin that cannot be read, or whose
//! config has a key it does not know, stops the start with exit 2 naming it and why, given with
//! `--plugin` or in a config's `[[plugin]]` (whose path is the config file's folder's).

use std::path::Path;
use std::time::Duration;

use crate::fixtures::*;
use crate::mcp::binary;

/// `taskhost serve ARGS` on stdio, to its end; its exit code and stderr.
fn serve(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = output_within(
        std::process::Command::new(binary())
            .arg("serve")
            .args(["--no-watch", "--no-state"])
            .args(args)
            .env("XDG_RUNTIME_DIR", dir)
            .env("RUST_LOG", "warn")
            .stdin(std::process::Stdio::null()),
        Duration::from_secs(30),
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_plugin_stops_the_start_naming_it() {
    let dir = scratch("loud-missing");
    let missing = dir.join("libtaskhost_plugin_bsah.so");
    let (code, stderr) = serve(&dir, &["--plugin", missing.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot read plugin {}", missing.display())),
        "{stderr}"
    );
}

#[test]
fn a_missing_plugin_of_the_config_stops_the_start_naming_its_resolved_path() {
    let dir = scratch("loud-config-missing");
    let config = dir.join("host.toml");
    std::fs::write(&config, "[[plugin]]\npath = \"plugins/libnope.so\"\n").unwrap();
    let (code, stderr) = serve(&dir, &["--config", config.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&dir.join("plugins/libnope.so").display().to_string()),
        "{stderr}"
    );
}

#[test]
fn an_unknown_key_in_a_plugins_config_stops_the_start_naming_it() {
    let dir = scratch("loud-bogus-key");
    let config = dir.join("host.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugin]]\npath = {:?}\n[[plugin]]\npath = {:?}\n[plugin.config]\nbogus = 1\n",
            built("taskhost_plugin_tasks"),
            built("taskhost_plugin_bash"),
        ),
    )
    .unwrap();
    let (code, stderr) = serve(&dir, &["--config", config.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("plugin bash"), "{stderr}");
    assert!(stderr.contains("unknown config key bogus"), "{stderr}");
}
