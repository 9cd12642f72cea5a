//! What the view sends, and keeps, when it is not the host that answers or not its person who
//! chose the link: a server that took the host's port while it was down is sent no token (the page
//! asks the host to prove it holds the token's record first), and a link another site opens in the
//! person's browser neither replaces the token kept without the person's click nor wipes it.

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::fixtures::{eventually, scratch};
use crate::web::{get, origin, web_host, web_host_on};
use crate::web_sign_in::{LIVE, Recorder, SHOWN_WITHIN};
use taskhost_tests::webdriver::Browser;

/// The token the page keeps.
const KEPT: &str = "return localStorage.getItem('taskhost_token');";

/// The page's connection line.
const CONNECTION: &str = "return document.getElementById('connection').textContent;";

#[test]
fn in_a_browser_a_server_in_the_hosts_place_is_sent_no_token_and_the_host_back_is_trusted() {
    let dir = scratch("web-impostor");
    let (mut host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let port: u16 = host
        .authority()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let Some(browser) = Browser::start() else {
        return;
    };
    browser.open(&format!("{}/#token={alice}", origin(&host)));
    assert!(
        browser.wait_for(SHOWN_WITHIN, LIVE, &[]).is_some(),
        "signed in"
    );

    host.log_to_its_end();
    let impostor = Recorder::start(port);
    let came_back = eventually(SHOWN_WITHIN, || impostor.heads.lock().unwrap().len() >= 3);
    let heads = impostor.heads.lock().unwrap().clone();
    assert!(came_back, "the page came back to the port: {heads:?}");
    let secret = alice.rsplit('_').next().unwrap();
    for head in &heads {
        assert!(
            !head.contains(secret),
            "the impostor received the token:\n{head}"
        );
    }
    assert!(
        heads
            .iter()
            .any(|h| h.contains("/.well-known/taskhost-view-proof?")),
        "the page asked for the proof: {heads:?}"
    );
    let refused = "return document.getElementById('connection').textContent === 'this server is not the taskhost that issued your token';";
    assert!(
        browser.wait_for(SHOWN_WITHIN, refused, &[]).is_some(),
        "the page says so: {}",
        browser.run(CONNECTION, &[])
    );

    drop(impostor);
    let _back = web_host_on(&dir, &format!("http://127.0.0.1:{port}"), &["--no-watch"]);
    assert!(
        browser.wait_for(SHOWN_WITHIN, LIVE, &[]).is_some(),
        "live again without signing in: {}",
        browser.run(CONNECTION, &[])
    );
    assert_eq!(browser.run(KEPT, &[]), json!(alice));
}

#[test]
fn in_a_browser_a_link_of_another_principal_replaces_the_kept_token_only_once_the_person_says() {
    let dir = scratch("web-other-link");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let (alice, bob) = (host.token("alice"), host.token("bob"));
    let Some(browser) = Browser::start() else {
        return;
    };
    let page = format!("{}/", origin(&host));
    browser.open(&format!("{page}#token={alice}"));
    assert!(
        browser.wait_for(SHOWN_WITHIN, LIVE, &[]).is_some(),
        "signed in"
    );

    browser.open(&format!("{page}#token={bob}"));
    let asked = "const s = document.getElementById('switch'); return s && !s.hidden && document.getElementById('switch-to').textContent;";
    let question = browser.wait_for(SHOWN_WITHIN, asked, &[]);
    assert_eq!(
        browser.run(KEPT, &[]),
        json!(alice),
        "the token kept until the person says"
    );
    assert_eq!(question, Some(json!("Sign in as bob instead of alice?")));
    assert_eq!(browser.url(), page, "the link's token left the address bar");
    assert_eq!(browser.run(CONNECTION, &[]), json!("live"));

    browser.click("#switch-to");
    let switched = "return localStorage.getItem('taskhost_token') === arguments[0] && document.getElementById('connection').textContent === 'live';";
    assert!(
        browser
            .wait_for(SHOWN_WITHIN, switched, &[json!(bob)])
            .is_some(),
        "bob's once the person said so"
    );
}

#[test]
fn in_a_browser_a_link_with_an_unknown_or_malformed_token_leaves_the_kept_one_working() {
    let dir = scratch("web-bad-link");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let revoked = host.token("bob");
    crate::http_wire::revoke_in(&host.state, "bob");
    let Some(browser) = Browser::start() else {
        return;
    };
    let page = format!("{}/", origin(&host));
    browser.open(&format!("{page}#token={alice}"));
    assert!(
        browser.wait_for(SHOWN_WITHIN, LIVE, &[]).is_some(),
        "signed in"
    );

    let unknown = format!("taskhost_{}", "0".repeat(64));
    for given in [unknown.as_str(), "%0Ax", "taskhost_%0A", revoked.as_str()] {
        browser.run(
            "const n = document.getElementById('notice'); if (n) n.textContent = '';",
            &[],
        );
        browser.open(&format!("{page}#token={given}"));
        let settled = "const n = document.getElementById('notice'); return (n && n.textContent.includes('ignored')) || localStorage.getItem('taskhost_token') !== arguments[0];";
        browser.wait_for(SHOWN_WITHIN, settled, &[json!(alice)]);
        assert_eq!(
            browser.run(KEPT, &[]),
            json!(alice),
            "{given}: the token kept"
        );
        assert!(
            browser.wait_for(SHOWN_WITHIN, LIVE, &[]).is_some(),
            "{given}: the page works: {}",
            browser.run(CONNECTION, &[])
        );
        assert_eq!(browser.url(), page, "{given}: the address bar");
    }
}

/// Lower-case hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// HMAC-SHA256 (RFC 2104) with a 32-byte key, as the page computes it with WebCrypto.
fn hmac(key: &[u8], message: &str) -> String {
    let mut block = [0u8; 64];
    block[..key.len()].copy_from_slice(key);
    let inner = Sha256::new()
        .chain_update(block.map(|b| b ^ 0x36))
        .chain_update(message)
        .finalize();
    hex(&Sha256::new()
        .chain_update(block.map(|b| b ^ 0x5c))
        .chain_update(inner)
        .finalize())
}

#[test]
fn the_host_proves_it_holds_a_tokens_record_and_answers_any_other_principal_alike() {
    let dir = scratch("web-proof");
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let alice = host.token("alice");
    let bob = host.token("bob");
    crate::http_wire::revoke_in(&host.state, "bob");
    let authority = host.authority();
    let nonce = "5a".repeat(16);
    let key = |token: &str| Sha256::digest(token.trim_start_matches("taskhost_")).to_vec();
    let principal = |token: &str| hex(&Sha256::digest(key(token)));
    let ask = |id: &str, nonce: &str, host_name: &str| {
        let path = format!("/.well-known/taskhost-view-proof?principal={id}&nonce={nonce}");
        get(&host, "GET", &path, &[("Host", host_name)])
    };

    let live = ask(&principal(&alice), &nonce, &authority);
    assert_eq!(live.status, 200, "{live:?}");
    let message = format!("taskhost-view-proof\n{nonce}\n{authority}");
    assert_eq!(live.body.trim(), hmac(&key(&alice), &message));
    let gone = ask(&principal(&bob), &nonce, &authority);
    assert_eq!(gone.status, 410, "{gone:?}");
    let message = format!("taskhost-view-revoked\n{nonce}\n{authority}");
    assert_eq!(gone.body.trim(), hmac(&key(&bob), &message));

    let unknown = ask(&"0".repeat(64), &nonce, &authority);
    assert_eq!(unknown.status, 404, "{unknown:?}");
    for (id, nonce) in [
        (principal(&alice), "5a".to_owned()),
        (principal(&alice), "not-hex!".repeat(5)),
        ("zz".to_owned(), nonce.clone()),
        (String::new(), nonce.clone()),
    ] {
        let other = ask(&id, &nonce, &authority);
        assert_eq!(
            (other.status, &other.body),
            (unknown.status, &unknown.body),
            "{id} {nonce}"
        );
    }
    let port = authority.rsplit(':').next().unwrap();
    let rebound = ask(
        &principal(&alice),
        &nonce,
        &format!("rebound.example:{port}"),
    );
    assert_eq!(rebound.status, 403, "{rebound:?}");
}
