use std::path::PathBuf;

use super::*;

fn table(write: Option<&str>) -> PolicyTable {
    PolicyTable {
        write: write.map(|w| vec![PathBuf::from(w)]),
        ..PolicyTable::default()
    }
}

fn host() -> HostPaths {
    HostPaths::new([
        PathBuf::from("/srv/state"),
        PathBuf::from("/run/th/host-1"),
        PathBuf::from("/run/th/host-1/spill"),
    ])
}

#[test]
fn every_policy_hides_the_hosts_own_paths() {
    assert_eq!(
        host().hidden,
        [PathBuf::from("/run/th/host-1"), PathBuf::from("/srv/state")]
    );
    let mut t = table(Some("/work"));
    t.hide = vec![PathBuf::from("/home/me/.ssh")];
    let resolved = resolve(&BTreeMap::from([("agents".to_owned(), t)]), &host()).unwrap();
    let b = &resolved["agents"];
    assert_eq!(b.policy, "agents");
    assert!(b.filesystem);
    assert_eq!(b.write, [PathBuf::from("/work")]);
    for path in ["/home/me/.ssh", "/srv/state", "/run/th/host-1"] {
        assert!(
            b.hide.contains(&PathBuf::from(path)),
            "{path}: {:?}",
            b.hide
        );
    }
}

#[test]
fn a_policy_without_write_leaves_the_filesystem_writable_and_network_on() {
    let resolved = resolve(&BTreeMap::from([("open".to_owned(), table(None))]), &host()).unwrap();
    let b = &resolved["open"];
    assert!(!b.filesystem);
    assert!(b.network);
    assert_eq!(
        (b.memory_max, b.pids_max, b.cpu_max_millis),
        (None, None, None)
    );
}

#[test]
fn an_unknown_run_as_user_or_a_host_not_run_by_root_is_refused() {
    let mut t = table(None);
    t.run_as = Some("no-such-user-taskhost".into());
    let refused = resolve(&BTreeMap::from([("p".to_owned(), t)]), &host()).unwrap_err();
    let text = refused.to_string();
    assert!(
        text.contains("no user named no-such-user-taskhost") || text.contains("run by root"),
        "{text}"
    );
}

#[test]
fn owners_without_a_policy_of_their_own_get_the_default_or_nothing() {
    let none = Policies::new(BTreeMap::new(), None);
    assert_eq!(none.bounds_of("session-1").unwrap(), None);
    let resolved = resolve(
        &BTreeMap::from([
            (DEFAULT_POLICY.to_owned(), table(Some("/work"))),
            ("other".to_owned(), table(None)),
        ]),
        &host(),
    )
    .unwrap();
    let with_default = Policies::new(resolved, None);
    for owner in ["session-1", "", "principal-4"] {
        let bounds = with_default.bounds_of(owner).unwrap().expect("bounded");
        assert_eq!(bounds.policy, DEFAULT_POLICY, "{owner}");
    }
}

#[test]
fn a_principal_bound_to_a_policy_the_config_lacks_is_refused() {
    let policies = Policies::new(BTreeMap::new(), None);
    policies
        .principals
        .lock()
        .insert("principal-2".into(), Some("gone".into()));
    let refused = policies.bounds_of("principal-2").unwrap_err();
    assert!(
        refused.contains("policy 'gone'") && refused.contains("refused"),
        "{refused}"
    );
}
