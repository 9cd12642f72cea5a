//! The `slurm` tool on the real host in-process (this crate's code linked in, no cdylib built),
//! without a cluster: what is checked before a submission, and a submission `sbatch` refuses (an
//! empty `slurm.conf`). The cluster's own behaviour is tested in `tests/it/slurm.rs`.

use std::path::PathBuf;

use taskhost_abi::serde_json::{Value, json};
use taskhost_testkit::TestHost;

/// A test's own directory under the temporary directory, removed when dropped: the plugin's output
/// directory (`out`, not made yet) and a `slurm.conf` every Slurm command refuses at once (empty).
struct OutputDir {
    base: PathBuf,
    out: PathBuf,
    conf: PathBuf,
}

impl OutputDir {
    fn new(name: &str) -> Self {
        let base = std::env::temp_dir().join(format!("slurm-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).expect("made");
        let conf = base.join("slurm.conf");
        std::fs::write(&conf, "").expect("written");
        Self {
            out: base.join("out"),
            base,
            conf,
        }
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn host(config: &Value) -> TestHost {
    let host = TestHost::new().expect("test host");
    host.load_linked_with_config(crate::__taskhost_root_module(), config)
        .expect("the slurm plugin loads");
    host.open_session("s");
    host
}

fn no_cluster(dir: &OutputDir) -> Value {
    json!({"output_dir": dir.out, "slurm_conf": dir.conf, "poll_ms": 50})
}

#[test]
fn bad_arguments_are_named_before_anything_is_submitted() {
    let dir = OutputDir::new("bad-args");
    let host = host(&no_cluster(&dir));
    for (args, error) in [
        (
            json!({"command": "  "}),
            "Error: invalid command: expected a non-empty string, got \"\"",
        ),
        (
            json!({"command": "true", "cpus": 0}),
            "Error: invalid cpus: expected a positive integer, got 0",
        ),
        (
            json!({"command": "true", "time_limit": "soon"}),
            "Error: invalid time_limit 'soon': expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS",
        ),
        (
            json!({"command": "true", "memory": "lots"}),
            "Error: invalid memory 'lots': expected a size such as 512M or 4G",
        ),
    ] {
        assert_eq!(host.call("s", "slurm", args), Err(error.to_owned()));
    }
    assert!(!dir.out.exists(), "nothing is written for a refused call");
}

#[test]
fn a_refused_submission_is_sbatchs_error_in_the_foreground_and_in_the_background() {
    let dir = OutputDir::new("refused");
    let host = host(&no_cluster(&dir));
    for background in [false, true] {
        let refused = host
            .call(
                "s",
                "slurm",
                json!({"command": "true", "run_in_background": background}),
            )
            .expect_err("refused");
        assert!(refused.starts_with("Error: sbatch: "), "{refused}");
    }
    assert!(host.list("s").is_empty(), "no task is registered");
}

#[test]
fn an_output_directory_open_to_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = OutputDir::new("open");
    std::fs::create_dir_all(&dir.out).expect("made");
    std::fs::set_permissions(&dir.out, std::fs::Permissions::from_mode(0o777)).expect("opened");
    let host = host(&no_cluster(&dir));
    let refused = host
        .call("s", "slurm", json!({"command": "true"}))
        .expect_err("refused");
    assert!(
        refused.contains("refusing the output directory"),
        "{refused}"
    );
}

#[test]
fn a_bad_default_time_limit_fails_the_load() {
    let host = TestHost::new().expect("test host");
    let error = host
        .load_linked_with_config(
            crate::__taskhost_root_module(),
            &json!({"default_time_limit": "forever"}),
        )
        .expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("slurm: default_time_limit: invalid time_limit 'forever'"),
        "{error}"
    );
}
