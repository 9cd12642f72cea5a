//! The filesystem, signal and network bounds, attacked from inside a bounded process: the wrapper
//! (`taskhost bounded`) run directly, each attack run once unbounded (where it succeeds) and once
//! bounded (where the kernel refuses it).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use taskhost::process::bounds::{Bounds, DENY_ENV, REFUSED_EXIT};

use crate::fixtures::{output_within, scratch};
use crate::mcp::binary;

/// Bounds writable beneath `write`, hiding `hide`, with the network off.
pub(crate) fn bounds(write: &[&Path], hide: &[&Path]) -> Bounds {
    Bounds {
        policy: "attacked".into(),
        write: write.iter().map(|p| p.to_path_buf()).collect(),
        hide: hide.iter().map(|p| p.to_path_buf()).collect(),
        filesystem: true,
        ..Bounds::default()
    }
}

/// Runs `script` with `sh -c`, through the wrapper under `bounds` when given.
fn run(bounds: Option<&Bounds>, script: &str) -> Output {
    run_with(bounds, script, &[])
}

fn run_with(bounds: Option<&Bounds>, script: &str, env: &[(&str, &str)]) -> Output {
    run_in(bounds, script, env, None)
}

/// As [`run_with`], started in `cwd` when given (as the keeper starts a task in its `workdir`).
pub(crate) fn run_in(
    bounds: Option<&Bounds>,
    script: &str,
    env: &[(&str, &str)],
    cwd: Option<&Path>,
) -> Output {
    let mut cmd = match bounds {
        Some(b) => {
            let mut c = Command::new(binary());
            c.args([
                "bounded",
                "--bounds",
                &serde_json::to_string(b).unwrap(),
                "--",
            ]);
            c.arg("/bin/sh");
            c
        }
        None => Command::new("/bin/sh"),
    };
    cmd.args(["-c", script]).envs(env.iter().copied());
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    output_within(&mut cmd, Duration::from_secs(30))
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A directory made for the test under `dir`.
pub(crate) fn dir(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(&p).unwrap();
    p
}

#[test]
fn a_write_outside_the_write_roots_fails_with_eacces_and_inside_succeeds() {
    let s = scratch("bounds-write");
    let root = dir(&s, "root");
    let outside = dir(&s, "outside");
    let attack = format!(
        "echo x > {0}/planted && echo x > {1}/made",
        outside.display(),
        root.display()
    );

    let free = run(None, &attack);
    assert!(free.status.success(), "unbounded: {}", stderr(&free));
    std::fs::remove_file(outside.join("planted")).unwrap();

    let out = run(Some(&bounds(&[&root], &[])), &attack);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out)); // sh: a redirection failed
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    assert!(!outside.join("planted").exists());
    let inside = run(
        Some(&bounds(&[&root], &[])),
        &format!("echo y > {}/made", root.display()),
    );
    assert!(inside.status.success(), "{}", stderr(&inside));
    assert_eq!(std::fs::read_to_string(root.join("made")).unwrap(), "y\n");
}

#[test]
fn git_config_inside_a_write_root_is_read_only_unless_git_writable() {
    let s = scratch("bounds-git");
    let root = dir(&s, "repo");
    dir(&root, ".git");
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    let attack = format!(
        "echo '[core] hooksPath = /x' >> {}/.git/config",
        root.display()
    );

    let out = run(Some(&bounds(&[&root], &[])), &attack);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out)); // sh: a redirection failed
    assert!(
        stderr(&out).contains("Read-only file system"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[core]\n"
    );

    let writable = Bounds {
        git_writable: true,
        ..bounds(&[&root], &[])
    };
    let out = run(Some(&writable), &attack);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        std::fs::read_to_string(root.join(".git/config"))
            .unwrap()
            .contains("hooksPath")
    );
}

#[test]
fn a_planted_key_under_hide_and_a_hidden_state_database_cannot_be_read() {
    let s = scratch("bounds-hide");
    let root = dir(&s, "root");
    let ssh = dir(&s, "ssh");
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY").unwrap();
    let state = dir(&s, "state");
    std::fs::write(state.join("state.db"), "TOKEN HASHES").unwrap();
    let token_file = s.join("tokens");
    std::fs::write(&token_file, "TOKEN STORE").unwrap();
    let attack = format!(
        "cat {}/id_ed25519; cat {}/state.db; cat {}",
        ssh.display(),
        state.display(),
        token_file.display()
    );

    let free = run(None, &attack);
    assert_eq!(stdout(&free), "PRIVATE KEYTOKEN HASHESTOKEN STORE");

    let out = run(
        Some(&bounds(&[&root], &[&ssh, &state, &token_file])),
        &attack,
    );
    assert_eq!(stdout(&out), "", "{}", stderr(&out));
    assert!(
        stderr(&out).contains("id_ed25519: No such file"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("state.db: No such file"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("tokens: Permission denied"),
        "{}",
        stderr(&out)
    );
    // The mounts were private to the bounded process: the test still reads every file.
    assert_eq!(
        std::fs::read_to_string(ssh.join("id_ed25519")).unwrap(),
        "PRIVATE KEY"
    );
    assert_eq!(std::fs::read_to_string(&token_file).unwrap(), "TOKEN STORE");
}

#[test]
fn a_root_task_cannot_unmount_what_hides_a_path_nor_keep_a_capability() {
    let s = scratch("bounds-umount");
    let root = dir(&s, "root");
    let secret = dir(&s, "secret");
    std::fs::write(secret.join("key"), "KEY").unwrap();
    let attack = format!(
        "grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status; umount {0}; cat {0}/key",
        secret.display()
    );

    let out = run(Some(&bounds(&[&root], &[&secret])), &attack);
    let caps = stdout(&out);
    assert_eq!(caps.matches("0000000000000000").count(), 3, "{caps}");
    assert!(!caps.contains("KEY"), "{caps}");
    assert!(
        stderr(&out).contains("key: No such file"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn kill_9_of_a_process_outside_the_bounds_fails_and_it_lives_on() {
    let s = scratch("bounds-kill");
    let root = dir(&s, "root");
    let mut keeper = Command::new("sleep").arg("60").spawn().unwrap();
    let attack = format!("kill -9 {}", keeper.id());

    let out = run(Some(&bounds(&[&root], &[])), &attack);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("Operation not permitted"),
        "{}",
        stderr(&out)
    );
    assert!(
        keeper.try_wait().unwrap().is_none(),
        "the keeper's stand-in died"
    );

    let free = run(None, &attack);
    assert!(free.status.success(), "{}", stderr(&free));
    let status = keeper.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
}

#[test]
fn a_tcp_connect_to_a_loopback_listener_fails_under_network_none() {
    let s = scratch("bounds-net");
    let root = dir(&s, "root");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let attack = format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected'");

    let free = run(None, &attack);
    assert_eq!(stdout(&free), "connected\n", "{}", stderr(&free));

    let out = run(Some(&bounds(&[&root], &[])), &attack);
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("socket: Permission denied"),
        "{}",
        stderr(&out)
    );
    let all = Bounds {
        network: true,
        ..bounds(&[&root], &[])
    };
    let open = run(Some(&all), &attack);
    assert_eq!(stdout(&open), "connected\n", "{}", stderr(&open));
}

#[test]
fn an_unbounded_process_beside_a_bounded_one_finishes_untouched() {
    let s = scratch("bounds-beside");
    let root = dir(&s, "root");
    let secret = dir(&s, "secret");
    std::fs::write(secret.join("key"), "KEY").unwrap();
    let b = serde_json::to_string(&bounds(&[&root], &[&secret])).unwrap();
    let mut bounded = Command::new(binary())
        .args(["bounded", "--bounds", &b, "--", "sleep", "60"])
        .spawn()
        .unwrap();
    let beside = format!(
        "cat {0}/key && echo x > {1}/beside && kill -0 {2}",
        secret.display(),
        s.display(),
        bounded.id()
    );
    let out = run(None, &beside);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "KEY");
    assert!(s.join("beside").exists());
    bounded.kill().unwrap();
    bounded.wait().unwrap();
}

#[test]
fn a_mechanism_missing_refuses_the_bounds_before_the_program_runs() {
    let s = scratch("bounds-deny");
    let root = dir(&s, "root");
    let hidden = dir(&s, "hidden");
    let marker = root.join("ran");
    let script = format!("echo x > {}", marker.display());
    for (denied, part, b) in [
        ("landlock", "write", bounds(&[&root], &[])),
        ("mount", "hide", bounds(&[&root], &[&hidden])),
        ("seccomp", "network", bounds(&[&root], &[])),
    ] {
        let out = run_with(Some(&b), &script, &[(DENY_ENV, denied)]);
        assert_eq!(out.status.code(), Some(i32::from(REFUSED_EXIT)), "{denied}");
        let expected = format!("policy 'attacked': {part} cannot be enforced here");
        assert!(
            stderr(&out).contains(&expected),
            "{denied}: {}",
            stderr(&out)
        );
        assert!(!marker.exists(), "{denied}: the program ran");
    }
}

#[test]
fn an_abstract_unix_socket_made_outside_the_bounds_cannot_be_reached() {
    use std::os::linux::net::SocketAddrExt;
    let s = scratch("bounds-abstract");
    let root = dir(&s, "root");
    let name = format!("taskhost-it-abstract-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let attack = format!(
        "python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"\\0{name}\"); print(\"connected\")'"
    );

    let free = run(None, &attack);
    assert_eq!(stdout(&free), "connected\n", "{}", stderr(&free));
    let out = run(Some(&bounds(&[&root], &[])), &attack);
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("[Errno 1] Operation not permitted"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_host_not_run_by_root_hides_paths_through_a_user_namespace() {
    use std::os::unix::process::CommandExt;
    let s = scratch("bounds-userns");
    crate::fixtures::set_mode(&s, 0o755);
    let root = dir(&s, "root");
    let secret = dir(&s, "secret");
    std::fs::write(secret.join("key"), "KEY").unwrap();
    for p in [&root, &secret] {
        nix::unistd::chown(p.as_path(), Some(65534.into()), Some(65534.into())).unwrap();
    }
    let b = serde_json::to_string(&bounds(&[&root], &[&secret])).unwrap();
    let script = format!(
        "id -u; cat {0}/key; echo x > {1}/made && echo wrote",
        secret.display(),
        root.display()
    );
    let mut cmd = Command::new(binary());
    cmd.args(["bounded", "--bounds", &b, "--", "/bin/sh", "-c", &script]);
    cmd.uid(65534).gid(65534);
    let out = output_within(&mut cmd, Duration::from_secs(30));
    assert_eq!(stdout(&out), "65534\nwrote\n", "{}", stderr(&out));
    assert!(
        stderr(&out).contains("key: No such file"),
        "{}",
        stderr(&out)
    );
}

/// Found by an attacker: a process started in a directory inside a hidden path, or inside a root's
/// `.git`, kept the directory beneath the mounts made after it was entered, and read the key or
/// wrote the git config through `.`. The wrapper enters its working directory again, by its path,
/// once the mounts are made.
#[test]
fn a_working_directory_inside_a_hidden_path_or_a_git_dir_sees_what_the_mounts_show() {
    let s = scratch("bounds-cwd");
    let root = dir(&s, "root");
    let git = dir(&root, ".git");
    std::fs::write(git.join("config"), "[core]\n").unwrap();
    let secret = dir(&s, "secret");
    std::fs::write(secret.join("id_rsa"), "PLANTED-KEY").unwrap();
    let caged = bounds(&[&root], &[&secret]);

    let read = "cat id_rsa";
    let free = run_in(None, read, &[], Some(&secret));
    assert!(stdout(&free).contains("PLANTED-KEY"), "unbounded reads it");
    let out = run_in(Some(&caged), read, &[], Some(&secret));
    assert!(!stdout(&out).contains("PLANTED-KEY"), "{out:?}");
    assert!(!out.status.success(), "{out:?}");

    let write = "echo '[alias] pwn = !id' >> config";
    let free = run_in(None, write, &[], Some(&git));
    assert!(free.status.success(), "unbounded: {}", stderr(&free));
    std::fs::write(git.join("config"), "[core]\n").unwrap();
    let out = run_in(Some(&caged), write, &[], Some(&git));
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr(&out).contains("Read-only file system"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(git.join("config")).unwrap(),
        "[core]\n"
    );
}

/// Found by an attacker: Landlock let a bounded task open any terminal under `/dev/pts`, and as uid
/// 0 it wrote into another principal's terminal (spoofed output its agent reads). No terminal opens
/// by its path now; a bounded task still makes terminals of its own (`openpty`).
#[test]
fn another_processs_terminal_cannot_be_opened_and_a_new_terminal_still_can() {
    use std::io::BufRead;
    let mut holder = Command::new("python3")
        .args([
            "-c",
            "import os,time; m,s=os.openpty(); print(os.ttyname(s), flush=True); time.sleep(60)",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let tty = line.trim().to_owned();
    assert!(tty.starts_with("/dev/pts/"), "{tty}");
    let attack = format!("echo SPOOFED > {tty} && echo wrote");
    let free = run(None, &attack);
    assert!(stdout(&free).contains("wrote"), "unbounded: {free:?}");
    let caged = bounds(&[], &[]);
    let out = run(Some(&caged), &attack);
    assert!(!stdout(&out).contains("wrote"), "{out:?}");
    assert!(stderr(&out).contains("Permission denied"), "{out:?}");
    let own = run(
        Some(&caged),
        "python3 -c 'import os; m,s=os.openpty(); os.write(s, b\"hi\\n\"); print(os.read(m, 9))'",
    );
    assert!(stdout(&own).contains("hi"), "{own:?}");
    holder.kill().ok();
    holder.wait().ok();
}

/// Found by an attacker: System V shared memory is not a path, so neither Landlock nor the mounts
/// kept a bounded task from another principal's segment (read and overwritten) or from holding
/// memory past its limit and its end. Each bounded task has an IPC namespace of its own.
#[test]
fn another_processs_shared_memory_segment_cannot_be_reached() {
    let made = Command::new("ipcmk")
        .args(["-M", "4096"])
        .output()
        .expect("ipcmk");
    let id: String = String::from_utf8_lossy(&made.stdout)
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    assert!(!id.is_empty(), "{made:?}");
    let attack = format!("ipcs -m -i {id} 2>&1 | grep -q shmid && echo reached");
    let free = run(None, &attack);
    let out = run(Some(&bounds(&[], &[])), &attack);
    let _ = Command::new("ipcrm").args(["-m", &id]).status();
    assert!(stdout(&free).contains("reached"), "unbounded: {free:?}");
    assert!(!stdout(&out).contains("reached"), "{out:?}");
}

/// POSIX shared memory is a file in `/dev/shm`: a bounded task read another principal's object there
/// (Landlock let it read every path), while it could not make its own (`multiprocessing.Lock`
/// failed with `EACCES`). Each bounded task has a `/dev/shm` of its own, writable, seen by no one
/// else and gone with it.
#[test]
fn another_processs_posix_shared_memory_is_out_of_sight_and_a_task_has_its_own() {
    let name = format!("taskhost-it-shm-{}", std::process::id());
    let theirs = Path::new("/dev/shm").join(&name);
    std::fs::write(&theirs, "ANOTHER PRINCIPAL'S SEGMENT").unwrap();
    let attack = format!(
        "cat {0}; echo mine > /dev/shm/{1}.own && cat /dev/shm/{1}.own; \
         python3 -c 'import multiprocessing as m; m.Lock(); print(\"locked\")'",
        theirs.display(),
        name
    );
    let free = run(None, &format!("cat {}", theirs.display()));
    let root = scratch("bounds-shm");
    let out = run(Some(&bounds(&[&root], &[])), &attack);
    let open = run(
        Some(&Bounds {
            filesystem: false,
            ..bounds(&[], &[])
        }),
        &attack,
    );
    let _ = std::fs::remove_file(&theirs);
    let own = Path::new("/dev/shm").join(format!("{name}.own"));
    let left = own.exists();
    let _ = std::fs::remove_file(&own);
    assert!(stdout(&free).contains("SEGMENT"), "unbounded: {free:?}");
    for out in [&out, &open] {
        assert!(!stdout(out).contains("SEGMENT"), "{out:?}");
        assert!(stdout(out).contains("mine\nlocked\n"), "{out:?}");
    }
    assert!(!left, "the task's own object is in the host's /dev/shm");
}

/// Found by an attacker: a hidden path deeper than directly in a write root is uncovered by a task
/// that renames the directory above it; the next task reads it at its new place. The host refuses
/// such a policy when it reads its config; the wrapper refuses it too, not relying on that.
#[test]
fn a_hidden_path_deeper_in_a_write_root_refuses_the_start_in_the_wrapper() {
    let s = scratch("bounds-hide-deep");
    let root = dir(&s, "root");
    let conf = dir(&root, "conf");
    std::fs::write(conf.join("secret"), "TOPSECRET").unwrap();
    let b = bounds(&[&root], &[&conf.join("secret")]);
    let first = run_in(Some(&b), "mv conf conf2 && echo ran", &[], Some(&root));
    let second = run_in(Some(&b), "cat conf2/secret", &[], Some(&root));
    assert!(!stdout(&second).contains("TOPSECRET"), "{second:?}");
    assert_eq!(
        first.status.code(),
        Some(i32::from(REFUSED_EXIT)),
        "{first:?}"
    );
    assert!(stderr(&first).contains("deeper than directly"), "{first:?}");
}

/// Found by an attacker: a root's `.git` that is a symbolic link had its target bound read-only while
/// the link itself, in the writable root, could be replaced by a writable repository whose hooks
/// the person's next `git` runs. Such a start is refused (the program never runs).
#[test]
fn a_git_symlink_in_a_write_root_refuses_the_start() {
    let s = scratch("bounds-git-link");
    let root = dir(&s, "root");
    let store = dir(&s, "store");
    let git = dir(&store, ".git");
    std::os::unix::fs::symlink(&git, root.join(".git")).unwrap();
    let out = run(Some(&bounds(&[&root], &[])), "echo ran");
    assert_eq!(out.status.code(), Some(i32::from(REFUSED_EXIT)), "{out:?}");
    assert!(stderr(&out).contains("symbolic link"), "{out:?}");
    assert!(!stdout(&out).contains("ran"));
}

/// One task cannot turn a write root nested in another into a way in for the next: with `write =
/// [outer, outer/inner]`, a task replaces `inner` (inside its own root `outer`) with a symlink to a
/// directory outside both. The next task's start is refused, its root being reached through a link
/// (watched: it wrote into that directory before, its Landlock rule following the link).
#[test]
fn a_nested_write_root_swapped_for_a_symlink_opens_nothing_outside_to_the_next_task() {
    let s = scratch("bounds-nested-root");
    let outer = dir(&s, "outer");
    let inner = dir(&outer, "inner");
    let victim = dir(&s, "victim");
    let b = bounds(&[&outer, &inner], &[]);
    let swap = format!(
        "rmdir {0} && ln -s {1} {0}",
        inner.display(),
        victim.display()
    );
    let swapped = run(Some(&b), &swap);
    assert!(swapped.status.success(), "{}", stderr(&swapped));
    let marker = outer.join("ran");
    let attack = format!(
        "echo x > {} ; echo x > {}/planted",
        marker.display(),
        inner.display()
    );
    let out = run(Some(&b), &attack);
    assert!(
        !victim.join("planted").exists(),
        "the next task wrote outside its roots: {}",
        stderr(&out)
    );
    assert_eq!(
        out.status.code(),
        Some(i32::from(REFUSED_EXIT)),
        "{}",
        stderr(&out)
    );
    assert!(!marker.exists(), "the program ran");
    assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
}
