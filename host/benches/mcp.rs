//! MCP figures for `scripts/bench`: a non-blocking `task_output` round trip over stdio to the real
//! release `taskhost` (default plugins), against an MCP `ping` round trip on the same connection, in
//! both protocol eras (legacy `initialize`, and 2026-07-28 `server/discover`), on pipes, and the
//! legacy era again on socketpairs (as Node's clients launch a server).

mod common;

use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, ClientRequest, DiscoverRequest, DiscoverRequestParams, PingRequest,
    ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::TokioChildProcess;

fn main() {
    let profile = common::profile_dir();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The baseline is the era's cheapest protocol round trip: `ping` in the legacy era; 2026-07-28
    // has no `ping`, so there it is `server/discover` (sent raw, past the client's cache).
    // The legacy era once more on socketpairs: Node's clients hand a server its stdio that way.
    let eras = [
        (
            "legacy initialize",
            "MCP ping round trip",
            ClientLifecycleMode::Initialize,
            false,
        ),
        (
            "2026-07-28 discover",
            "server/discover round trip",
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
            false,
        ),
        (
            "legacy initialize, on socketpairs",
            "MCP ping round trip",
            ClientLifecycleMode::Initialize,
            true,
        ),
    ];
    let state = common::scratch("mcp-state");
    for (era, baseline, lifecycle, sockets) in eras {
        rt.block_on(async {
        let (client, host) = if sockets {
            let (ours_in, host_in) = std::os::unix::net::UnixStream::pair().expect("pair");
            let (ours_out, host_out) = std::os::unix::net::UnixStream::pair().expect("pair");
            let host = std::process::Command::new(profile.join("taskhost"))
                .args(["serve", "--no-watch"])
                .env("XDG_STATE_HOME", state.path())
                .env("RUST_LOG", "error")
                .stdin(std::os::fd::OwnedFd::from(host_in))
                .stdout(std::os::fd::OwnedFd::from(host_out))
                .spawn()
                .expect("spawn");
            let tokio_side = |s: std::os::unix::net::UnixStream| {
                s.set_nonblocking(true).expect("non-blocking");
                tokio::net::UnixStream::from_std(s).expect("register")
            };
            let transport = (tokio_side(ours_out), tokio_side(ours_in));
            let client = serve_client_with_lifecycle((), transport, lifecycle).await.expect("handshake");
            (client, Some(host))
        } else {
            let mut cmd = tokio::process::Command::new(profile.join("taskhost"));
            cmd.args(["serve", "--no-watch"])
                .env("XDG_STATE_HOME", state.path())
                .env("RUST_LOG", "error");
            let transport = TokioChildProcess::new(cmd).expect("spawn");
            let client = serve_client_with_lifecycle((), transport, lifecycle).await.expect("handshake");
            (client, None)
        };
        let args = serde_json::json!({"command": "sleep 600", "run_in_background": true});
        let serde_json::Value::Object(args) = args else { unreachable!() };
        let started = client.peer().call_tool(CallToolRequestParams::new("bash").with_arguments(args)).await.expect("bash");
        let id = serde_json::to_value(&started).ok().and_then(|r| taskhost_tests::started_task(&r)).expect("a started task");
        let serde_json::Value::Object(read) = serde_json::json!({"task_id": id}) else { unreachable!() };
        let n = 2_000;
        let mut best_ping = f64::MAX;
        let mut best_read = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            for _ in 0..n {
                let request = if baseline.starts_with("MCP ping") {
                    ClientRequest::PingRequest(PingRequest::default())
                } else {
                    ClientRequest::DiscoverRequest(DiscoverRequest::new(DiscoverRequestParams {}))
                };
                client.peer().send_request(request).await.expect("baseline round trip");
            }
            best_ping = best_ping.min(t.elapsed().as_secs_f64() * 1e6 / f64::from(n));
            let t = Instant::now();
            for _ in 0..n {
                client.peer().call_tool(CallToolRequestParams::new("task_output").with_arguments(read.clone())).await.expect("read");
            }
            best_read = best_read.min(t.elapsed().as_secs_f64() * 1e6 / f64::from(n));
        }
        println!(
            "{{\"name\":\"task_output round trip over stdio (non-blocking), {era}\",\"unit\":\"us\",\"value\":{best_read:.1},\"baseline_name\":\"{baseline}\",\"baseline\":{best_ping:.1},\"ratio\":{:.2}}}",
            best_read / best_ping
        );
        let _ = client.cancel().await;
        if let Some(mut host) = host {
            let _ = host.wait();
        }
    });
    }
}
