//! A producer whose tasks the tests steer: they stream numbered lines at an interval, then settle;
//! their cancel succeeds, fails, panics or is ignored on demand, or calls back into the host for its
//! own task (`reenter`, as does its reader then); their worker, tools and init panic on demand.
//! `probe_refusal` answers the kind of the host's refusal of a read, write, wait, kill or start.
//! With `start_words` in its config it serves `probe_produce` too: a producer MCP clients may run
//! as a task, whose start tells the model `<start_words> <id>` (no wording the host knows).

mod c_thread;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use taskhost_abi::sdk::{Declaration, Output, TaskControl, runs_in_background_as_task};
use taskhost_abi::serde_json::{Value, json};
use taskhost_abi::{FfiOutcome, FfiStatus, Host, Plugin, ToolCall, ToolResult, export_plugin};

/// Calls served by this generation's code (statics start at zero in every generation).
static CALLS: AtomicU64 = AtomicU64::new(0);
/// `probe_block` calls under way, so a test can see one has started.
static BLOCKING: AtomicU64 = AtomicU64::new(0);

struct Probe;

impl Plugin for Probe {
    fn prompt_section(&self) -> String {
        "Probe tasks stream numbered lines.".to_owned()
    }
}

struct Control {
    cancelled: Arc<AtomicBool>,
    output: Option<Arc<Mutex<String>>>,
    mode: String,
    reenter: Option<Reentry>,
}

/// What a `reenter` task's hooks need to call back into the host for their own task.
struct Reentry {
    host: Host,
    /// The owner session, the caller of the call-backs.
    caller: String,
    /// The task's own id, set once the start returned.
    id: Arc<Mutex<Option<String>>>,
}

impl Control {
    /// In `reenter` mode, calls `f` with the host, the caller session and the task's own id, and
    /// returns what it said as a line of output.
    fn reenter(&self, what: &str, f: impl FnOnce(&Host, &str, &str) -> String) -> Option<String> {
        let r = self.reenter.as_ref()?;
        let id = r.id.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
        Some(format!(
            "{what} of itself: {}\n",
            f(&r.host, &r.caller, &id)
        ))
    }
}

impl TaskControl for Control {
    fn cancel(&mut self, _reason: Option<&str>) -> Result<(), String> {
        let said = self.reenter("kill", |h, caller, id| {
            match h.kill_task(caller, id, None) {
                Ok(_) => "requested".to_owned(),
                Err(e) => format!("{e}\nkind of refusal: {:?}", e.kind),
            }
        });
        if let (Some(said), Some(out)) = (said, &self.output) {
            out.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_str(&said);
        }
        match self.mode.as_str() {
            "fail" => Err("probe cancel refused".to_owned()),
            "panic" => panic!("probe cancel panicked"),
            "hang" => Ok(()),
            _ => {
                self.cancelled.store(true, Ordering::SeqCst);
                Ok(())
            }
        }
    }

    fn read(&mut self) -> Option<String> {
        let said = self.reenter("read", |h, caller, id| match h.read_task(caller, id) {
            Ok(r) => format!("read {} bytes", r.text.len()),
            Err(e) => e.into(),
        });
        self.output.as_ref().map(|o| {
            let mut o = o.lock().unwrap_or_else(|p| p.into_inner());
            o.push_str(said.as_deref().unwrap_or_default());
            std::mem::take(&mut *o)
        })
    }
}

fn args(call: &ToolCall) -> Value {
    taskhost_abi::serde_json::from_str(call.arguments_json.as_str()).unwrap_or(Value::Null)
}

fn start(host: &Host, call: &ToolCall) -> ToolResult {
    start_worded(host, call, "started background task")
}

/// Asks the host what `op` names (`read`, `write`, `wait_output` or `kill` of `task_id` as the
/// caller, or `start` of a task whose start fails) and answers `ok` or `<kind>: <message>`: what a
/// plugin branches on.
fn refusal(host: &Host, call: &ToolCall) -> ToolResult {
    let a = args(call);
    let (caller, id) = (call.session(), a["task_id"].as_str().unwrap_or_default());
    let answer = match a["op"].as_str().unwrap_or_default() {
        "read" => host.read_task(caller, id).map(drop),
        "write" => host.write_task(caller, id, "x", false),
        "wait_output" => {
            let pattern = a["pattern"].as_str().unwrap_or_default();
            host.wait_output(caller, id, pattern, 10.0).map(drop)
        }
        "kill" => host.kill_task(caller, id, None).map(drop),
        "start" => {
            let decl = Declaration::new("probe", "a start that fails").owned_by(caller);
            host.start_task(&decl, Output::Final, |_| {
                Err::<Control, _>("probe start refused".to_owned())
            })
            .map(drop)
        }
        other => return ToolResult::error(format!("unknown op {other:?}")),
    };
    match answer {
        Ok(()) => ToolResult::ok("ok"),
        Err(e) => ToolResult::ok(format!("{:?}: {e}", e.kind)),
    }
}

/// Starts a probe task and tells the model `<words> <id>`.
fn start_worded(host: &Host, call: &ToolCall, words: &str) -> ToolResult {
    let a = args(call);
    let lines = a["lines"].as_u64().unwrap_or(3);
    let interval = Duration::from_millis(a["interval_ms"].as_u64().unwrap_or(10));
    let final_output = a["final"].as_bool().unwrap_or(false);
    let mode = a["cancel"].as_str().unwrap_or("ok").to_owned();
    let panic_after = a["panic_after"].as_u64();
    let owner = (!call.session.is_empty()).then(|| call.session.as_str().to_owned());
    let worker_host = host.clone();
    let own_id: Arc<Mutex<Option<String>>> = Arc::default();
    let reenter = (mode == "reenter").then(|| Reentry {
        host: host.clone(),
        caller: owner.clone().unwrap_or_default(),
        id: own_id.clone(),
    });
    let decl = Declaration::new("probe", &format!("probe {lines} lines"))
        .owned_by(owner.as_deref().unwrap_or_default());
    let output_kind = if final_output {
        Output::Final
    } else {
        Output::Stream
    };
    let started = host.start_task(&decl, output_kind, move |handle| {
        let cancelled = Arc::new(AtomicBool::new(false));
        let output = Arc::new(Mutex::new(String::new()));
        let (flag, sink) = (cancelled.clone(), output.clone());
        worker_host.spawn_worker(move || {
            let mut all = String::new();
            for i in 0..lines {
                if panic_after == Some(i) {
                    panic!("probe worker panicked after {i} lines");
                }
                if flag.load(Ordering::SeqCst) {
                    handle.complete(FfiOutcome::new(
                        FfiStatus::Killed,
                        Some("signal: SIGTERM"),
                        None,
                    ));
                    return;
                }
                let line = format!("line {i}\n");
                all.push_str(&line);
                sink.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push_str(&line);
                std::thread::sleep(interval);
            }
            let output = final_output.then_some(all.as_str());
            handle.complete(FfiOutcome::new(
                FfiStatus::Completed,
                Some("exit code: 0"),
                output,
            ));
        });
        Ok(Control {
            cancelled,
            output: (!final_output).then_some(output),
            mode,
            reenter,
        })
    });
    match started {
        Ok(id) => {
            *own_id.lock().unwrap_or_else(|p| p.into_inner()) = Some(id.clone());
            ToolResult::started(format!("{words} {id}"), id)
        }
        Err(e) => ToolResult::error(e),
    }
}

fn init(host: Host) -> Result<Probe, String> {
    let config = host.config_value();
    if config["panic_in_init"].as_bool() == Some(true) {
        panic!("probe init panicked");
    }
    if config["fail_in_init"].as_bool() == Some(true) {
        return Err("probe init refused".to_owned());
    }
    let schema = json!({"type": "object"});
    if let Some(words) = config["start_words"].as_str() {
        let (h, words) = (host.clone(), words.to_owned());
        host.register_tool_with(
            "probe_produce",
            "Starts a probe task, worded as configured.",
            schema.clone(),
            runs_in_background_as_task(),
            move |call: &ToolCall| start_worded(&h, call, &words),
        )?;
    }
    let h = host.clone();
    host.register_tool(
        "probe_start",
        "Starts a probe task.",
        schema.clone(),
        move |call: &ToolCall| {
            CALLS.fetch_add(1, Ordering::Relaxed);
            start(&h, call)
        },
    )?;
    let h = host.clone();
    host.register_tool(
        "probe_refusal",
        "Answers the kind of the host's refusal of an op.",
        schema.clone(),
        move |call: &ToolCall| refusal(&h, call),
    )?;
    host.register_tool(
        "probe_calls",
        "Calls served by this generation.",
        schema.clone(),
        |_: &ToolCall| ToolResult::ok(CALLS.fetch_add(1, Ordering::Relaxed).to_string()),
    )?;
    host.register_tool(
        "probe_panic",
        "Panics.",
        schema.clone(),
        |_: &ToolCall| -> ToolResult { panic!("probe tool panicked") },
    )?;
    let h = host.clone();
    host.register_tool(
        "probe_log",
        "Logs `message` at warn level through the host.",
        schema.clone(),
        move |call: &ToolCall| {
            let message = args(call)["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            h.log(taskhost_abi::Level::Warn, &message);
            ToolResult::ok("logged")
        },
    )?;
    host.register_tool(
        "probe_block",
        "Blocks for ms milliseconds.",
        schema.clone(),
        |call: &ToolCall| {
            let ms = args(call)["ms"].as_u64().unwrap_or(1000);
            BLOCKING.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(ms));
            BLOCKING.fetch_sub(1, Ordering::SeqCst);
            ToolResult::ok("unblocked")
        },
    )?;
    host.register_tool(
        "probe_blocking",
        "How many probe_block calls of this generation are under way.",
        schema.clone(),
        |_: &ToolCall| ToolResult::ok(BLOCKING.load(Ordering::SeqCst).to_string()),
    )?;
    host.register_tool(
        "probe_c_thread",
        "Starts a thread the way a C library would; it runs for ms milliseconds.",
        schema.clone(),
        |call: &ToolCall| match c_thread::start(args(call)["ms"].as_u64().unwrap_or(100)) {
            Ok(()) => ToolResult::ok("started"),
            Err(e) => ToolResult::error(e),
        },
    )?;
    let h = host.clone();
    host.register_tool(
        "probe_listen",
        "Registers a panicking listener.",
        schema,
        move |_: &ToolCall| {
            h.on_task_done(|_| panic!("probe listener panicked"));
            ToolResult::ok("listening")
        },
    )?;
    Ok(Probe)
}

export_plugin!(name: "probe", init: init);
