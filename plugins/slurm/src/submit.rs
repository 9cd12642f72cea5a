//! A job's submission: its `#SBATCH` block and `sbatch` command, its batch script in the output
//! directory, and the commands the host runs to follow it.

use crate::args::SlurmArgs;
use crate::config::Config;
use crate::script::{check_memory, check_time_limit, positive, quote, state_script};
use taskhost_abi::prelude::ExternalRequest;

/// The job's options as the script's `#SBATCH` block, and the `sbatch --parsable` command carrying
/// them (the script's path goes last): its output to `<output_dir>/<job id>.out`.
///
/// # Errors
/// A bad argument, named; nothing is submitted then.
pub(crate) fn sbatch_command(
    config: &Config,
    args: &SlurmArgs,
) -> Result<(String, String), String> {
    let mut options = vec![
        "--job-name=taskhost".to_owned(),
        format!("--output={}", config.output_dir.join("%j.out").display()),
    ];
    if let Some(p) = args.partition.as_ref().or(config.partition.as_ref()) {
        options.push(format!("--partition={p}"));
    }
    if let Some(t) = args
        .time_limit
        .as_ref()
        .or(config.default_time_limit.as_ref())
    {
        check_time_limit(t)?;
        options.push(format!("--time={t}"));
    }
    if let Some(n) = positive("cpus", args.cpus)? {
        options.push(format!("--cpus-per-task={n}"));
    }
    if let Some(n) = positive("gpus", args.gpus)? {
        options.push(format!("--gres=gpu:{n}"));
    }
    if let Some(n) = positive("nodes", args.nodes)? {
        options.push(format!("--nodes={n}"));
    }
    if let Some(m) = &args.memory {
        check_memory(m)?;
        options.push(format!("--mem={m}"));
    }
    if let Some(w) = args.workdir.as_ref().filter(|w| !w.is_empty()) {
        options.push(format!("--chdir={w}"));
    }
    // Every option is given twice: on the command line, which takes precedence over any `#SBATCH`
    // line, and in the script's own block, which documents the job where its output is.
    let mut header = String::new();
    for o in &options {
        if o.contains(['\n', '\r']) {
            return Err(format!(
                "slurm: an option may not hold a line break: {}",
                quote(o)
            ));
        }
        header.push_str("#SBATCH ");
        header.push_str(o);
        header.push('\n');
    }
    // The job is the controller's: it does not carry the host's process mark (sbatch passes its
    // environment on), so a host that ends never ends a job running on its own node.
    let mut words = vec![
        "env".to_owned(),
        "-u".to_owned(),
        taskhost_abi::sdk::PROCESS_MARKER.to_owned(),
        "sbatch".to_owned(),
        "--parsable".to_owned(),
    ];
    words.extend(options.iter().map(|o| quote(o)));
    words.extend(config.extra_args.iter().map(|a| quote(a)));
    Ok((header, words.join(" ")))
}

/// Makes the output directory (mode 0700) if it is missing; an existing one must not be open to
/// others' writes, since job scripts and output files are made in it.
fn output_dir(config: &Config) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = &config.output_dir;
    let made = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    made.map_err(|e| {
        format!(
            "slurm: cannot make the output directory {}: {e}",
            dir.display()
        )
    })?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| {
        format!(
            "slurm: cannot inspect the output directory {}: {e}",
            dir.display()
        )
    })?;
    if !meta.is_dir() || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "slurm: refusing the output directory {}: it is not a directory closed to others' writes",
            dir.display()
        ));
    }
    Ok(())
}

/// Writes the job's batch script into the output directory; returns its path. The script is ours
/// before the command: the `#SBATCH` block, then a line that is not a comment, so `sbatch` reads no
/// `#SBATCH` line of the command (it stops at the first command line) and the command cannot change
/// its own partition, time limit or output file.
pub(crate) fn write_script(
    config: &Config,
    header: &str,
    command: &str,
) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::OpenOptionsExt;
    output_dir(config)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path = config
        .output_dir
        .join(format!("taskhost-{}-{nanos:x}.sh", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .open(&path)
        .map_err(|e| format!("slurm: cannot write the job script {}: {e}", path.display()))?;
    let script = format!("#!/bin/bash\n{header}: taskhost\n{command}\n");
    std::io::Write::write_all(&mut file, script.as_bytes())
        .map_err(|e| format!("slurm: cannot write the job script {}: {e}", path.display()))?;
    Ok(path)
}

/// The commands the host runs for a job submitted by `submit` (its script's path last): the
/// submission, the state poll, the cancel, and the output file.
pub(crate) fn external_request(config: &Config, submit: &str) -> ExternalRequest {
    let output = config.output_dir.join("{id}.out").display().to_string();
    ExternalRequest {
        start_command: config.command(submit).into(),
        poll_command: config.command(&state_script("{id}")).into(),
        cancel_command: config.command("scancel {id}").into(),
        output_path: output.into(),
        poll_ms: config.poll_ms.0,
    }
}
