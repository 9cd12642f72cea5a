//! The view's sign-in in a real headless Chromium: the bearer never leaves the page's own origin.
//! A cookie would go to every server of the same host whatever its port, so a server another user
//! runs on a loopback port would read it; the page keeps its token in `localStorage` (scoped to
//! scheme, host and port) and sends it itself. What it sends a server in the host's place, and what
//! a link of another site can do to the token kept, is in [`crate::web_sign_in_links`].

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::fixtures::scratch;
use crate::http_wire::{Client, HttpHost};
use crate::web::{get, origin, start, web_host};
use taskhost_tests::webdriver::Browser;

/// How long anything the page shows may take to show (generous: a loaded machine).
pub(crate) const SHOWN_WITHIN: std::time::Duration = std::time::Duration::from_secs(20);

/// The page is signed in and its event stream open.
pub(crate) const LIVE: &str =
    "return document.getElementById('connection').textContent === 'live';";

/// A plain HTTP server on a loopback port (`port`, or one of its own for 0) that answers every
/// request with a small page and keeps every request head it received; stopped when dropped.
pub(crate) struct Recorder {
    pub(crate) port: u16,
    pub(crate) heads: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    pub(crate) fn start(port: u16) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (kept, stopped) = (heads.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                // A connection of its own each: the browser opens some it sends nothing on.
                let kept = kept.clone();
                std::thread::spawn(move || answer(stream, &kept));
            }
        });
        Self {
            port,
            heads,
            stop,
            thread: Some(thread),
        }
    }
}

/// Keeps the request head `stream` sends and answers it with a small page.
fn answer(mut stream: std::net::TcpStream, kept: &Mutex<Vec<String>>) {
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let mut head = String::new();
    let mut reader = BufReader::new(&stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    if head.is_empty() {
        return;
    }
    kept.lock().unwrap().push(head);
    let page = "<!doctype html><title>another server</title><p>hello</p>";
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn in_a_browser_a_server_on_another_loopback_port_receives_nothing_that_signs_in() {
    let dir = scratch("web-other-port");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    assert!(
        browser.wait_for(SHOWN_WITHIN, LIVE, &[]).is_some(),
        "signed in"
    );

    let other = Recorder::start(0);
    browser.open(&format!("http://127.0.0.1:{}/", other.port));
    assert_eq!(
        browser.run("return document.title;", &[]),
        json!("another server")
    );
    let heads = other.heads.lock().unwrap().clone();
    assert!(!heads.is_empty(), "the other server saw the visit");
    let secret = alice.rsplit('_').next().unwrap();
    for head in &heads {
        assert!(
            !head.contains(secret),
            "the other port's server received the token:\n{head}"
        );
    }
}

#[test]
fn in_a_browser_the_sign_in_link_leaves_neither_the_address_bar_nor_the_tabs_back_and_forward() {
    let dir = scratch("web-fragment");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let Some(browser) = Browser::start() else {
        return;
    };
    let page = format!("{}/", origin(&host));
    browser.open(&format!("{page}#token={alice}"));
    assert!(
        browser.wait_for(SHOWN_WITHIN, LIVE, &[]).is_some(),
        "signed in"
    );
    assert_eq!(browser.url(), page, "the address bar");
    browser.back();
    let before = browser.url();
    assert!(!before.contains(&alice), "the entry before: {before}");
    browser.forward();
    assert_eq!(browser.url(), page, "the page's own entry");
    assert!(
        browser.wait_for(SHOWN_WITHIN, LIVE, &[]).is_some(),
        "signed in from localStorage when it loads again"
    );
    let kept = browser.run("return localStorage.getItem('taskhost_token');", &[]);
    assert_eq!(kept, json!(alice));
    let cookies = browser.run("return document.cookie;", &[]);
    assert_eq!(cookies, json!(""), "no cookie");
}

#[test]
fn in_a_browser_the_sign_in_form_keeps_the_token_and_a_revoked_one_asks_again() {
    let dir = scratch("web-form");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/", origin(&host)));
    let form = "return [document.title, document.getElementById('sign-in').hidden, document.getElementById('view').hidden];";
    assert_eq!(
        browser.run(form, &[]),
        json!(["taskhost: sign in", false, true]),
        "no token, no view"
    );
    browser.run(
        "document.getElementById('token').value = arguments[0]; document.getElementById('sign-in').requestSubmit();",
        &[json!(alice)],
    );
    assert!(
        browser.wait_for(SHOWN_WITHIN, LIVE, &[]).is_some(),
        "signed in"
    );
    assert_eq!(
        browser.url(),
        format!("{}/", origin(&host)),
        "nothing in the URL"
    );
    let unnamed = "return document.getElementById('token').name === '' && document.getElementById('sign-in').method === 'get';";
    assert_eq!(
        browser.run(unnamed, &[]),
        json!(true),
        "the field has no name: a form sent without the script would carry no token in its URL"
    );
    crate::http_wire::revoke_in(&host.state, "alice");
    let asked = "return document.getElementById('sign-in').hidden === false && document.getElementById('view').hidden && localStorage.getItem('taskhost_token') === null;";
    assert!(
        browser.wait_for(SHOWN_WITHIN, asked, &[]).is_some(),
        "a token that names nobody is dropped and the form is back"
    );
}

#[test]
fn a_token_in_the_query_signs_nobody_in_and_sets_no_cookie() {
    let dir = scratch("web-query");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let page = get(
        &host,
        "GET",
        &format!("/?token={alice}"),
        &[("Accept", "text/html")],
    );
    assert_eq!(page.status, 200, "the page, as to anyone: {page:?}");
    let api = get(&host, "GET", &format!("/api/tasks?token={alice}"), &[]);
    assert_eq!(api.status, 401, "{api:?}");
    for answer in [&page, &api] {
        assert!(!answer.headers.contains_key("set-cookie"), "{answer:?}");
        assert!(!answer.headers.contains_key("location"), "{answer:?}");
    }
}

#[test]
fn no_address_redirects_elsewhere_nor_sets_a_cookie() {
    let dir = scratch("web-redirect");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    for path in ["//evil.com/", "/\\evil.com/", "/%2F%2Fevil.com/"] {
        for query in [String::new(), format!("?token={alice}")] {
            let target = format!("{path}{query}");
            let answer = get(&host, "GET", &target, &[("Accept", "text/html")]);
            assert!(!(300..400).contains(&answer.status), "{target}: {answer:?}");
            assert!(
                !answer.headers.contains_key("location"),
                "{target}: {answer:?}"
            );
            assert!(
                !answer.headers.contains_key("set-cookie"),
                "{target}: {answer:?}"
            );
        }
    }
}

#[test]
fn a_request_naming_another_host_is_refused() {
    let dir = scratch("web-host");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let bearer = format!("Bearer {}", host.token("alice"));
    let port: u16 = host
        .authority()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let rebound = format!("rebound.example:{port}");
    let other_port = format!("127.0.0.1:{}", port.wrapping_add(1));
    for name in [rebound.as_str(), other_port.as_str()] {
        for path in ["/", "/api/tasks"] {
            let answer = get(
                &host,
                "GET",
                path,
                &[("Host", name), ("Authorization", &bearer)],
            );
            assert_eq!(answer.status, 403, "{name} {path}: {answer:?}");
        }
    }
    // `/mcp` checks the same names, at any port (MCP clients come through local proxies).
    let mcp = get(
        &host,
        "POST",
        "/mcp",
        &[("Host", &rebound), ("Authorization", &bearer)],
    );
    assert_eq!(mcp.status, 403, "/mcp for {rebound}: {mcp:?}");
    for name in [format!("localhost:{port}"), format!("[::1]:{port}")] {
        let answer = get(
            &host,
            "GET",
            "/api/tasks",
            &[("Host", &name), ("Authorization", &bearer)],
        );
        assert_eq!(answer.status, 200, "{name}: {answer:?}");
    }
}

/// The text of `bearer`'s event stream at `/api/events` until `until` holds of it.
fn events_until(host: &HttpHost, bearer: &str, mut until: impl FnMut(&str) -> bool) -> String {
    let authority = host.authority();
    let mut stream = std::net::TcpStream::connect(&authority).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET /api/events HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\nAuthorization: {bearer}\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut text = String::new();
    while !until(&text) {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the stream ended: {text}"
        );
        text.push_str(&line);
    }
    text
}

#[test]
fn the_hosts_plugin_paths_keeper_and_health_are_an_overseers_alone() {
    let dir = scratch("web-status");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let operator = crate::http_wire::token_made(&host.state, "operator", &["--all-owners"]);
    let (as_alice, as_operator) = (format!("Bearer {alice}"), format!("Bearer {operator}"));

    let refused = get(&host, "GET", "/api/status", &[("Authorization", &as_alice)]);
    assert_eq!(refused.status, 403, "{refused:?}");
    let shown = get(
        &host,
        "GET",
        "/api/status",
        &[("Authorization", &as_operator)],
    );
    assert_eq!(shown.status, 200, "{shown:?}");
    for part in ["keeper_pid", "taskhost_plugin_web"] {
        assert!(shown.body.contains(part), "{part}: {}", shown.body);
        assert!(!refused.body.contains(part), "{part}: {}", refused.body);
    }

    let overseen = events_until(&host, &as_operator, |t| t.contains("keeper_pid"));
    assert!(overseen.contains("event: host"), "{overseen}");
    // Two steps of alice's stream: the first (which always carries the status to an overseer)
    // and the one a task of hers wakes.
    let id = std::cell::OnceCell::new();
    let watched = events_until(&host, &as_alice, |t| {
        if t.contains("event: tasks") && id.get().is_none() {
            let _ = id.set(start(&Client::new(&host, &alice), "sleep 300"));
        }
        id.get().is_some_and(|id: &String| t.contains(id.as_str()))
    });
    for part in ["event: host", "keeper_pid", "taskhost_plugin_web"] {
        assert!(!watched.contains(part), "{part}: {watched}");
    }
}

#[test]
fn in_a_browser_a_page_holds_one_event_stream_whatever_it_watches() {
    let dir = scratch("web-one-stream");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let client = Client::new(&host, &alice);
    let ids = [start(&client, "sleep 300"), start(&client, "sleep 300")];
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    let listed = "return document.querySelectorAll('#tasks tbody tr').length === 2;";
    assert!(
        browser.wait_for(SHOWN_WITHIN, listed, &[]).is_some(),
        "both tasks show"
    );
    for id in ids.iter().chain(&ids) {
        browser.click(&format!("tr[data-id=\"{id}\"]"));
    }
    let watching = "return document.getElementById('connection').textContent === 'live' && document.getElementById('detail-id').textContent === arguments[0];";
    assert!(
        browser
            .wait_for(SHOWN_WITHIN, watching, &[json!(ids[1])])
            .is_some(),
        "the page follows the task clicked last"
    );
    let bearer = format!("Bearer {alice}");
    let max = 16;
    let mut held = Vec::new();
    let room = crate::fixtures::eventually(SHOWN_WITHIN, || {
        held.clear();
        (1..max).all(|_| {
            let (stream, code) = crate::web::open_stream(&host, &bearer);
            held.push(stream);
            code == 200
        })
    });
    assert!(
        room,
        "the page's streams it left were closed: room for {} more",
        max - 1
    );
    assert_eq!(
        crate::web::open_stream(&host, &bearer).1,
        429,
        "the page holds one"
    );
}
