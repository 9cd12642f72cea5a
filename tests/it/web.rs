//! The `web` surface plugin on a real host's HTTP listener: the bearer gate, the headers that keep
//! task output inert, the cross-site refusal, the fence between principals. What a person sees in
//! a real browser is in [`crate::web_browser`]; the sign-in and what it never leaks, in
//! [`crate::web_sign_in`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::fixtures::{built, eventually, plugin_copy, rebuilt_bytes, scratch};
use crate::http_wire::{Client, HttpHost, Response, send};

/// A host on `http://127.0.0.1:0` serving `bash`, `tasks` and `web`, the last two copies in `dir`
/// (so a test can rebuild them), watching its plugins; `extra` arguments after.
pub(crate) fn web_host(dir: &Path, extra: &[&str]) -> (HttpHost, PathBuf, PathBuf) {
    web_host_on(dir, "http://127.0.0.1:0", extra)
}

/// As [`web_host`], listening on `listen`.
pub(crate) fn web_host_on(
    dir: &Path,
    listen: &str,
    extra: &[&str],
) -> (HttpHost, PathBuf, PathBuf) {
    let web = plugin_copy("taskhost_plugin_web", dir, "taskhost_plugin_web");
    let bash = plugin_copy("taskhost_plugin_bash", dir, "taskhost_plugin_bash");
    let tasks = built("taskhost_plugin_tasks");
    let plugins = [
        "--plugin",
        bash.to_str().unwrap(),
        "--plugin",
        tasks.to_str().unwrap(),
        "--plugin",
        web.to_str().unwrap(),
    ];
    let host = HttpHost::start_on(dir, listen, &[&plugins[..], extra].concat());
    (host, web, bash)
}

/// The listener's origin (`http://127.0.0.1:PORT`).
pub(crate) fn origin(host: &HttpHost) -> String {
    format!("http://{}", host.authority())
}

/// One request to the host's plugin routes.
pub(crate) fn get(host: &HttpHost, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let authority = host.authority();
    let mut stream = std::net::TcpStream::connect(&authority).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    send(&mut stream, &authority, method, path, headers, b"")
}

/// Starts `command` in the background over MCP as `client`'s principal; the task id.
pub(crate) fn start(client: &Client, command: &str) -> String {
    start_with(
        client,
        json!({"command": command, "run_in_background": true}),
    )
}

/// Starts a background `bash` call with `arguments` as `client`'s principal; the task id.
pub(crate) fn start_with(client: &Client, arguments: serde_json::Value) -> String {
    let text = client.call("bash", arguments);
    text.split_whitespace()
        .find(|w| w.starts_with("bash-"))
        .unwrap_or_else(|| panic!("no task id in {text}"))
        .trim_end_matches(['.', ','])
        .to_owned()
}

/// Replaces `plugin` by a rebuild of `stem` (a new build id), as `cargo build` and a copy would.
pub(crate) fn rebuild(plugin: &Path, stem: &str, n: u32) {
    let next = plugin.with_extension("next");
    std::fs::write(&next, rebuilt_bytes(stem, n)).unwrap();
    crate::fixtures::set_mode(&next, 0o755);
    std::fs::rename(&next, plugin).unwrap();
}

#[test]
fn the_views_own_files_need_no_token_and_everything_else_a_bearer_header() {
    let dir = scratch("web-login");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let token = host.token("alice");

    let shown = get(&host, "GET", "/", &[("Accept", "text/html")]);
    assert_eq!(shown.status, 200, "{shown:?}");
    assert!(
        shown.body.contains("<script src=\"/app.js\"") && shown.body.contains("id=\"sign-in\""),
        "the page, with its sign-in form: {}",
        shown.body
    );
    let policy = &shown.headers["content-security-policy"];
    assert!(
        policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"),
        "{policy}"
    );
    assert_eq!(shown.headers["x-content-type-options"], "nosniff");
    assert!(
        get(&host, "GET", "/app.js", &[])
            .body
            .contains("Authorization: 'Bearer '"),
        "the script is embedded in the plugin and sends the token itself"
    );

    for path in ["/api/tasks", "/api/status", "/api/events"] {
        let refused = get(&host, "GET", path, &[]);
        assert_eq!(refused.status, 401, "{path}: {refused:?}");
    }
    let forged = get(
        &host,
        "GET",
        "/api/tasks",
        &[("Authorization", "Bearer taskhost_00")],
    );
    assert_eq!(forged.status, 401, "{forged:?}");
    let cookie = format!("taskhost_token={token}");
    let by_cookie = get(&host, "GET", "/api/tasks", &[("Cookie", &cookie)]);
    assert_eq!(
        by_cookie.status, 401,
        "a cookie names nobody: {by_cookie:?}"
    );
    let bearer = format!("Bearer {token}");
    let listed = get(&host, "GET", "/api/tasks", &[("Authorization", &bearer)]);
    assert_eq!(listed.status, 200, "{listed:?}");
}

#[test]
fn a_kill_from_another_sites_page_is_refused_and_one_from_the_view_kills() {
    let dir = scratch("web-csrf");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let token = host.token("alice");
    let client = Client::new(&host, &token);
    let id = start(&client, "sleep 300");
    let bearer = format!("Bearer {token}");
    let path = format!("/api/tasks/{id}/kill");

    let forged = get(
        &host,
        "POST",
        &path,
        &[
            ("Authorization", &bearer),
            ("Origin", "http://attacker.example"),
        ],
    );
    assert_eq!(forged.status, 403, "{forged:?}");
    let listed = get(&host, "GET", "/api/tasks", &[("Authorization", &bearer)]);
    assert!(
        listed.body.contains("\"status\":\"running\""),
        "still running: {}",
        listed.body
    );

    // The page as its person reached it: `localhost` here, not the address the host printed.
    let port = host.authority().rsplit(':').next().unwrap().to_owned();
    let (reached, own) = (
        format!("localhost:{port}"),
        format!("http://localhost:{port}"),
    );
    let foreign_host = get(
        &host,
        "POST",
        &path,
        &[
            ("Host", &reached),
            ("Authorization", &bearer),
            ("Origin", &origin(&host)),
        ],
    );
    assert_eq!(
        foreign_host.status, 403,
        "an Origin that is not the Host's: {foreign_host:?}"
    );
    let killed = get(
        &host,
        "POST",
        &path,
        &[
            ("Host", &reached),
            ("Authorization", &bearer),
            ("Origin", &own),
        ],
    );
    assert_eq!(killed.status, 200, "{killed:?}");
    assert!(
        eventually(Duration::from_secs(20), || {
            get(&host, "GET", "/api/tasks", &[("Authorization", &bearer)])
                .body
                .contains("\"status\":\"killed\"")
        }),
        "the task is killed"
    );
}

#[test]
fn another_principals_tasks_and_output_are_never_served() {
    let dir = scratch("web-fence");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let (alice, bob) = (host.token("alice"), host.token("bob"));
    let id = start(&Client::new(&host, &alice), "echo alice-secret; sleep 300");
    let as_bob = format!("Bearer {bob}");
    let listed = get(&host, "GET", "/api/tasks", &[("Authorization", &as_bob)]);
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(!listed.body.contains(&id), "{}", listed.body);
    let tail = get(
        &host,
        "GET",
        &format!("/api/tasks/{id}/tail"),
        &[("Authorization", &as_bob)],
    );
    assert_eq!(tail.status, 404, "{tail:?}");
    assert!(!tail.body.contains("alice-secret"), "{}", tail.body);
    let kill = get(
        &host,
        "POST",
        &format!("/api/tasks/{id}/kill"),
        &[("Authorization", &as_bob)],
    );
    assert_eq!(kill.status, 404, "{kill:?}");
}

#[test]
fn a_terminal_tasks_tail_is_served_as_the_terminal_draws_it() {
    let dir = scratch("web-tty");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let token = host.token("alice");
    let client = Client::new(&host, &token);
    let id = start_with(
        &client,
        json!({"command": "printf 'plain \\033[31mred\\033[0m text\\nabc\\rX\\n'", "tty": true, "run_in_background": true}),
    );
    let bearer = format!("Bearer {token}");
    let mut tail = String::new();
    assert!(
        eventually(Duration::from_secs(20), || {
            tail = get(
                &host,
                "GET",
                &format!("/api/tasks/{id}/tail"),
                &[("Authorization", &bearer)],
            )
            .body;
            tail.contains("Xbc")
        }),
        "{tail}"
    );
    assert!(tail.contains("plain red text"), "{tail}");
    assert!(
        !tail.contains("\\u001b"),
        "no escape sequence reaches the page: {tail}"
    );
}

#[test]
fn the_view_lists_an_owners_records_past_those_a_new_host_brings_back() {
    let dir = scratch("web-records");
    let config = dir.join("records.toml");
    std::fs::write(
        &config,
        "[host]\nhandover_grace_ms = 0\n[tasks]\nmax_concurrent_tasks_per_owner = 1000\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let (first, _, _) = web_host(&dir, &["--no-watch", "--config", &config]);
    let token = first.token("alice");
    let client = Client::new(&first, &token);
    let n = taskhost::host::RESTORED_TASKS_MAX + 5;
    let ids: Vec<String> = (0..n)
        .map(|i| start(&client, &format!("echo record {i}")))
        .collect();
    for id in &ids {
        let read = client.call("task_output", json!({"task_id": id, "wait": true}));
        assert!(read.contains("exit code: 0"), "{read}");
    }
    drop(first);

    let (host, _, _) = web_host(&dir, &["--no-watch", "--config", &config]);
    let bearer = format!("Bearer {token}");
    let listed = get(&host, "GET", "/api/tasks", &[("Authorization", &bearer)]);
    let tasks: serde_json::Value = serde_json::from_str(&listed.body).unwrap();
    let shown: Vec<&str> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    for id in &ids {
        assert!(shown.contains(&id.as_str()), "{id} is listed: {shown:?}");
    }
    let oldest = &ids[0];
    let tail = get(
        &host,
        "GET",
        &format!("/api/tasks/{oldest}/tail"),
        &[("Authorization", &bearer)],
    );
    assert!(
        tail.body.contains("record 0"),
        "an earlier host's task's kept output: {tail:?}"
    );
}

/// Opens the page's event stream as `bearer`; the connection and the status it was answered with.
pub(crate) fn open_stream(host: &HttpHost, bearer: &str) -> (std::net::TcpStream, u16) {
    crate::http_wire::open_event_stream(host, "/api/events", &[("Authorization", bearer)])
}

#[test]
fn a_principal_may_hold_sixteen_event_streams_at_once() {
    let dir = scratch("web-streams");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let bearer = format!("Bearer {}", host.token("alice"));
    let open: Vec<_> = (0..16).map(|_| open_stream(&host, &bearer)).collect();
    assert!(
        open.iter().all(|(_, code)| *code == 200),
        "{:?}",
        open.iter().map(|o| o.1).collect::<Vec<_>>()
    );
    let (_, refused) = open_stream(&host, &bearer);
    assert_eq!(refused, 429);
    let bob = format!("Bearer {}", host.token("bob"));
    assert_eq!(
        open_stream(&host, &bob).1,
        200,
        "another principal's streams are its own"
    );
    drop(open);
    assert!(
        eventually(Duration::from_secs(20), || open_stream(&host, &bearer).1
            == 200),
        "closed streams give their places back"
    );
}

#[test]
fn a_token_made_with_all_owners_oversees_every_owners_tasks_in_the_view_and_only_there() {
    let dir = scratch("web-all-owners");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let operator = crate::http_wire::token_made(&host.state, "operator", &["--all-owners"]);
    let alices = start(&Client::new(&host, &alice), "echo alice-line; sleep 300");
    let operators = start(&Client::new(&host, &operator), "sleep 300");

    let as_operator = format!("Bearer {operator}");
    let listed = get(
        &host,
        "GET",
        "/api/tasks",
        &[("Authorization", &as_operator)],
    );
    assert!(
        listed.body.contains(&format!("\"{alices}\"")),
        "{}",
        listed.body
    );
    let tail_path = format!("/api/tasks/{alices}/tail");
    assert!(
        eventually(Duration::from_secs(20), || {
            get(&host, "GET", &tail_path, &[("Authorization", &as_operator)])
                .body
                .contains("alice-line")
        }),
        "the operator reads alice's output in the view"
    );
    let mcp_list = Client::new(&host, &operator).call("task_list", json!({}));
    assert!(
        !mcp_list.contains(&alices),
        "over MCP the operator is fenced as ever: {mcp_list}"
    );
    let as_alice = format!("Bearer {alice}");
    let alices_view = get(&host, "GET", "/api/tasks", &[("Authorization", &as_alice)]);
    assert!(
        !alices_view.body.contains(&format!("\"{operators}\"")),
        "{}",
        alices_view.body
    );

    let killed = get(
        &host,
        "POST",
        &format!("/api/tasks/{alices}/kill"),
        &[("Authorization", &as_operator)],
    );
    assert_eq!(killed.status, 200, "{killed:?}");
    assert!(
        eventually(Duration::from_secs(20), || {
            Client::new(&host, &alice)
                .call("task_output", json!({"task_id": alices}))
                .contains("killed")
        }),
        "alice's task was killed from the operator's view"
    );
}

#[test]
fn revoking_a_token_ends_its_open_event_streams() {
    use std::io::Read;
    let dir = scratch("web-revoke");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let bearer = format!("Bearer {}", host.token("alice"));
    let (mut stream, code) = open_stream(&host, &bearer);
    assert_eq!(code, 200);
    crate::http_wire::revoke_in(&host.state, "alice");
    let mut buf = [0u8; 4096];
    let ended = eventually(Duration::from_secs(20), || {
        matches!(stream.read(&mut buf), Ok(0))
    });
    assert!(ended, "the stream ends once its token names nobody");
}
