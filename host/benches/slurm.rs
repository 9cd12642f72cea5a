//! Slurm figures for `scripts/bench`, against the single-node cluster of `scripts/slurm-up`: the time
//! from a `slurm` start to the first byte of the job's output reaching `task_output`, and from the
//! job's end (the wall-clock time it prints as its last act) to the task settling; next to `sbatch`
//! by hand, reading the output file and polling `squeue` at the same interval (1 s). Prints a
//! "skipped" row when no cluster runs.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use taskhost::Taskhost;

const POLL: Duration = Duration::from_millis(1000);
const ROUNDS: usize = 5;
/// Prints, last, the wall-clock time it ends at (seconds since the epoch).
const COMMAND: &str = "echo first; sleep 2; date +%s.%N";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Milliseconds from the wall-clock time `output`'s last line names to now.
fn since_end(output: &str) -> f64 {
    let end: f64 = output
        .lines()
        .rev()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or(0.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    (now - end) * 1e3
}

/// One job through taskhost: (start to first output, job's end to settled), in ms.
fn ours(host: &Taskhost, rt: &tokio::runtime::Runtime) -> (f64, f64) {
    let call = |tool: &str, args: serde_json::Value| {
        rt.block_on(host.plugins().call_tool(tool, "bench", &args))
            .expect("call")
            .text
    };
    let t = Instant::now();
    let args = json!({"command": COMMAND, "run_in_background": true});
    let started = rt
        .block_on(host.plugins().call_tool("slurm", "bench", &args))
        .expect("call");
    let id = started
        .started
        .unwrap_or_else(|| panic!("not started: {}", started.text));
    let (mut first, mut all) = (None, String::new());
    loop {
        let text = call("task_output", json!({"task_id": id}));
        let body = text.rsplit_once("[status: ").map_or("", |(b, _)| b);
        all.push_str(body.trim_end_matches("(no new output)\n"));
        if first.is_none() && text.contains("first") {
            first = Some(t.elapsed());
        }
        if !text.ends_with("[status: running]") {
            let end = since_end(&all);
            return (ms(first.unwrap_or_else(|| t.elapsed())), end);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The same job by hand: sbatch, then every POLL read the output file and ask squeue.
fn by_hand(conf: &Path, out: &Path) -> (f64, f64) {
    let t = Instant::now();
    let submitted = std::process::Command::new("sbatch")
        .args(["--parsable", "--wrap", COMMAND, "-o"])
        .arg(out.join("%j.out"))
        .env("SLURM_CONF", conf)
        .output()
        .expect("sbatch");
    let job = String::from_utf8_lossy(&submitted.stdout).trim().to_owned();
    let file = out.join(format!("{job}.out"));
    let mut first = None;
    loop {
        std::thread::sleep(POLL);
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if first.is_none() && text.contains("first") {
            first = Some(t.elapsed());
        }
        let state = std::process::Command::new("squeue")
            .args(["-h", "-j", &job, "-o", "%T"])
            .env("SLURM_CONF", conf)
            .output()
            .expect("squeue");
        if String::from_utf8_lossy(&state.stdout).trim().is_empty() {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            return (ms(first.unwrap_or_else(|| t.elapsed())), since_end(&text));
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/slurm/etc/slurm.conf");
    let up = conf.is_file()
        && std::process::Command::new("sinfo")
            .env("SLURM_CONF", &conf)
            .output()
            .is_ok_and(|o| o.status.success());
    if !up {
        println!(
            "{{\"name\":\"slurm: skipped (no cluster: run scripts/slurm-up as root)\",\"skipped\":true}}"
        );
        return;
    }
    let dir = common::scratch("slurm");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).expect("output dir");
    let (rt, host) = common::bare_host(&dir);
    let profile = common::profile_dir();
    host.plugins()
        .load(&profile.join("libtaskhost_plugin_tasks.so"), None, false)
        .expect("tasks");
    let config = json!({
        "slurm_conf": conf.display().to_string(),
        "output_dir": out.display().to_string(),
        "poll_ms": POLL.as_millis() as u64,
    });
    host.plugins()
        .load(
            &profile.join("libtaskhost_plugin_slurm.so"),
            Some(config.to_string()),
            false,
        )
        .expect("slurm");
    host.sessions().open("bench");
    let (mut our_first, mut our_end, mut hand_first, mut hand_end) =
        (vec![], vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        let (f, e) = ours(&host, &rt);
        our_first.push(f);
        our_end.push(e);
        let (f, e) = by_hand(&conf, &out);
        hand_first.push(f);
        hand_end.push(e);
    }
    for (name, ours, hand) in [
        (
            "slurm: start to the first output byte",
            our_first,
            hand_first,
        ),
        (
            "slurm: the job's end to the task settled",
            our_end,
            hand_end,
        ),
    ] {
        let (ours, hand) = (median(ours), median(hand));
        println!(
            "{{\"name\":\"{name}\",\"unit\":\"ms\",\"value\":{ours:.0},\"baseline_name\":\"sbatch + reading the file and squeue every 1 s by hand\",\"baseline\":{hand:.0},\"ratio\":{:.2}}}",
            ours / hand
        );
    }
    rt.block_on(host.shutdown());
}
