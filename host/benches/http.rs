//! HTTP figures for `scripts/bench`, against the real release `taskhost` serving
//! `--listen http://127.0.0.1:0` with its default plugins:
//! - a non-blocking `task_output` round trip over one keep-alive connection, against the era's
//!   cheapest round trip on the same connection (`ping` in a legacy session; `server/discover` in
//!   2026-07-28, which has no `ping`);
//! - 100 clients at once, each its own principal and connection, each starting 20 background tasks
//!   and reading each to its end: every output checked byte for byte, the wall time, and the host's
//!   threads and resident memory after.

mod common;

use std::time::Instant;

use common::http::{Conn, Host, start, threads_and_rss, token};
use serde_json::json;

fn round_trips(host: &Host) {
    let token = token(host, "bench-round-trip");
    for (era, modern, baseline) in [
        ("legacy session", false, "MCP ping round trip over HTTP"),
        ("2026-07-28", true, "server/discover round trip over HTTP"),
    ] {
        let mut conn = if modern {
            Conn::open(host.port, &token, true)
        } else {
            Conn::legacy(host.port, &token)
        };
        let id = conn.start(
            "bash",
            json!({"command": "sleep 600", "run_in_background": true}),
        );
        let n = 2_000;
        let (mut best_ping, mut best_read) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            let t = Instant::now();
            for _ in 0..n {
                if modern {
                    conn.request("server/discover", json!({}));
                } else {
                    conn.request("ping", json!({}));
                }
            }
            best_ping = best_ping.min(t.elapsed().as_secs_f64() * 1e6 / f64::from(n));
            let t = Instant::now();
            for _ in 0..n {
                conn.call("task_output", json!({"task_id": id}));
            }
            best_read = best_read.min(t.elapsed().as_secs_f64() * 1e6 / f64::from(n));
        }
        conn.call("task_kill", json!({"task_id": id}));
        println!(
            "{{\"name\":\"task_output round trip over HTTP (non-blocking), {era}\",\"unit\":\"us\",\"value\":{best_read:.1},\"baseline_name\":\"{baseline}\",\"baseline\":{best_ping:.1},\"ratio\":{:.2}}}",
            best_read / best_ping
        );
    }
}

fn concurrent_clients(host: &Host) {
    let (clients, tasks) = (100, 20);
    let tokens: Vec<String> = (0..clients)
        .map(|i| token(host, &format!("bench-client-{i}")))
        .collect();
    let (threads_before, rss_before) = threads_and_rss(host.child.id());
    let t = Instant::now();
    let handles: Vec<_> = tokens
        .into_iter()
        .enumerate()
        .map(|(i, token)| {
            let port = host.port;
            std::thread::spawn(move || {
                let mut conn = Conn::open(port, &token, true);
                let ids: Vec<String> = (0..tasks)
                    .map(|j| {
                        let command = format!("printf 'client {i} task {j}\\n'; seq 1 200");
                        conn.start(
                            "bash",
                            json!({"command": command, "run_in_background": true}),
                        )
                    })
                    .collect();
                let expected_tail: String = (1..=200).map(|n| format!("{n}\n")).collect();
                let mut wrong = 0;
                for (j, id) in ids.iter().enumerate() {
                    let read = conn.call(
                        "task_output",
                        json!({"task_id": id, "wait": true, "timeout_ms": 60000}),
                    );
                    let expected = format!(
                        "client {i} task {j}\n{expected_tail}[status: completed, exit code: 0]"
                    );
                    if !read.starts_with(&expected) {
                        wrong += 1;
                    }
                }
                wrong
            })
        })
        .collect();
    let wrong: usize = handles.into_iter().map(|h| h.join().unwrap_or(tasks)).sum();
    let elapsed = t.elapsed().as_secs_f64();
    let (threads, rss) = threads_and_rss(host.child.id());
    println!(
        "{{\"name\":\"{clients} HTTP clients x {tasks} background tasks, each read to its end ({wrong} outputs wrong; host threads {threads_before} -> {threads}, RSS {} -> {} MiB)\",\"unit\":\"s\",\"value\":{elapsed:.2},\"baseline_name\":\"(absolute)\",\"baseline\":{elapsed:.2},\"ratio\":1.00}}",
        rss_before / 1024,
        rss / 1024
    );
}

fn main() {
    let dir = common::scratch("http");
    let host = start(dir.path());
    round_trips(&host);
    concurrent_clients(&host);
}
