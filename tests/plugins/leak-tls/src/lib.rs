//! A plugin whose thread-local destructor keeps it mapped: a thread of its own touches a
//! `thread_local!` value with a destructor (registered through `__cxa_thread_atexit_impl`), then
//! outlives the generation, so glibc cannot unmap the library. `taskhost check` must name it.

use std::cell::RefCell;

use taskhost_abi::prelude::*;

/// A value whose drop glibc must run when its thread exits.
struct Noisy(Vec<u8>);

impl Drop for Noisy {
    fn drop(&mut self) {
        self.0.clear();
    }
}

thread_local! {
    static STATE: RefCell<Noisy> = const { RefCell::new(Noisy(Vec::new())) };
}

fn init(host: Host) -> Result<NoState, String> {
    host.register_tool(
        "leak_tls_ping",
        "Answers pong.",
        json!({"type": "object"}),
        |_: &ToolCall| ToolResult::ok("pong"),
    )?;
    std::thread::Builder::new()
        .name("tls-outlives".into())
        .spawn(|| {
            STATE.with(|s| s.borrow_mut().0.push(1));
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(NoState)
}

export_plugin!(name: "leak_tls", init: init);
