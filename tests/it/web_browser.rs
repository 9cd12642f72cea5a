//! The `web` surface in a real headless Chromium ([`crate::webdriver`]): what a person sees. Tasks
//! appear and their output grows, text that looks like HTML stays text, the kill button kills, a
//! lost task from an earlier host is shown, another principal's task never is, and the page goes on
//! across reloads of `web` and `bash`. Each signs in with the link `/#token=TOKEN`.

use std::time::Duration;

use serde_json::json;

use crate::fixtures::scratch;
use crate::http_wire::Client;
use crate::web::{origin, rebuild, start, web_host};
use taskhost_tests::webdriver::Browser;

/// How long anything the page shows may take to show (generous: a loaded machine).
pub(crate) const SHOWN_WITHIN: Duration = Duration::from_secs(20);

/// True once the page shows task `id` with `status` (within [`SHOWN_WITHIN`]).
pub(crate) fn shows(browser: &Browser, id: &str, status: &str) -> bool {
    let script = "const r = document.querySelector('tr[data-id=\"' + arguments[0] + '\"] td.status'); return r !== null && r.textContent === arguments[1];";
    browser
        .wait_for(SHOWN_WITHIN, script, &[json!(id), json!(status)])
        .is_some()
}

/// The status the page shows for task `id`, once it shows the task.
const STATUS_OF: &str = "const r = document.querySelector('tr[data-id=\"' + arguments[0] + '\"] td.status'); return r ? r.textContent : null;";

#[test]
fn in_a_browser_a_task_appears_its_output_grows_and_html_in_it_stays_text() {
    let dir = scratch("web-live");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let (alice, bob) = (host.token("alice"), host.token("bob"));
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/", origin(&host)));
    let refused = browser.run(
        "return [document.title, document.getElementById('sign-in').hidden, document.getElementById('view').hidden];",
        &[],
    );
    assert_eq!(
        refused,
        json!(["taskhost: sign in", false, true]),
        "no token, no view"
    );
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    let live = "return document.getElementById('connection').textContent === 'live';";
    assert!(
        browser.wait_for(SHOWN_WITHIN, live, &[]).is_some(),
        "the event stream is open"
    );

    let bobs = start(&Client::new(&host, &bob), "echo bob; sleep 300");
    let hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>&amp;\x1b[31m";
    let command = format!(
        "printf '%s\\n' '{hostile}'; for i in $(seq 1 400); do echo line $i; sleep 0.1; done"
    );
    let id = start(&Client::new(&host, &alice), &command);
    assert!(shows(&browser, &id, "running"), "the task appears");
    let shown = browser
        .text(&format!("tr[data-id=\"{id}\"] td.command"))
        .unwrap();
    assert!(
        shown.contains("<script>alert(1)</script>"),
        "the command as text: {shown}"
    );

    browser.click(&format!("tr[data-id=\"{id}\"]"));
    let has_line = "return document.getElementById('tail').textContent.includes(arguments[0]);";
    assert!(
        browser
            .wait_for(SHOWN_WITHIN, has_line, &[json!("line 3\n")])
            .is_some(),
        "output shows"
    );
    assert!(
        browser
            .wait_for(SHOWN_WITHIN, has_line, &[json!("line 30\n")])
            .is_some(),
        "and grows"
    );
    let tail = browser.text("#tail").unwrap();
    assert!(
        tail.contains("<script>alert(1)</script><img src=x onerror=alert(2)>&amp;"),
        "{tail}"
    );

    assert_eq!(browser.prompt(), None, "no script of the task's ran");
    let scripts = browser.run(
        "return document.scripts.length + document.images.length;",
        &[],
    );
    assert_eq!(
        scripts,
        json!(1),
        "only the page's own script, no image made from output"
    );
    let other = start(&Client::new(&host, &alice), "sleep 300 # the-other-one");
    assert!(shows(&browser, &other, "running"));
    let visible =
        "return [...document.querySelectorAll('#tasks tbody tr')].map((r) => r.dataset.id);";
    browser.run(
        "const f = document.getElementById('f-search'); f.value = arguments[0]; f.dispatchEvent(new Event('input'));",
        &[json!("the-other")],
    );
    let only = browser.wait_for(
        SHOWN_WITHIN,
        &format!("const v = (() => {{ {visible} }})(); return v.length === 1 ? v : null;"),
        &[],
    );
    assert_eq!(
        only,
        Some(json!([other])),
        "the search keeps the matching command"
    );
    browser.run(
        "document.getElementById('f-search').value = ''; const s = document.getElementById('f-status'); s.value = 'running'; s.dispatchEvent(new Event('input'));",
        &[],
    );
    assert!(
        browser
            .wait_for(
                SHOWN_WITHIN,
                &format!("const v = (() => {{ {visible} }})(); return v.length === 2;"),
                &[]
            )
            .is_some(),
        "both running tasks under the status filter"
    );
    assert_eq!(
        browser.run(STATUS_OF, &[json!(bobs)]),
        json!(null),
        "bob's task is not alice's to see"
    );
}

#[test]
fn in_a_browser_the_kill_button_asks_then_ends_the_process_and_the_row_says_killed() {
    let dir = scratch("web-kill");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let client = Client::new(&host, &alice);
    let id = start(&client, "echo $$; exec sleep 300");
    let pid = crate::http_wire::printed_pid(&client, &id);
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    assert!(shows(&browser, &id, "running"), "id shows running");

    browser.click(&format!("tr[data-id=\"{id}\"] button.kill"));
    let asked = browser.prompt().unwrap_or_default();
    assert!(
        asked.contains(&id),
        "the kill is confirmed first: {asked:?}"
    );
    browser.accept();
    let killed = "const r = document.querySelector('tr[data-id=\"' + arguments[0] + '\"] td.status'); return r && r.textContent === 'killed';";
    assert!(
        browser
            .wait_for(SHOWN_WITHIN, killed, &[json!(id)])
            .is_some(),
        "the row says killed"
    );
    assert!(
        crate::fixtures::eventually(SHOWN_WITHIN, || nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            None
        )
        .is_err()),
        "the process {pid} is gone"
    );
}

#[test]
fn in_a_browser_a_task_lost_by_an_earlier_host_is_shown_beside_running_and_failed_ones() {
    let dir = scratch("web-lost");
    let config = crate::handover::grace_config(&dir, 0);
    let (mut first, _, _) = web_host(&dir, &["--no-watch", "--config", &config]);
    let alice = first.token("alice");
    let before = Client::new(&first, &alice);
    let lost = start(&before, "echo working on it; sleep 300");
    // The line is in the kept file once the first host has read it.
    assert!(crate::fixtures::eventually(SHOWN_WITHIN, || {
        before
            .call("task_output", json!({"task_id": lost}))
            .contains("working on it")
    }));
    let _ = first.child.kill();
    let _ = first.child.wait();
    drop(first);

    let (host, _, _) = web_host(&dir, &["--no-watch", "--config", &config]);
    let client = Client::new(&host, &alice);
    let failed = start(
        &client,
        "echo 'cannot find tests/fixtures.json' >&2; exit 3",
    );
    let running = start(
        &client,
        "cargo_build() { for i in $(seq 1 600); do echo \"   Compiling crate-$i v0.1.0\"; sleep 0.5; done; }; cargo_build",
    );
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    assert!(shows(&browser, &lost, "lost"), "lost shows lost");
    assert!(
        shows(&browser, &failed, "failed"),
        "a non-zero exit shows failed"
    );
    assert!(
        shows(&browser, &running, "running"),
        "running shows running"
    );
    let exit = browser
        .text(&format!("tr[data-id=\"{failed}\"] td.exit"))
        .unwrap_or_default();
    assert!(exit.contains("exit code: 3"), "{exit}");
    browser.click(&format!("tr[data-id=\"{lost}\"]"));
    let kept = "return document.getElementById('tail').textContent.includes('working on it');";
    assert!(
        browser.wait_for(SHOWN_WITHIN, kept, &[]).is_some(),
        "the lost task's kept output"
    );
    if let Ok(path) = std::env::var("TASKHOST_WEB_SCREENSHOT") {
        browser.click(&format!("tr[data-id=\"{running}\"]"));
        let compiling =
            "return document.getElementById('tail').textContent.includes('Compiling crate-4 ');";
        assert!(browser.wait_for(SHOWN_WITHIN, compiling, &[]).is_some());
        std::fs::write(path, browser.screenshot()).unwrap();
    }
}

#[test]
fn in_a_browser_the_page_goes_on_across_reloads_of_web_and_bash() {
    let dir = scratch("web-reload");
    let (host, web, bash) = web_host(&dir, &[]);
    let alice = host.token("alice");
    let client = Client::new(&host, &alice);
    // An overseer: its page shows the plugins' generations.
    let operator = crate::http_wire::token_made(&host.state, "operator", &["--all-owners"]);
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={operator}", origin(&host)));
    let before = start(&client, "sleep 300");
    assert!(shows(&browser, &before, "running"), "before shows running");

    let generation = "const r = document.querySelector('tr[data-plugin=\"' + arguments[0] + '\"] td.generations'); return r && r.textContent.includes(arguments[1]);";
    rebuild(&web, "taskhost_plugin_web", 1);
    assert!(
        browser
            .wait_for(SHOWN_WITHIN, generation, &[json!("web"), json!("2 active")])
            .is_some(),
        "web reloaded"
    );
    let after_web = start(&client, "sleep 300");
    assert!(
        shows(&browser, &after_web, "running"),
        "after_web shows running"
    );

    rebuild(&bash, "taskhost_plugin_bash", 1);
    assert!(
        browser
            .wait_for(
                SHOWN_WITHIN,
                generation,
                &[json!("bash"), json!("2 active")]
            )
            .is_some(),
        "bash reloaded"
    );
    let after_bash = start(&client, "sleep 300");
    assert!(
        shows(&browser, &after_bash, "running"),
        "after_bash shows running"
    );
    assert_eq!(
        browser.run(STATUS_OF, &[json!(before)]),
        json!("running"),
        "the first task lives on"
    );
}
