use std::collections::HashSet;
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::ending::end_everything;
use super::fds::{self, Receiver};
use super::wire::{self, Launch, Report, Request, Slot, Streams, WireError};
use crate::Exit;
use crate::escaped::MARKER;

fn launch() -> Launch {
    Launch {
        program: PathBuf::from("/bin/bash"),
        args: vec![OsString::from("-c"), OsString::from("echo hi\u{e9}")],
        env: vec![(OsString::from("PATH"), OsString::from("/bin:/usr/bin"))],
        cwd: Some(PathBuf::from("/tmp")),
    }
}

#[test]
fn every_request_and_report_decodes_to_itself() {
    let requests = [
        Request::Spawn {
            id: 7,
            launch: launch(),
            streams: Streams::Slots([Slot::Null, Slot::Passed, Slot::Passed]),
        },
        Request::Spawn {
            id: u64::MAX,
            launch: Launch {
                cwd: None,
                args: Vec::new(),
                env: Vec::new(),
                ..launch()
            },
            streams: Streams::Slots([Slot::Passed; 3]),
        },
        Request::Spawn {
            id: 8,
            launch: launch(),
            streams: Streams::Terminal(crate::TtySize {
                cols: 120,
                rows: 40,
            }),
        },
        Request::Watch { pgid: 42 },
        Request::Forget { pgid: 42 },
    ];
    for r in requests {
        let frame = r.encode();
        assert_eq!(Request::decode(&frame[4..]), Ok(r));
    }
    let reports = [
        Report::Spawned {
            id: 1,
            pid: 99,
            master: false,
        },
        Report::Spawned {
            id: 1,
            pid: 99,
            master: true,
        },
        Report::Refused {
            id: 2,
            cause: "No such file or directory (os error 2)".into(),
        },
        Report::Exited {
            id: 3,
            exit: Exit::Code(-1),
        },
        Report::Exited {
            id: 4,
            exit: Exit::Signal(9),
        },
        Report::Exited {
            id: 5,
            exit: Exit::Unknown,
        },
    ];
    for r in reports {
        let frame = r.encode();
        assert_eq!(Report::decode(&frame[4..]), Ok(r));
    }
}

#[test]
fn a_short_or_unknown_frame_is_an_error_never_a_panic() {
    let frame = Request::Spawn {
        id: 7,
        launch: launch(),
        streams: Streams::Slots([Slot::Null; 3]),
    }
    .encode();
    for end in 4..frame.len() {
        assert!(Request::decode(&frame[4..end]).is_err(), "{end}");
    }
    assert!(Request::decode(&[99]).is_err());
    assert!(Report::decode(&[]).is_err());
    // A count the frame cannot hold: an error, and nothing near its size is allocated for it.
    let mut huge = vec![0u8, 7, 0xff, 0xff, 0xff, 0xff, 0x0f];
    huge.extend_from_slice(&[0; 16]);
    assert!(Request::decode(&huge).is_err());
}

#[test]
fn descriptors_arrive_with_their_frame_in_order() {
    let (a, b) = UnixStream::pair().expect("pair");
    let files: Vec<std::fs::File> = ["/dev/null", "/dev/zero", "/proc/self/stat"]
        .iter()
        .map(|p| std::fs::File::open(p).expect("open"))
        .collect();
    let first = Request::Spawn {
        id: 1,
        launch: launch(),
        streams: Streams::Slots([Slot::Null, Slot::Passed, Slot::Passed]),
    };
    let second = Request::Spawn {
        id: 2,
        launch: launch(),
        streams: Streams::Slots([Slot::Passed, Slot::Null, Slot::Null]),
    };
    fds::send(
        a.as_fd(),
        &first.encode(),
        &[files[0].as_fd(), files[1].as_fd()],
    )
    .expect("send");
    fds::send(a.as_fd(), &Request::Forget { pgid: 5 }.encode(), &[]).expect("send");
    fds::send(a.as_fd(), &second.encode(), &[files[2].as_fd()]).expect("send");
    drop(a);
    let mut rx = Receiver::new();
    let target = |fd: &std::os::fd::OwnedFd| {
        std::fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(fd)
        ))
        .expect("link")
    };
    let body = rx.next(b.as_fd()).expect("read").expect("frame");
    assert_eq!(Request::decode(&body), Ok(first));
    let fds = rx.take_fds(2).expect("fds");
    assert_eq!(target(&fds[0]), PathBuf::from("/dev/null"));
    assert_eq!(target(&fds[1]), PathBuf::from("/dev/zero"));
    let body = rx.next(b.as_fd()).expect("read").expect("frame");
    assert_eq!(Request::decode(&body), Ok(Request::Forget { pgid: 5 }));
    let body = rx.next(b.as_fd()).expect("read").expect("frame");
    assert_eq!(Request::decode(&body), Ok(second));
    let fds = rx.take_fds(1).expect("fds");
    assert!(target(&fds[0]).to_string_lossy().ends_with("/stat"));
    assert_eq!(rx.take_fds(1).err(), Some(WireError::MissingDescriptors));
    assert!(rx.next(b.as_fd()).expect("read").is_none());
}

#[test]
fn the_keeper_ends_registered_groups_and_marked_processes() {
    use std::os::unix::process::CommandExt;
    // A group the host registered, and one it did not (must be spared).
    let mut grouped = Command::new("sleep")
        .arg("100")
        .process_group(0)
        .spawn()
        .expect("sleep");
    let mut spared = Command::new("sleep")
        .arg("100")
        .process_group(0)
        .spawn()
        .expect("sleep");
    // A marked process in no registered group (a setsid daemon).
    let fake_host = 999_999_999u32;
    let mut marked = Command::new("sleep")
        .arg("100")
        .env(MARKER, format!("{fake_host}:0:1"))
        .process_group(0)
        .spawn()
        .expect("sleep");
    let groups: HashSet<i32> = [grouped.id() as i32].into();
    let signals = end_everything(&groups, &[format!("{fake_host}:")], Duration::from_secs(1));
    assert!(signals >= 2, "{signals}");
    for (child, ended) in [
        (&mut grouped, true),
        (&mut marked, true),
        (&mut spared, false),
    ] {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut status = child.try_wait().expect("try_wait");
        while ended && status.is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            status = child.try_wait().expect("try_wait");
        }
        assert_eq!(status.is_some(), ended, "pid {}", child.id());
    }
    let _ = spared.kill();
    let _ = spared.wait();
}

#[test]
fn a_frame_longer_than_the_maximum_is_an_error_before_it_is_read() {
    let (a, b) = UnixStream::pair().expect("pair");
    let len = (wire::MAX_FRAME as u32 + 1).to_le_bytes();
    fds::send(a.as_fd(), &len, &[]).expect("send");
    let err = Receiver::new().next(b.as_fd()).expect_err("too long");
    assert!(err.to_string().contains("too long"), "{err}");
}
