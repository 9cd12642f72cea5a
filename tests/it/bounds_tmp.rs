//! A private `/tmp` (`private_tmp = true`), attacked from inside a bounded process through the
//! wrapper: what others left in `/tmp` is read without it and out of sight with it, the task's own
//! `/tmp` is writable and leaves nothing in the host's, and a writable root and the working
//! directory below `/tmp` stay where they were.

use taskhost::process::bounds::Bounds;

use crate::bounds_fs::{bounds, dir, run_in, stderr, stdout};
use crate::fixtures::scratch;

#[test]
fn a_private_tmp_hides_what_others_left_in_tmp_and_keeps_the_roots_below_it() {
    let s = scratch("bounds-private-tmp");
    let work = dir(&s, "work");
    let other = dir(&s, "other-principal");
    std::fs::write(other.join("secret"), "another principal's file").unwrap();
    let mine = format!("/tmp/taskhost-private-tmp-{}", std::process::id());
    let attack = format!(
        "cat {secret}; echo mine > {mine} && cat {mine}; echo kept > kept; pwd",
        secret = other.join("secret").display(),
    );

    let shared = bounds(&[&work], &[]);
    let out = run_in(Some(&shared), &attack, &[], Some(&work));
    assert!(
        stdout(&out).contains("another principal's file"),
        "{}",
        stderr(&out)
    );

    let private = Bounds {
        private_tmp: true,
        ..bounds(&[&work], &[])
    };
    let _ = std::fs::remove_file(work.join("kept"));
    let _ = std::fs::remove_file(&mine);
    let out = run_in(Some(&private), &attack, &[], Some(&work));
    let (said, err) = (stdout(&out), stderr(&out));
    assert!(!said.contains("another principal's file"), "{said}");
    assert!(err.contains("No such file or directory"), "{err}");
    assert!(said.contains("mine\n"), "{said}{err}");
    assert!(said.contains(&format!("{}\n", work.display())), "{said}");
    assert!(
        !std::path::Path::new(&mine).exists(),
        "the task's /tmp reached the host's"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("kept")).unwrap(),
        "kept\n"
    );
}

/// The attack a helper found: a working directory below `/tmp` outside every write root, bound back
/// into the private `/tmp`, took the new `/tmp`'s write rights (Landlock grants them to what is
/// mounted beneath). Now the task starts in an empty directory of that path, and the host's files
/// there are neither read nor changed.
#[test]
fn a_working_directory_below_tmp_outside_the_roots_is_the_tasks_own_and_empty() {
    let s = scratch("bounds-private-tmp-cwd");
    let work = dir(&s, "work");
    let shared = dir(&s, "shared");
    std::fs::write(shared.join("hostfile"), "the host's\n").unwrap();
    let attack = "cat hostfile; echo tampered > hostfile; ls; pwd";
    let private = Bounds {
        private_tmp: true,
        ..bounds(&[&work], &[])
    };
    let out = run_in(Some(&private), attack, &[], Some(&shared));
    let (said, err) = (stdout(&out), stderr(&out));
    assert!(!said.contains("the host's"), "{said}");
    assert!(
        said.contains(&format!("{}\n", shared.display())),
        "{said}{err}"
    );
    assert_eq!(
        std::fs::read_to_string(shared.join("hostfile")).unwrap(),
        "the host's\n"
    );
}

/// A write root below `/tmp` reached through a symlink (one another process of the user put there,
/// or a root absent when the config was read) is refused with a private `/tmp` as without one: it was
/// bound back into the task's `/tmp` through the link, past the check on roots (watched: the task
/// wrote into the link's target, found by an attacker helper).
#[test]
fn a_write_root_below_tmp_reached_through_a_symlink_is_refused_with_a_private_tmp() {
    let s = scratch("bounds-private-tmp-link");
    let victim = dir(&s, "victim");
    let work = s.join("work");
    std::os::unix::fs::symlink(&victim, &work).unwrap();
    let private = Bounds {
        private_tmp: true,
        ..bounds(&[&work], &[])
    };
    let attack = format!("echo x > {}/planted", work.display());
    let out = run_in(Some(&private), &attack, &[], None);
    assert!(!victim.join("planted").exists(), "{}", stderr(&out));
    assert_eq!(
        out.status.code(),
        Some(i32::from(taskhost::process::bounds::REFUSED_EXIT)),
        "{}",
        stderr(&out)
    );
}
