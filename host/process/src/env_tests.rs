//! The environment policy's unit tests.

use super::*;

fn vars(pairs: &[(&str, &str)]) -> Vec<Var> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

fn names(env: &[Var]) -> Vec<String> {
    env.iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_default_policy_removes_every_kind_of_credential_and_keeps_the_rest() {
    let parent = vars(&[
        ("MY_API_TOKEN", "t"),
        ("db_password", "p"),
        ("GITHUB_PAT", "ghp"),
        ("DATABASE_URL", "postgres://u:pass@h/db"),
        ("PASSWD", "x"),
        ("DB_PASS", "x"),
        ("CREDENTIALS_JSON", "{}"),
        ("SSH_AUTH_SOCK", "/run/agent"),
        ("SESSION_COOKIE", "c"),
        ("GPG_PRIVATE", "k"),
        ("MYSQL_PWD", "x"),
        ("PWD", "/w"),
        ("OLDPWD", "/o"),
        ("HOME", "/h"),
        ("PATH", "/bin"),
        ("LANG", "C.UTF-8"),
        ("PUBLIC_URL", "https://example.org/x?a=b"),
        ("TERM", "xterm"),
    ]);
    let env = EnvPolicy::default().apply(parent);
    assert_eq!(
        names(&env),
        [
            "PWD",
            "OLDPWD",
            "HOME",
            "PATH",
            "LANG",
            "PUBLIC_URL",
            "NO_COLOR",
            "TERM",
            "PAGER",
            "GIT_PAGER"
        ]
    );
    assert!(env.contains(&("TERM".into(), "dumb".into())));
}

#[test]
fn inherit_exclude_include_only_and_set_each_change_what_a_child_gets() {
    let parent = vars(&[
        ("HOME", "/h"),
        ("PATH", "/bin"),
        ("EDITOR", "vi"),
        ("LC_TIME", "C"),
    ]);
    let core = EnvPolicy {
        inherit: Inherit::Core,
        ..EnvPolicy::default()
    };
    assert_eq!(
        names(&core.apply(parent.clone()))[..3],
        ["HOME", "PATH", "LC_TIME"]
    );
    let none = EnvPolicy {
        inherit: Inherit::None,
        ..EnvPolicy::default()
    };
    assert_eq!(none.apply(parent.clone()).len(), FIXED.len());
    let exclude = EnvPolicy {
        exclude: vec!["ed*".into()],
        ..EnvPolicy::default()
    };
    assert!(!names(&exclude.apply(parent.clone())).contains(&"EDITOR".to_owned()));
    let only = EnvPolicy {
        include_only: vec!["PATH".into(), "home".into()],
        set: vec![("TERM".into(), "xterm".into()), ("X".into(), "1".into())],
        ..EnvPolicy::default()
    };
    let env = only.apply(parent);
    assert_eq!(
        names(&env),
        [
            "HOME",
            "PATH",
            "NO_COLOR",
            "PAGER",
            "GIT_PAGER",
            "TERM",
            "X"
        ]
    );
    assert!(env.contains(&("TERM".into(), "xterm".into())));
}

#[test]
fn values_shaped_like_secrets_are_withheld_whatever_their_name() {
    let secret = |v: &str| secret_value(v);
    assert_eq!(
        secret("postgres://u:pass@h/db"),
        Some(Withheld::UrlUserInfo)
    );
    assert_eq!(
        secret("a list: https://x.org, redis://:pw@cache:6379"),
        Some(Withheld::UrlUserInfo)
    );
    assert_eq!(
        secret("https://0123abcd@o1.ingest.sentry.io/42"),
        Some(Withheld::UrlUserInfo)
    );
    assert_eq!(
        secret("https://hooks.slack.com/services/T0/B0/XXXX"),
        Some(Withheld::WebhookUrl)
    );
    assert_eq!(
        secret("postgres://h/db?sslmode=require&password=x"),
        Some(Withheld::UrlSecretParameter)
    );
    assert_eq!(
        secret("https://blob.example/x?sv=1&sig=abc"),
        Some(Withheld::UrlSecretParameter)
    );
    assert_eq!(
        secret("Server=db;Database=app;User Id=sa;Password=x;"),
        Some(Withheld::ConnectionStringPassword)
    );
    assert_eq!(
        secret("Data Source=h; Pwd=x"),
        Some(Withheld::ConnectionStringPassword)
    );
    assert_eq!(
        secret("-----BEGIN OPENSSH PRIVATE KEY-----\nabc"),
        Some(Withheld::PemBlock)
    );
    assert_eq!(
        secret("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_nature-1"),
        Some(Withheld::Jwt)
    );
    for ordinary in [
        "https://example.com/",
        "https://h/x?u=a:b@c",
        "http://h:8080/path?page=2&sort=name",
        "no url here",
        "/usr/bin:/bin",
        "a.b.c",
        "key=value",
        "--no-password-prompt",
    ] {
        assert_eq!(secret(ordinary), None, "{ordinary}");
    }
}

#[test]
fn names_of_secrets_are_withheld_but_desktop_session_addresses_are_kept() {
    let why = |n: &str| default_exclusion(n, OsStr::new("v"));
    for name in [
        "X_PW",
        "SENTRY_DSN",
        "SLACK_WEBHOOK_URL",
        "SESSIONID",
        "MY_JWT",
    ] {
        assert!(why(name).is_some(), "{name}");
    }
    for name in [
        "PWD",
        "DBUS_SESSION_BUS_ADDRESS",
        "XDG_SESSION_TYPE",
        "HOMEPAGE",
    ] {
        assert_eq!(why(name), None, "{name}");
    }
    assert_eq!(why("GITHUB_PAT"), Some(Withheld::Name("*_PAT")));
}

#[test]
fn the_report_names_each_withheld_variable_and_its_rule() {
    let (env, withheld) = EnvPolicy::default().apply_reporting(vars(&[
        ("HOME", "/h"),
        ("SENTRY", "https://k@h/1"),
        ("X_PW", "p"),
    ]));
    assert!(names(&env).contains(&"HOME".to_owned()));
    assert_eq!(
        withheld,
        [
            ("SENTRY".to_owned(), Withheld::UrlUserInfo),
            ("X_PW".to_owned(), Withheld::Name("*_PW"))
        ]
    );
}

#[test]
fn globs_match_whole_names_ignoring_case() {
    assert!(glob_match("*key*", "MY_API_KEY_2"));
    assert!(glob_match("*_PAT", "github_pat"));
    assert!(!glob_match("*_PAT", "PATH"));
    assert!(glob_match("A?C", "abc"));
    assert!(!glob_match("A?C", "abbc"));
    assert!(glob_match("*", ""));
    assert!(glob_match("a*b*c", "aXXbYYbc"));
}

#[test]
fn a_bare_program_resolves_along_the_path_and_a_missing_one_stays_bare() {
    let path = OsStr::new("/nonexistent:/bin");
    assert_eq!(
        resolve_program("sh", Some(path)),
        std::path::PathBuf::from("/bin/sh")
    );
    assert_eq!(
        resolve_program("./x", Some(path)),
        std::path::PathBuf::from("./x")
    );
    assert_eq!(
        resolve_program("no-such-program-here", Some(path)),
        std::path::PathBuf::from("no-such-program-here")
    );
}

#[test]
fn providers_tokens_are_withheld_by_their_shape_and_look_alikes_are_kept() {
    for (value, provider) in [
        (
            "sk-proj-0123456789abcdefghijABCD",
            "an OpenAI or Anthropic key",
        ),
        (
            "sk-ant-api03-0123456789abcdefghij",
            "an OpenAI or Anthropic key",
        ),
        ("ghp_0123456789abcdefghijklmnopqrstuvwxyz", "a GitHub token"),
        ("gho_0123456789abcdefghijklmnopqrstuvwxyz", "a GitHub token"),
        ("ghs_0123456789abcdefghijklmnopqrstuvwxyz", "a GitHub token"),
        (
            "github_pat_11ABCDEFG0123456789_abcdefghij",
            "a GitHub token",
        ),
        ("glpat-0123456789abcdefghij", "a GitLab token"),
        ("xoxb-1234567890-0987654321-abcdef", "a Slack token"),
        ("xoxp-1234567890-0987654321-abcdef", "a Slack token"),
        (
            "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
            "a Hugging Face token",
        ),
        ("AKIAIOSFODNN7EXAMPLE", "an AWS access key id"),
        ("ASIAIOSFODNN7EXAMPLE", "an AWS access key id"),
        ("key=AKIAIOSFODNN7EXAMPLE,region=eu", "an AWS access key id"),
        (
            "{\"type\": \"service_account\", \"private_key\": \"x\"}",
            "a service account's JSON key",
        ),
    ] {
        assert_eq!(
            secret_value(value),
            Some(Withheld::ProviderToken(provider)),
            "{value}"
        );
    }
    for ordinary in [
        "sk-learn",
        "task-sk-0123456789abcdefghijklmn",
        "ghp_short",
        "hf_home",
        "xoxo-hugs-and-kisses-to-all",
        "AKIAshort",
        "AKIAiosfodnn7example",
        "{\"type\": \"service_account\", \"project_id\": \"p\"}",
    ] {
        assert_eq!(secret_value(ordinary), None, "{ordinary}");
    }
}
