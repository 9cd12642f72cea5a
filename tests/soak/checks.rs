//! What the end of a run must show, each check a function that panics with what it found.

use std::collections::HashSet;
use std::time::Duration;

use crate::fixtures::{Fixture, eventually, mapped_generations};
use crate::host_state::{children, children_of};
use crate::ledger::Ledger;
use crate::workload::session_name;
use crate::{PLUGINS, SESSIONS};

/// Every task settled exactly once, and only tasks that were started settled. Returns how many
/// tasks the run started.
pub fn settled_exactly_once(ledger: &Ledger) -> usize {
    let settled = ledger.settled.lock().unwrap();
    let started: HashSet<String> = ledger
        .started
        .iter()
        .flat_map(|s| s.lock().unwrap().clone())
        .collect();
    let once: Vec<_> = settled.iter().filter(|(_, v)| v.len() != 1).collect();
    assert!(
        once.is_empty(),
        "settled other than once: {:?}",
        once.iter().map(|(id, v)| (id, v.len())).collect::<Vec<_>>()
    );
    let unsettled: Vec<_> = started
        .difference(&settled.keys().cloned().collect())
        .cloned()
        .collect();
    assert!(unsettled.is_empty(), "never settled: {unsettled:?}");
    assert_eq!(
        settled.len(),
        started.len(),
        "a task settled that nobody started"
    );
    started.len()
}

/// A notice is owed exactly for an owned task that nothing had reported when it settled: each
/// session holds exactly those of its own tasks, each once. Returns how many notices the sessions
/// held.
pub fn notices_exact(f: &Fixture, ledger: &Ledger) -> usize {
    let settled = ledger.settled.lock().unwrap();
    let mut notices_total = 0;
    for s in 0..SESSIONS {
        let name = session_name(s);
        let mut got: Vec<String> = f
            .host
            .sessions()
            .take_notices(&name)
            .iter()
            .map(|n| {
                n.strip_prefix("background task ")
                    .and_then(|r| r.split_whitespace().next())
                    .unwrap_or(n)
                    .to_owned()
            })
            .collect();
        got.sort();
        let mut owed: Vec<String> = settled
            .iter()
            .filter(|(_, v)| v[0].session.as_deref() == Some(name.as_str()) && !v[0].reported)
            .map(|(id, _)| id.clone())
            .collect();
        owed.sort();
        notices_total += got.len();
        let mut seen = HashSet::new();
        let twice: Vec<_> = got.iter().filter(|id| !seen.insert(*id)).collect();
        let owed_set: HashSet<_> = owed.iter().collect();
        let lost: Vec<_> = owed.iter().filter(|id| !seen.contains(id)).collect();
        let unowed: Vec<_> = seen.iter().filter(|id| !owed_set.contains(*id)).collect();
        assert!(
            twice.is_empty() && lost.is_empty() && unowed.is_empty(),
            "notices of {name}: twice {twice:?}, lost {lost:?}, not owed {unowed:?}"
        );
    }
    notices_total
}

/// Every process reaped and every retired generation unmapped.
pub fn nothing_left_behind(f: &Fixture) {
    // Every process reaped: none live, none adopted, no child of the host left (zombies included)
    // but the keeper, and no child of the keeper (which spawned the piped ones).
    let keeper = f.host.processes().keeper_pid().map(|p| p.to_string());
    let children = || {
        let mut c = children();
        c.retain(|p| Some(p) != keeper.as_ref());
        c.extend(keeper.iter().flat_map(|k| children_of(k)));
        c
    };
    assert!(
        eventually(Duration::from_secs(10), || f.host.processes().live() == 0
            && f.host.processes().adopted() == 0
            && children().is_empty()),
        "left behind: live {}, adopted {}, children {:?}",
        f.host.processes().live(),
        f.host.processes().adopted(),
        children()
    );

    // One generation of each plugin mapped once the retired ones drained.
    for (unique, _) in PLUGINS {
        assert!(
            eventually(Duration::from_secs(10), || mapped_generations(unique).len()
                == 1),
            "{unique}: {:?} mapped",
            mapped_generations(unique)
        );
    }
}
