//! What the `web` view tells of each task besides its output, in a real headless Chromium: its
//! owner by name (a principal by its token's name, a session by its client's), the plugins' live
//! tasks (a producer's tasks the host runs included), the selected task's details (where its
//! process runs, its bounds, its place in the queue, its output's size, who killed it), and the
//! system's dark scheme followed.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::fixtures::{eventually, scratch};
use crate::http_wire::Client;
use crate::web::{get, origin, start, web_host};
use crate::web_browser::{SHOWN_WITHIN, shows};
use taskhost_tests::webdriver::Browser;

/// A client on the host's socket that called itself `name` in its `initialize`.
struct SocketClient {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
}

impl SocketClient {
    fn connect(socket: &Path, name: &str) -> Self {
        let stream = UnixStream::connect(socket).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        let mut client = Self {
            stream,
            reader,
            next_id: 0,
        };
        client.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": name, "version": "1"}}),
        );
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        writeln!(client.stream, "{initialized}").unwrap();
        client
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stream, "{message}").unwrap();
        loop {
            let mut line = String::new();
            assert!(self.reader.read_line(&mut line).unwrap() > 0, "closed");
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == id {
                return answer;
            }
        }
    }

    /// Starts `command` in the background; the task id.
    fn start(&mut self, command: &str) -> String {
        let answer = self.request(
            "tools/call",
            json!({"name": "bash", "arguments": {"command": command, "run_in_background": true}}),
        );
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("");
        text.split_whitespace()
            .find(|w| w.starts_with("bash-"))
            .unwrap_or_else(|| panic!("no task id in {answer}"))
            .trim_end_matches(['.', ','])
            .to_owned()
    }
}

/// The text and title of task `id`'s owner cell, once the page shows one with a title.
fn owner_cell(browser: &Browser, id: &str) -> Option<Value> {
    let script = "const c = document.querySelector('tr[data-id=\"' + arguments[0] + '\"] td.owner'); return c && c.title ? [c.textContent, c.title] : null;";
    browser.wait_for(SHOWN_WITHIN, script, &[json!(id)])
}

#[test]
fn in_a_browser_owners_show_by_name_a_principal_by_its_token_and_a_session_by_its_client() {
    let dir = scratch("view-names");
    let socket = dir.join("s.sock");
    let listen = format!("unix:{}", socket.display());
    let (host, _, _) = web_host(&dir, &["--no-watch", "--listen", &listen]);
    let alice = host.token("alice");
    let operator = crate::http_wire::token_made(&host.state, "operator", &["--all-owners"]);
    let alices = start(&Client::new(&host, &alice), "sleep 300");
    let mut agent = SocketClient::connect(&socket, "claude-code");
    let agents = agent.start("sleep 300");
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={operator}", origin(&host)));
    assert!(shows(&browser, &alices, "running"));
    assert!(shows(&browser, &agents, "running"));

    let principal = owner_cell(&browser, &alices).unwrap_or_default();
    assert_eq!(principal[0], "alice", "{principal}");
    assert!(
        principal[1]
            .as_str()
            .is_some_and(|id| id.starts_with("principal-"))
    );
    let session = owner_cell(&browser, &agents).unwrap_or_default();
    let id = session[1].as_str().unwrap_or_default();
    let number = id
        .strip_prefix("session-")
        .unwrap_or_else(|| panic!("{session}"));
    assert_eq!(session[0], format!("claude-code #{number}"), "{session}");

    browser.run(
        "const s = document.getElementById('f-owner'); s.value = [...s.options].find((o) => o.textContent === 'alice').value; s.dispatchEvent(new Event('input'));",
        &[],
    );
    let only = "const v = [...document.querySelectorAll('#tasks tbody tr')].map((r) => r.dataset.id); return v.length === 1 ? v : null;";
    assert_eq!(
        browser.wait_for(SHOWN_WITHIN, only, &[]),
        Some(json!([alices])),
        "the owner filter picks alice's by her name"
    );
}

#[test]
fn the_plugins_table_counts_the_bash_tasks_the_host_runs_as_live() {
    let dir = scratch("view-live-count");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let operator = crate::http_wire::token_made(&host.state, "operator", &["--all-owners"]);
    let client = Client::new(&host, &operator);
    start(&client, "sleep 300");
    start(&client, "sleep 300");
    start(&client, "true");
    let bearer = format!("Bearer {operator}");
    let live_of_bash = || {
        let status = get(&host, "GET", "/api/status", &[("Authorization", &bearer)]).body;
        let status: Value = serde_json::from_str(&status).unwrap_or_default();
        let plugins = status["plugins"].as_array().cloned().unwrap_or_default();
        let bash = plugins.iter().find(|p| p["name"] == "bash").cloned();
        bash.map(|b| b["live_tasks"].clone())
    };
    assert!(
        eventually(SHOWN_WITHIN, || live_of_bash() == Some(json!(2))),
        "two bash tasks run: {:?}",
        live_of_bash()
    );
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={operator}", origin(&host)));
    let script = "const c = document.querySelector('#plugins tr[data-plugin=bash] td.live'); return c && c.textContent === '2' ? c.textContent : null;";
    assert!(
        browser.wait_for(SHOWN_WITHIN, script, &[]).is_some(),
        "the plugins table says so"
    );
}

/// The details list's text for `key` once the script `ready` says it is as wanted.
fn detail_once(browser: &Browser, key: &str, ready: &str) -> Option<String> {
    let script = format!(
        "const d = document.querySelector('#task-details dd[data-detail=\"' + arguments[0] + '\"]'); const t = d ? d.textContent : null; return t !== null && ({ready}) ? t : null;"
    );
    browser
        .wait_for(SHOWN_WITHIN, &script, &[json!(key)])
        .and_then(|v| v.as_str().map(str::to_owned))
}

#[test]
fn in_a_browser_the_selected_tasks_details_show_where_it_runs_its_bounds_output_and_killer() {
    let dir = scratch("view-details");
    let config = dir.join("one.toml");
    std::fs::write(&config, "[tasks]\nmax_running = 1\n").unwrap();
    let config = config.display().to_string();
    let (host, _, _) = web_host(&dir, &["--no-watch", "--config", &config]);
    let alice = host.token("alice");
    let client = Client::new(&host, &alice);
    let workdir = dir.join("work");
    std::fs::create_dir(&workdir).unwrap();
    let running = crate::web::start_with(
        &client,
        json!({"command": "seq 1 2000; echo $$ > pid; sleep 300", "run_in_background": true,
               "workdir": workdir.display().to_string()}),
    );
    let queued = start(&client, "echo later");
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    assert!(shows(&browser, &running, "running"));
    assert_eq!(browser.text("#detail-id"), Some(running.clone()));

    let pid = detail_once(&browser, "pid", "/^[0-9]+$/.test(t)").unwrap_or_default();
    let written = workdir.join("pid");
    assert!(eventually(SHOWN_WITHIN, || written.exists()));
    let shell = std::fs::read_to_string(&written).unwrap_or_default();
    assert_eq!(pid, shell.trim(), "the task's own process");
    let cwd = detail_once(&browser, "cwd", "true");
    assert_eq!(cwd, Some(workdir.display().to_string()));
    let bounds = detail_once(&browser, "bounds", "true");
    assert_eq!(bounds.as_deref(), Some("none (unbounded)"));
    let output = detail_once(&browser, "output", "/KiB$/.test(t)");
    assert!(output.is_some(), "seq's 8.7 KiB are kept");
    let owner = detail_once(&browser, "owner", "true").unwrap_or_default();
    assert!(owner.starts_with("alice (principal-"), "{owner}");

    browser.run(
        "document.querySelector('tr[data-id=\"' + arguments[0] + '\"]').click();",
        &[json!(queued)],
    );
    let place = detail_once(&browser, "queue", "true");
    assert_eq!(
        place.as_deref(),
        Some("next to run"),
        "queued behind the running one"
    );

    browser.run(
        "document.querySelector('tr[data-id=\"' + arguments[0] + '\"]').click();",
        &[json!(running)],
    );
    let bearer = format!("Bearer {alice}");
    let killed = get(
        &host,
        "POST",
        &format!("/api/tasks/{running}/kill"),
        &[("Authorization", &bearer)],
    );
    assert_eq!(killed.status, 200, "{killed:?}");
    let by = detail_once(&browser, "killed-by", "true");
    assert_eq!(
        by.as_deref(),
        Some("alice: killed from the web view by alice")
    );
}

#[test]
fn in_a_browser_a_bounded_tasks_bounds_show_and_a_memory_limit_reads_as_its_end() {
    let dir = scratch("view-bounded");
    let config = dir.join("bounded.toml");
    std::fs::write(
        &config,
        "[policy.default]\nnetwork = \"none\"\nmemory_max = \"64M\"\npids_max = 64\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let (host, _, _) = web_host(&dir, &["--no-watch", "--config", &config]);
    let alice = host.token("alice");
    let client = Client::new(&host, &alice);
    let over = start(&client, "head -c 1G /dev/zero | tail > /dev/null");
    let running = start(&client, "sleep 300");
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    assert!(shows(&browser, &running, "running"));
    assert_eq!(browser.text("#detail-id"), Some(running.clone()));
    let bounds = detail_once(&browser, "bounds", "t !== 'none (unbounded)'");
    assert_eq!(
        bounds.as_deref(),
        Some("policy default · filesystem unbounded · no network · memory 64 MiB · 64 processes")
    );
    assert!(
        shows(&browser, &over, "killed"),
        "ended at its memory limit"
    );
    let exit = browser.text(&format!("tr[data-id=\"{over}\"] td.exit"));
    assert_eq!(exit.as_deref(), Some("memory limit 64 MiB"));
}

#[test]
fn in_a_browser_the_view_and_its_sign_in_follow_a_dark_system_scheme() {
    let dir = scratch("view-dark");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let id = start(&Client::new(&host, &alice), "sleep 300");
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.prefer_scheme("dark");
    browser.open(&format!("{}/", origin(&host)));
    let colours = "const f = document.getElementById('sign-in'); return f.hidden ? null : [getComputedStyle(document.body).backgroundColor, getComputedStyle(f).backgroundColor];";
    assert_eq!(
        browser.wait_for(SHOWN_WITHIN, colours, &[]),
        Some(json!(["rgb(15, 19, 25)", "rgb(22, 27, 34)"])),
        "the sign-in form is a dark panel on a dark page"
    );
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    assert!(shows(&browser, &id, "running"));
    let swatch =
        "return getComputedStyle(document.querySelector('.swatch.running')).backgroundColor;";
    assert_eq!(browser.run(swatch, &[]), json!("rgb(110, 168, 255)"));
    browser.prefer_scheme("light");
    let light = "const c = getComputedStyle(document.body).backgroundColor; return c === 'rgb(246, 247, 249)' ? c : null;";
    assert!(
        browser.wait_for(SHOWN_WITHIN, light, &[]).is_some(),
        "and back to light"
    );
}
