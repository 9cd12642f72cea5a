//! A bounded task trying to get out of its cgroups, through the real wrapper run as a real
//! process, each attack aimed at cgroups the test made. Run as root (as in CI).

use std::path::Path;

use taskhost::process::bounds::Bounds;

use crate::bounds_limits::{LIMIT, named, policy, text, wrapped};
use crate::fixtures::{cgroup_mount, output_within};

/// A task under a policy with no `write` (every path writable but the kernel's own files) cannot
/// make a cgroup inside its own, nor rename its own away from the name its host looks it up by:
/// `/sys` is read-only to it, directories included (watched: both succeeded before, since the
/// rights on `/` reached every directory beneath it).
#[test]
fn a_task_cannot_make_a_cgroup_in_its_own_or_rename_its_own() {
    let limited = Bounds {
        memory_max: Some(256 << 20),
        ..policy()
    };
    let cgroups = named(&limited).expect("this machine has a memory controller");
    let dir = cgroups.paths()[0].to_owned();
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let script = format!(
        "mkdir {d}/sub && echo made; mv {d} {d}-away && echo moved; grep -c '{name}$' /proc/self/cgroup",
        d = dir.display(),
    );
    let mut cmd = wrapped(&limited, Some(&cgroups), &script, Path::new("/"));
    let out = output_within(&mut cmd, LIMIT);
    // Whatever the attack did is undone before the verdict, so a failure leaves nothing behind.
    let _ = std::fs::rename(dir.with_file_name(format!("{name}-away")), &dir);
    let _ = std::fs::remove_dir(dir.join("sub"));
    let removed = cgroups.remove();
    assert_eq!(text(&out.stdout), "1\n", "{out:?}");
    assert!(removed, "the task cgroups are removed");
}

/// `clone3` with `CLONE_INTO_CGROUP` and a cgroup directory opened read-only: the child prints
/// its cgroup v2 line, or the parent says why the call was refused.
const CLONE_INTO: &str = r#"
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
args = struct.pack("11Q", 0x200000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, fd)
pid = libc.syscall(435, ctypes.create_string_buffer(args), len(args))
if pid == 0:
    line = [l for l in open("/proc/self/cgroup").read().splitlines() if l.startswith("0::")]
    print("child in", line[0][3:], flush=True)
    os._exit(0)
elif pid < 0:
    print("refused", ctypes.get_errno(), flush=True)
else:
    os.waitpid(pid, 0)
"#;

/// A task cannot place a child in another cgroup v2 with `clone3`'s `CLONE_INTO_CGROUP`, which
/// checks only the target's file modes (a directory opened read-only is enough, past Landlock):
/// the call is refused as unknown (ENOSYS), so the C library falls back to `clone` (watched: the
/// child landed in the test's cgroup before). Unbounded, the same program's child lands there.
#[test]
fn a_task_cannot_place_a_child_in_another_cgroup_with_clone3() {
    let Some(root) = cgroup_mount(true, "") else {
        eprintln!("skipped: no cgroup v2 hierarchy here");
        return;
    };
    let target = root.join(format!("taskhost-test-clone3-{}", std::process::id()));
    std::fs::create_dir(&target).expect("a cgroup the test makes");
    let script = format!("/usr/bin/python3 -c '{CLONE_INTO}' {}", target.display());
    let bounds = Bounds {
        write: vec![std::env::temp_dir()],
        filesystem: true,
        ..policy()
    };
    let mut bounded = wrapped(&bounds, None, &script, Path::new("/"));
    let refused = output_within(&mut bounded, LIMIT);
    let mut plain = std::process::Command::new("/bin/sh");
    plain.args(["-c", &script]);
    let placed = output_within(&mut plain, LIMIT);
    let _ = std::fs::remove_dir(&target);
    let wanted = format!(
        "child in /{}\n",
        target.file_name().unwrap().to_string_lossy()
    );
    assert_eq!(text(&placed.stdout), wanted, "unbounded: {placed:?}");
    assert_eq!(
        text(&refused.stdout),
        "refused 38\n",
        "bounded: {refused:?}"
    );
}
