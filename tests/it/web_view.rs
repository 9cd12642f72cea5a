//! What the `web` view shows a person in a real headless Chromium ([`crate::web_browser`] has the
//! basics): output in its colours, markup sent through escape sequences as text, the newest
//! running task's output shown and followed at first, a non-zero exit read as a failure, the list
//! and the output side by side on a wide window and stacked on a narrow one; and the whole kept
//! output as a download. With `TASKHOST_VIEW_SCREENSHOTS=DIR`, the layout test writes
//! `DIR/view-wide.png` and `DIR/view-narrow.png`.

use serde_json::json;

use crate::fixtures::{eventually, scratch};
use crate::http_wire::Client;
use crate::web::{get, origin, start, web_host};
use crate::web_browser::{SHOWN_WITHIN, shows};
use taskhost_tests::webdriver::Browser;

/// The text of the output pane once it includes `text` (within [`SHOWN_WITHIN`]).
fn tail_shows(browser: &Browser, text: &str) -> bool {
    let script = "return document.getElementById('tail').textContent.includes(arguments[0]);";
    browser
        .wait_for(SHOWN_WITHIN, script, &[json!(text)])
        .is_some()
}

#[test]
fn in_a_browser_a_coloured_line_shows_its_colour_and_markup_sent_through_escapes_stays_text() {
    let dir = scratch("view-colour");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let command = r"printf '\033[1;31mred words\033[0m plain\n\033[32m<img src=x onerror=alert(1)>\033[0m\n\033]8;;javascript:alert(2)\033\\<b>link</b>\033]8;;\033\\\n\033[38;2;0;0;238m&amp;<script>alert(3)</script>\033[m\n'; sleep 300";
    let id = start(&Client::new(&host, &alice), command);
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    assert!(shows(&browser, &id, "running"));
    assert!(tail_shows(&browser, "red words"), "the only task is shown");
    let red = browser.run(
        "const s = [...document.querySelectorAll('#tail span')].find((e) => e.textContent === 'red words');
         return s ? [s.className, getComputedStyle(s).color, getComputedStyle(s).fontWeight] : null;",
        &[],
    );
    assert_eq!(red, json!(["c-f1 c-bold", "rgb(240, 82, 79)", "700"]));
    let tail = browser.text("#tail").unwrap();
    assert_eq!(
        tail,
        "red words plain\n<img src=x onerror=alert(1)>\n<b>link</b>\n&amp;<script>alert(3)</script>\n",
        "markup inside colours is text; the link's escapes are gone, its text stays as written"
    );
    assert_eq!(browser.prompt(), None, "no script of the task's ran");
    let made = browser.run(
        "return [document.scripts.length, document.images.length, document.querySelectorAll('#tail *:not(span)').length];",
        &[],
    );
    assert_eq!(made, json!([1, 0, 0]), "only spans were made from output");
}

#[test]
fn in_a_browser_the_newest_running_task_is_shown_at_first_and_its_output_followed() {
    let dir = scratch("view-follow");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let client = Client::new(&host, &alice);
    let _older = start(&client, "sleep 300");
    let running = start(
        &client,
        "for i in $(seq 1 3000); do echo line $i; sleep 0.02; done; sleep 300",
    );
    let settled = start(&client, "echo done");
    let bearer = format!("Bearer {alice}");
    assert!(eventually(SHOWN_WITHIN, || {
        let listed = get(&host, "GET", "/api/tasks", &[("Authorization", &bearer)]).body;
        listed.contains(&format!(r#""id":"{settled}""#))
            && listed.contains(r#""status":"completed""#)
    }));
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    assert!(shows(&browser, &settled, "completed"));
    assert!(tail_shows(&browser, "line 200\n"), "its output shows");
    assert_eq!(
        browser.text("#detail-id"),
        Some(running.clone()),
        "the newest running task, not the newer settled one"
    );
    let selected = browser.text("#tasks tr.selected td.id");
    assert_eq!(selected, Some(running.clone()), "its row is marked");
    let at_end = "const p = document.getElementById('tail'); return p.scrollHeight > p.clientHeight && p.scrollTop + p.clientHeight >= p.scrollHeight - 4 && document.getElementById('follow').checked;";
    assert!(
        browser.wait_for(SHOWN_WITHIN, at_end, &[]).is_some(),
        "the pane shows the end as it grows"
    );

    browser.run(
        "const p = document.getElementById('tail'); p.scrollTop = 0; p.dispatchEvent(new Event('scroll'));",
        &[],
    );
    let stopped = "return !document.getElementById('follow').checked;";
    assert!(browser.wait_for(SHOWN_WITHIN, stopped, &[]).is_some());
    let shown_last =
        "return document.getElementById('tail').textContent.trim().split('\\n').pop();";
    let before = browser.run(shown_last, &[]);
    assert!(
        browser
            .wait_for(
                SHOWN_WITHIN,
                &format!("const l = (() => {{ {shown_last} }})(); return l !== arguments[0];"),
                &[before]
            )
            .is_some(),
        "the output still grows"
    );
    let top = browser.run("return document.getElementById('tail').scrollTop;", &[]);
    assert_eq!(top, json!(0), "where the person scrolled to, it stays");
}

#[test]
fn in_a_browser_a_non_zero_exit_reads_as_failed_and_is_under_the_failed_filter() {
    let dir = scratch("view-failed");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let client = Client::new(&host, &alice);
    let failing = start(&client, "echo 'tests failed' >&2; exit 3");
    let passing = start(&client, "echo ok");
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    assert!(
        shows(&browser, &failing, "failed"),
        "exit 3 reads as failed"
    );
    assert!(
        shows(&browser, &passing, "completed"),
        "exit 0 as completed"
    );
    let exit = browser.text(&format!("tr[data-id=\"{failing}\"] td.exit"));
    assert!(exit.is_some_and(|e| e.contains("exit code: 3")));
    browser.run(
        "const s = document.getElementById('f-status'); s.value = 'failed'; s.dispatchEvent(new Event('input'));",
        &[],
    );
    let only = "const v = [...document.querySelectorAll('#tasks tbody tr')].map((r) => r.dataset.id); return v.length === 1 ? v : null;";
    assert_eq!(
        browser.wait_for(SHOWN_WITHIN, only, &[]),
        Some(json!([failing]))
    );
    let counted = browser.run(
        "return document.querySelector('#f-status option[value=failed]').textContent;",
        &[],
    );
    assert_eq!(counted, json!("failed (1)"), "the filter counts it");
}

/// The output pane's box and the task list's, as `[pane left, pane top, list right, list bottom]`.
const BOXES: &str = "const d = document.getElementById('detail').getBoundingClientRect(); const l = document.querySelector('main .list').getBoundingClientRect(); return [d.left, d.top, l.right, l.bottom];";

#[test]
fn in_a_browser_the_list_and_the_output_are_side_by_side_when_wide_and_stacked_when_narrow() {
    let dir = scratch("view-layout");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let client = Client::new(&host, &alice);
    start(
        &client,
        "echo 'running 214 tests' >&2; echo 'FAILED: 2 of 214' >&2; exit 3",
    );
    start(&client, "printf 'fine\\n'; exit 0");
    let build = start(
        &client,
        r"for i in $(seq 1 400); do printf '\033[1;32m   Compiling\033[0m crate-%s v0.1.%s\n' $i $i; [ $((i % 7)) = 0 ] && printf '\033[1;33mwarning\033[0m\033[1m: unused variable: `x`\033[0m\n'; [ $((i % 23)) = 0 ] && printf '\033[1;31merror[E0308]\033[0m\033[1m: mismatched types\033[0m\n'; sleep 0.25; done",
    );
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.resize(1600, 900);
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    assert!(shows(&browser, &build, "running"));
    assert!(
        tail_shows(&browser, "crate-30 "),
        "the build's output shows"
    );
    let wide = browser.run(BOXES, &[]);
    let n = |v: &serde_json::Value, i: usize| v[i].as_f64().unwrap_or(f64::NAN);
    assert!(
        n(&wide, 0) >= n(&wide, 2) && n(&wide, 1) < n(&wide, 3),
        "side by side: {wide}"
    );
    let screenshots = std::env::var("TASKHOST_VIEW_SCREENSHOTS").ok();
    if let Some(dir) = &screenshots {
        std::fs::write(format!("{dir}/view-wide.png"), browser.screenshot()).unwrap();
    }
    browser.resize(560, 1100);
    let stacked = format!("const b = (() => {{ {BOXES} }})(); return b[1] >= b[3] ? b : null;");
    assert!(
        browser.wait_for(SHOWN_WITHIN, &stacked, &[]).is_some(),
        "stacked: {}",
        browser.run(BOXES, &[])
    );
    if let Some(dir) = &screenshots {
        browser.run("document.getElementById('detail').scrollIntoView();", &[]);
        std::fs::write(format!("{dir}/view-narrow.png"), browser.screenshot()).unwrap();
    }
}

#[test]
fn the_whole_kept_output_is_a_plain_download_past_the_tail() {
    let dir = scratch("view-download");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let id = start(
        &Client::new(&host, &alice),
        r"for i in $(seq 1 20000); do printf '\033[31mline %s\033[0m\n' $i; done",
    );
    let bearer = format!("Bearer {alice}");
    let path = format!("/api/tasks/{id}/output");
    let mut last = String::new();
    assert!(
        eventually(SHOWN_WITHIN, || {
            last = get(&host, "GET", &path, &[("Authorization", &bearer)]).body;
            last.contains("line 20000\n")
        }),
        "{}",
        &last[last.len().saturating_sub(200)..]
    );
    assert!(
        last.starts_with("line 1\nline 2\n"),
        "all of it, from its start"
    );
    assert!(!last.contains('\x1b'), "as plain text");
    let refused = get(&host, "GET", &path, &[]);
    assert_eq!(refused.status, 401, "not without the token");
}
