//! MCP over HTTP with the real binary: bearer tokens name principals, who own what they start
//! (shared across connections and protocol eras, fenced from other principals and from socket
//! sessions); refused requests say why and where tokens come from; revoking a token ends its owner;
//! Host, Origin, plain HTTP off loopback, and malformed requests are refused as stated.

use std::time::Duration;

use serde_json::json;

use crate::fixtures::*;
use crate::http_wire::{Client, HttpHost, LegacySession, revoke_in};
use crate::mcp::{alive, binary, started_id};

#[test]
fn a_request_without_a_good_token_gets_401_naming_the_metadata() {
    let dir = scratch("http-401");
    let host = HttpHost::start(&dir, &[]);
    let token = host.token("alice");
    let metadata_url = format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        host.authority()
    );
    let mut revoked = Client::new(&host, &host.token("gone"));
    revoke_in(&host.state, "gone");
    let unknown = format!("taskhost_{}", "0".repeat(64));
    let cases = [
        ("no token", None),
        ("not a token", Some("hunter2".to_owned())),
        ("an unknown token", Some(unknown)),
        ("a revoked token", revoked.token.take()),
    ];
    for (what, presented) in cases {
        let client = Client {
            authority: host.authority(),
            token: presented,
        };
        let response = client.modern("tools/list", None, json!({}));
        assert_eq!(response.status, 401, "{what}: {response:?}");
        let challenge = &response.headers["www-authenticate"];
        assert!(
            challenge.starts_with(&format!("Bearer resource_metadata=\"{metadata_url}\"")),
            "{what}: {challenge}"
        );
    }
    let listed = Client::new(&host, &token).modern("tools/list", None, json!({}));
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(listed.body.contains("task_output"), "{listed:?}");

    let mut stream = std::net::TcpStream::connect(host.authority()).unwrap();
    let path = "/.well-known/oauth-protected-resource/mcp";
    let document = crate::http_wire::send(&mut stream, &host.authority(), "GET", path, &[], b"");
    assert_eq!(document.status, 200, "{document:?}");
    let document: serde_json::Value = serde_json::from_str(&document.body).unwrap();
    assert_eq!(document["resource"], json!(host.url));
    assert_eq!(document["bearer_methods_supported"], json!(["header"]));
}

#[test]
fn a_principal_shares_its_tasks_across_connections_and_eras_and_others_never_see_them() {
    let dir = scratch("http-principals");
    let host = HttpHost::start(&dir, &[]);
    let (alice_token, bob_token) = (host.token("alice"), host.token("bob"));
    let alice = Client::new(&host, &alice_token);
    let bob = Client::new(&host, &bob_token);
    let started = alice.answer(
        "bash",
        json!({"command": "echo from alice", "run_in_background": true}),
    );
    let task = started_id(&started);
    assert!(task.starts_with("bash-"), "{started:?}");

    // The same token in a legacy session on other connections: the same owner.
    let legacy = LegacySession::open(Client::new(&host, &alice_token));
    let mut read = String::new();
    assert!(
        eventually(Duration::from_secs(20), || {
            read = legacy.call("task_output", json!({"task_id": task, "wait": true}));
            read.contains("exit code: 0")
        }),
        "{read}"
    );
    assert!(read.starts_with("from alice\n"), "{read}");
    assert!(alice.call("task_list", json!({})).contains(&task));

    assert_eq!(bob.call("task_list", json!({})), "(no background tasks)");
    assert_eq!(
        bob.call("task_output", json!({"task_id": task})),
        format!("Error: unknown task {task}")
    );
    let bob_legacy = LegacySession::open(Client::new(&host, &bob_token));
    assert_eq!(
        bob_legacy.call("task_list", json!({})),
        "(no background tasks)"
    );
    // Alice's session named with Bob's token: no such session, for a call and for its stream.
    let borrowed = LegacySession {
        client: Client::new(&host, &bob_token),
        id: legacy.id.clone(),
    };
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "task_output", "arguments": {"task_id": task}}});
    assert_eq!(borrowed.post(call).status, 404);
    let mut stream = std::net::TcpStream::connect(host.authority()).unwrap();
    let bearer = format!("Bearer {bob_token}");
    let listen = crate::http_wire::send(
        &mut stream,
        &host.authority(),
        "GET",
        "/mcp",
        &[
            ("Authorization", &bearer),
            ("Mcp-Session-Id", &legacy.id),
            ("Accept", "text/event-stream"),
        ],
        b"",
    );
    assert_eq!(listen.status, 404, "{listen:?}");

    // A completion notice rides once on the owner's next tool result, whichever connection.
    let quiet = alice.answer(
        "bash",
        json!({"command": "exit 4", "run_in_background": true}),
    );
    let quiet_task = started_id(&quiet);
    let quiet = quiet.text;
    // The task may settle before its start is answered: then the notice rides on that answer.
    let notices = |text: &str| {
        text.split("\n---\n")
            .skip(1)
            .filter(|n| n.contains(&quiet_task))
            .count()
    };
    let mut told = notices(&quiet);
    eventually(Duration::from_secs(20), || {
        told += notices(&legacy.call("task_list", json!({})));
        told > 0
    });
    assert_eq!(told, 1, "the notice came once");
    let again = alice.call("task_list", json!({}));
    assert!(!again.contains("\n---\n"), "no notice twice: {again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_principals_and_socket_sessions_never_see_each_others_tasks() {
    let dir = scratch("http-and-socket");
    let socket = dir.join("taskhost.sock");
    let listen = format!("unix:{}", socket.display());
    let host = HttpHost::start(&dir, &["--listen", &listen]);
    let alice = Client::new(&host, &host.token("alice"));
    let local = crate::mcp::socket_client(&socket, crate::mcp::Watcher::default()).await;
    let from_socket = crate::mcp::start(&local, "echo socket").await;
    let started = alice.answer(
        "bash",
        json!({"command": "echo http", "run_in_background": true}),
    );
    let from_http = started_id(&started);
    assert_ne!(from_socket, from_http);
    let http_list = alice.call("task_list", json!({}));
    assert!(
        http_list.contains(&from_http) && !http_list.contains(&from_socket),
        "{http_list}"
    );
    let socket_list = crate::mcp::call(&local, "task_list", json!({})).await;
    assert!(
        socket_list.contains(&from_socket) && !socket_list.contains(&from_http),
        "{socket_list}"
    );
    let refused = alice.call("task_output", json!({"task_id": from_socket}));
    assert!(
        refused.starts_with(&format!("Error: unknown task {from_socket}")),
        "{refused}"
    );
    local.cancel().await.unwrap();
}

#[test]
fn revoking_a_token_ends_its_owner_and_its_tasks() {
    let dir = scratch("http-revoke");
    let host = HttpHost::start(&dir, &[]);
    let alice = Client::new(&host, &host.token("alice"));
    let started = alice.answer(
        "bash",
        json!({"command": "echo $$; exec sleep 1000", "run_in_background": true}),
    );
    let task = started_id(&started);
    let pid = crate::http_wire::printed_pid(&alice, &task);
    assert!(alive(pid));
    revoke_in(&host.state, "alice");
    assert_eq!(alice.modern("tools/list", None, json!({})).status, 401);
    assert!(
        eventually(Duration::from_secs(20), || !alive(pid)),
        "the revoked owner's task was ended"
    );
}

#[test]
fn host_and_origin_headers_are_checked() {
    let dir = scratch("http-host-origin");
    let host = HttpHost::start(&dir, &[]);
    let alice = Client::new(&host, &host.token("alice"));
    let own = format!("http://{}", host.authority());
    let list = |extra: &[(&str, &str)]| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
        let mut headers = vec![
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ];
        headers.extend_from_slice(extra);
        alice.post(&headers, body.to_string().as_bytes()).status
    };
    assert_eq!(list(&[]), 200);
    assert_eq!(list(&[("Origin", &own)]), 200, "its own origin");
    assert_eq!(list(&[("Origin", "http://evil.example")]), 403);
    assert_eq!(list(&[("Host", "evil.example")]), 403, "a rebound name");
}

#[test]
fn plain_http_off_loopback_needs_tls_or_insecure_http() {
    let dir = scratch("http-insecure");
    let out = output_within(
        std::process::Command::new(binary())
            .args([
                "serve",
                "--no-watch",
                "--listen",
                "http://0.0.0.0:0",
                "--state",
            ])
            .arg(dir.join("state"))
            .env("XDG_RUNTIME_DIR", dir.path()),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--tls-cert") && stderr.contains("--insecure-http"),
        "{stderr}"
    );
    let host = HttpHost::start_on(&dir, "http://0.0.0.0:0", &["--no-watch", "--insecure-http"]);
    assert!(host.url.starts_with("http://0.0.0.0:"), "{}", host.url);
}

#[test]
fn malformed_requests_get_their_stated_errors_and_the_host_serves_on() {
    let dir = scratch("http-bad-input");
    let host = HttpHost::start(&dir, &[]);
    let alice = Client::new(&host, &host.token("alice"));
    let huge = vec![b' '; 5 * 1024 * 1024];
    assert_eq!(alice.post(&[], &huge).status, 413, "a body over the limit");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let modern = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/list"),
    ];
    let typed = |content_type: &'static str| {
        let mut headers = modern.to_vec();
        headers.push(("Content-Type", content_type));
        alice.post(&headers, body.as_bytes()).status
    };
    assert_eq!(typed("text/plain"), 415, "a wrong content type");
    let lying = alice.post(
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
        ],
        body.as_bytes(),
    );
    assert_eq!(
        lying.status, 400,
        "an Mcp-Method that is not the body's: {lying:?}"
    );
    let unversioned = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let answer = alice.post(&modern, unversioned.to_string().as_bytes());
    let error = answer
        .messages()
        .into_iter()
        .find_map(|m| m.get("error").cloned());
    assert_eq!(answer.status, 400, "{answer:?}");
    assert_eq!(
        error.map(|e| e["code"].clone()),
        Some(json!(-32602)),
        "a 2026-07-28 request without its _meta version is refused as invalid params"
    );
    assert_eq!(
        alice.post(&modern, body.as_bytes()).status,
        200,
        "serving on"
    );
}

#[test]
fn idle_connections_do_not_keep_another_principal_waiting() {
    let dir = scratch("http-flood");
    let host = HttpHost::start(&dir, &[]);
    let bob = Client::new(&host, &host.token("bob"));
    let flood: Vec<std::net::TcpStream> = (0..500)
        .filter_map(|_| std::net::TcpStream::connect(host.authority()).ok())
        .collect();
    assert!(flood.len() >= 400, "opened {} connections", flood.len());
    let answered = bob.call("bash", json!({"command": "echo served"}));
    assert!(answered.starts_with("served\n"), "{answered}");
    drop(flood);
}

#[test]
fn tls_serves_mcp_with_a_self_signed_certificate() {
    use std::sync::Arc;
    let dir = scratch("http-tls");
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    let host = HttpHost::start_on(
        &dir,
        "http://localhost:0",
        &[
            "--no-watch",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    assert!(host.url.starts_with("https://localhost:"), "{}", host.url);
    let token = host.token("alice");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(made.cert.der().clone()).unwrap();
    #[allow(
        deprecated,
        reason = "the test client matches the host's ring provider"
    )]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let port = host.authority().rsplit(':').next().unwrap().to_owned();
    let connect = || {
        let server = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = rustls::ClientConnection::new(Arc::new(config.clone()), server).unwrap();
        let tcp = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        rustls::StreamOwned::new(tls, tcp)
    };
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "bash", "arguments": {"command": "echo over tls"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let bearer = format!("Bearer {token}");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "bash"),
    ];
    let authority = format!("localhost:{port}");
    let answer = crate::http_wire::send(
        &mut connect(),
        &authority,
        "POST",
        "/mcp",
        &headers,
        body.as_bytes(),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.tool_text().starts_with("over tls\n"), "{answer:?}");
    // Plain HTTP to the TLS port gets no MCP answer.
    let plain = Client {
        authority: format!("127.0.0.1:{port}"),
        token: Some(token),
    };
    assert_ne!(plain.modern("tools/list", None, json!({})).status, 200);
}

/// Proves, with the official Python SDK over HTTP and one token: a 2026-07-28 client and a legacy
/// one are one owner (the task one starts the other reads), each hears of a plugin rebuild on its
/// era's stream, completion notices arrive (on a tool result; as a logging message), and a client
/// without the token is refused (see `tests/python/http_eras.py`).
#[test]
fn the_python_sdk_over_http_shares_one_principals_tasks_in_both_eras() {
    let Some(python) = crate::clients::sdk_python() else {
        eprintln!(
            "the_python_sdk_over_http_shares_one_principals_tasks_in_both_eras: skipped: no Python venv with the mcp SDK at target/mcp-venv"
        );
        return;
    };
    let dir = scratch("http-python");
    crate::clients::copy_tasks_and_bash(&dir);
    let (tasks, bash) = (
        dir.join("libtaskhost_plugin_tasks.so"),
        dir.join("libtaskhost_plugin_bash.so"),
    );
    let host = HttpHost::start_on(
        &dir,
        "http://127.0.0.1:0",
        &[
            "--plugin",
            tasks.to_str().unwrap(),
            "--plugin",
            bash.to_str().unwrap(),
        ],
    );
    let token = host.token("python");
    let script = crate::clients::python_script("http_eras.py");
    let out = output_within(
        std::process::Command::new(python)
            .arg(script)
            .arg(&host.url)
            .arg(&token)
            .arg(&bash),
        Duration::from_secs(120),
    );
    let (stdout, stderr) = crate::clients::succeeded(&out);
    for scenario in ["ok modern\n", "ok legacy\n", "ok refused"] {
        assert!(stdout.contains(scenario), "{stdout}{stderr}");
    }
}

/// Proves: a principal over HTTP reads the host's plugin table (`taskhost://plugins`) with each
/// plugin's name and generations but not the file it was loaded from: the host's paths are its
/// local users' alone.
#[test]
fn a_principal_over_http_reads_the_plugin_table_without_the_hosts_paths() {
    let dir = scratch("http-plugin-paths");
    let host = HttpHost::start(&dir, &[]);
    let alice = Client::new(&host, &host.token("alice"));
    let answer = alice.modern(
        "resources/read",
        Some("taskhost://plugins"),
        json!({"uri": "taskhost://plugins"}),
    );
    let message = answer
        .messages()
        .into_iter()
        .find(|m| m.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer: {}", answer.body));
    let text = message["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {message}"));
    let table: serde_json::Value = serde_json::from_str(text).expect("the table is JSON");
    let plugins = table["plugins"].as_array().expect("a list of plugins");
    assert!(
        plugins.iter().any(|p| p["name"] == "bash"),
        "the table names the plugins: {table}"
    );
    assert!(
        plugins.iter().all(|p| p.get("path").is_none()),
        "a path reached a principal over HTTP: {table}"
    );
    assert!(!text.contains(".so"), "{text}");
}
