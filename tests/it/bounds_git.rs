//! The read-only `.git` of a write root, attacked by one task to reach the next (or the person's
//! next `git`): the git directories a start would guard are redirected, raced or moved aside by a
//! task that may write where they are named. Each attack was found by an attacker helper and was
//! watched succeeding before the wrapper refused it.

use taskhost::process::bounds::REFUSED_EXIT;

use crate::bounds_fs::{bounds, dir, run_in, stderr, stdout};
use crate::fixtures::scratch;

fn refused(out: &std::process::Output, why: &str) {
    assert_eq!(out.status.code(), Some(i32::from(REFUSED_EXIT)), "{out:?}");
    assert!(stderr(out).contains(why), "{}", stderr(out));
}

/// A worktree's `.git` names its gitdir through a link in the writable root: the task points the
/// link at a repository of its own (hooks the person's next `git` in the root runs). The start is
/// refused: the gitdir is reached through a symbolic link.
#[test]
fn a_gitdir_named_through_a_link_in_the_write_root_refuses_the_start() {
    let s = scratch("bounds-git-gitdir-link");
    let root = dir(&s, "root");
    let real = dir(&s, "real-gitdir");
    std::fs::write(real.join("config"), "[core]\n").unwrap();
    std::os::unix::fs::symlink(&real, root.join("lnk")).unwrap();
    std::fs::write(
        root.join(".git"),
        format!("gitdir: {}\n", root.join("lnk").display()),
    )
    .unwrap();
    let attack = "mkdir evil && echo '[core] hooksPath = /x' > evil/config && ln -sfn \"$PWD/evil\" lnk.new && mv -T lnk.new lnk && echo ran";

    let out = run_in(Some(&bounds(&[&root], &[])), attack, &[], Some(&root));
    assert!(!stdout(&out).contains("ran"), "{}", stderr(&out));
    refused(&out, "symbolic link");
    assert_eq!(std::fs::read_link(root.join("lnk")).unwrap(), real);
}

/// The same link swapped back and forth (`RENAME_EXCHANGE`) between a directory in the root and one
/// outside every root while tasks start: a mount made by path could take its source and its target
/// at different moments and bind the outside directory writable into the root. No start runs its
/// program, and nothing is written outside.
#[test]
fn a_gitdir_link_raced_while_tasks_start_never_opens_a_directory_outside_the_roots() {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    let s = scratch("bounds-git-gitdir-race");
    let root = dir(&s, "root");
    let inside = dir(&root, "gd");
    let outside = dir(&s, "outside");
    std::os::unix::fs::symlink(&inside, root.join("lnk")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("lnk2")).unwrap();
    std::fs::write(
        root.join(".git"),
        format!("gitdir: {}\n", root.join("lnk").display()),
    )
    .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, a, b) = (stop.clone(), root.join("lnk"), root.join("lnk2"));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                renameat2(AT_FDCWD, &a, AT_FDCWD, &b, RenameFlags::RENAME_EXCHANGE).unwrap();
            }
        })
    };
    let b = bounds(&[&root], &[]);
    let attack = format!("echo x > {}/gd/planted; echo ran", root.display());
    let ran = (0..40)
        .filter(|_| stdout(&run_in(Some(&b), &attack, &[], None)).contains("ran"))
        .count();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        !outside.join("planted").exists(),
        "written outside the roots"
    );
    assert_eq!(ran, 0, "a start with the gitdir behind a link ran");
}

/// With `write = [outer, outer/repo]`, one task moves `repo` aside (it may write in `outer`) and the
/// next finds no `.git` to guard at `outer/repo`, while the moved one takes hooks. A root whose
/// `.git` lies deeper than directly in another write root is refused.
#[test]
fn a_repository_root_nested_in_another_write_root_refuses_the_start() {
    let s = scratch("bounds-git-nested");
    let outer = dir(&s, "outer");
    let repo = dir(&outer, "repo");
    dir(&repo, ".git/hooks");
    let b = bounds(&[&outer, &repo], &[]);
    let moved = outer.join("repo.moved");

    let first = run_in(
        Some(&b),
        &format!("mv {} {} && echo ran", repo.display(), moved.display()),
        &[],
        None,
    );
    let hook = moved.join(".git/hooks/pre-commit");
    let second = run_in(
        Some(&b),
        &format!("echo evil > {} && echo ran", hook.display()),
        &[],
        None,
    );
    assert!(!hook.exists(), "a hook was planted: {second:?}");
    assert!(!stdout(&first).contains("ran"), "{first:?}");
    refused(&first, "deeper than directly in the write root");
}

/// A worktree whose main repository lies in a write root, below it: a task moves the main
/// repository aside and the next writes its config, which nothing guards at its new place. The
/// start is refused: the gitdir lies deeper than directly in a write root.
#[test]
fn a_worktrees_gitdir_deeper_in_a_write_root_refuses_the_start() {
    let s = scratch("bounds-git-worktree-deep");
    let work = dir(&s, "work");
    let main = dir(&work, "main");
    let gitdir = dir(&main, ".git/worktrees/wt");
    std::fs::write(main.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
    let wt = dir(&s, "wt");
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
    let b = bounds(&[&wt, &work], &[]);
    let moved = work.join("main.moved");

    let first = run_in(
        Some(&b),
        &format!("mv {} {} && echo ran", main.display(), moved.display()),
        &[],
        None,
    );
    let second = run_in(
        Some(&b),
        &format!("echo x >> {}/.git/config && echo ran", moved.display()),
        &[],
        None,
    );
    let config = if moved.exists() { &moved } else { &main };
    assert_eq!(
        std::fs::read_to_string(config.join(".git/config")).unwrap(),
        "[core]\n",
        "{second:?}"
    );
    assert!(!stdout(&first).contains("ran"), "{first:?}");
    refused(&first, "deeper than directly in the write root");
}

/// A `.git` that is a named pipe: reading it as a worktree's `.git` file would wait for a writer
/// forever, and every later start of the policy with it. It is no repository: the task starts.
#[test]
fn a_git_that_is_a_named_pipe_does_not_hold_up_the_start() {
    let s = scratch("bounds-git-fifo");
    let root = dir(&s, "root");
    nix::unistd::mkfifo(&root.join(".git"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let out = run_in(Some(&bounds(&[&root], &[])), "echo ran", &[], None);
    assert_eq!(stdout(&out), "ran\n", "{}", stderr(&out));
}

/// Kept working: a worktree of a main repository that is a write root itself; the worktree's `.git`
/// file, its gitdir (in the main repository's `.git`) and the common directory are read-only.
#[test]
fn a_worktree_of_a_repository_root_keeps_its_git_files_read_only() {
    let s = scratch("bounds-git-worktree");
    let main = dir(&s, "main");
    let gitdir = dir(&main, ".git/worktrees/wt");
    std::fs::write(main.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
    let wt = dir(&s, "wt");
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
    let attack = format!(
        "echo x >> {0}/.git/config; echo x > {1}/HEAD; echo x >> {2}/.git; echo x > {2}/file",
        main.display(),
        gitdir.display(),
        wt.display()
    );
    let out = run_in(Some(&bounds(&[&wt, &main], &[])), &attack, &[], None);
    assert_eq!(
        stderr(&out).matches("Read-only file system").count(),
        3,
        "{}",
        stderr(&out)
    );
    assert!(wt.join("file").exists(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(main.join(".git/config")).unwrap(),
        "[core]\n"
    );
}

/// A `.git` file names a gitdir that is not there, in a write root (a worktree's stale line, a
/// separate gitdir not made yet): one task makes it, with an `fsmonitor` the person's next `git
/// status` runs, and the next task's start guards the task's repository. The start is refused.
#[test]
fn a_gitdir_not_there_inside_a_write_root_refuses_the_start() {
    let s = scratch("bounds-git-gitdir-missing");
    let root = dir(&s, "root");
    let store = dir(&s, "store");
    let named = store.join("root.git");
    std::fs::write(root.join(".git"), format!("gitdir: {}\n", named.display())).unwrap();
    let attack = format!(
        "mkdir {0} && echo '[core] fsmonitor = /x' > {0}/config && echo ran",
        named.display()
    );
    let out = run_in(Some(&bounds(&[&root, &store], &[])), &attack, &[], None);
    assert!(!named.exists(), "the task made the gitdir: {out:?}");
    refused(&out, "is not there and lies in the write root");
}

/// A `.git` file of bytes that are no text names no gitdir: the start runs (it was refused, and a
/// task that wrote such a file refused every later start).
#[test]
fn a_git_file_that_is_no_text_does_not_refuse_the_start() {
    let s = scratch("bounds-git-bytes");
    let root = dir(&s, "root");
    std::fs::write(root.join(".git"), b"\xff\xfegitdir: x\n").unwrap();
    let out = run_in(Some(&bounds(&[&root], &[])), "echo ran", &[], None);
    assert_eq!(stdout(&out), "ran\n", "{}", stderr(&out));
}
