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

/// A piped task's hold: both streams kept.
/// Spawns [`launch`] on `keeper`, its stdout and stderr on `null`, held from its start as `hold`
/// with `fds`.
fn spawn_held(
    keeper: &super::client::Keeper,
    null: &std::fs::File,
    hold: &super::Hold,
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> super::KeptProcess {
    keeper
        .spawn(
            &launch(),
            super::KeptStreams::Pipes([None, Some(null.as_fd()), Some(null.as_fd())]),
            Some(super::HeldFromStart { hold, fds }),
        )
        .expect("spawned")
}

fn held_pipes() -> super::Hold {
    let stream = |file: &str| super::HeldStream {
        cap: 1 << 20,
        kept: true,
        file: file.to_owned(),
        pending: Vec::new(),
        dropped: 0,
    };
    super::Hold {
        held_as: super::HeldAs::Foreground(3),
        n: 4,
        tail_bytes: 64_000,
        grace_ms: 3000,
        terminal: false,
        streams: vec![stream("out.log"), stream("err.log")],
        stdin: false,
    }
}

#[test]
fn a_hold_at_a_start_carries_all_its_descriptors_but_a_terminals_master() {
    let pipes = held_pipes();
    assert_eq!(pipes.descriptors(), 4);
    assert_eq!(pipes.descriptors_at_start(), 4);
    let terminal = super::Hold {
        terminal: true,
        streams: held_pipes().streams.split_off(1),
        ..held_pipes()
    };
    assert_eq!(terminal.descriptors(), 2);
    assert_eq!(terminal.descriptors_at_start(), 1);
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
        Request::SpawnHeld {
            id: 9,
            launch: launch(),
            streams: Streams::Slots([Slot::Null, Slot::Passed, Slot::Passed]),
            hold: held_pipes(),
        },
        Request::Spawn {
            id: 8,
            launch: launch(),
            streams: Streams::Terminal(crate::TtySize {
                cols: 120,
                rows: 40,
            }),
        },
        Request::SpawnHeld {
            id: 10,
            launch: launch(),
            streams: Streams::Terminal(crate::TtySize { cols: 80, rows: 24 }),
            hold: super::Hold {
                terminal: true,
                streams: held_pipes().streams.split_off(1),
                ..held_pipes()
            },
        },
        Request::Rename {
            pgid: 42,
            task: "bash-7".to_owned(),
        },
        Request::Carry {
            id: 11,
            pgid: 43,
            hold: held_pipes(),
        },
        Request::Watch { pgid: 42 },
        Request::Forget { pgid: 42 },
        Request::KeptDir,
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

/// A successor learns the keeper's protocol and pid from its `Handed` frame; a host of protocol 1
/// reads the same frame as it always did, one of 2 to 6 the protocol, and a keeper of protocol 1's
/// frame says protocol 1.
#[test]
fn a_handed_report_carries_the_keepers_protocol_and_pid_where_older_hosts_ignore_them() {
    let handed = || Report::Handed {
        host: 3,
        markers: vec!["77:".to_owned()],
        next_id: 12,
        listens: vec!["/run/taskhost.sock".to_owned()],
    };
    let frame = handed().encode_handed();
    let body = &frame[4..];
    let keeper = Some(std::process::id());
    assert_eq!(
        Report::decode_handed(body),
        Ok((handed(), wire::PROTOCOL, keeper))
    );
    assert_eq!(Report::decode(body), Ok(handed()), "as protocol 1 reads it");
    let (_, rest) = postcard::take_from_bytes::<Report>(body).expect("the report");
    assert_eq!(
        postcard::from_bytes::<u32>(rest),
        Ok(wire::PROTOCOL),
        "as protocols 2 to 6 read it"
    );
    let old = handed().encode();
    assert_eq!(Report::decode_handed(&old[4..]), Ok((handed(), 1, None)));
}

/// A keeper of protocol 1 (the first handover's build) and a host of it read protocol 1's
/// messages as they always were: later messages are only appended.
#[test]
fn protocol_1_messages_keep_their_encoding() {
    let variant = |frame: Vec<u8>| frame[4];
    assert_eq!(variant(Request::Watch { pgid: 1 }.encode()), 1);
    assert_eq!(variant(Request::Forget { pgid: 1 }.encode()), 2);
    assert_eq!(variant(Request::NoHandover.encode()), 6);
    assert_eq!(
        variant(
            Request::Rename {
                pgid: 1,
                task: "bash-1".into()
            }
            .encode()
        ),
        7
    );
    let spawn = Request::Spawn {
        id: 1,
        launch: launch(),
        streams: Streams::Slots([Slot::Null; 3]),
    };
    assert_eq!(variant(spawn.encode()), 0);
    assert_eq!(
        variant(
            Report::Exited {
                id: 1,
                exit: Exit::Code(0)
            }
            .encode()
        ),
        2
    );
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

/// A keeper that answers every start with pid 4242, and tells `seen`
/// each request with the number of descriptors beside it.
fn fake_keeper(
    socket: UnixStream,
    seen: std::sync::mpsc::Sender<(Request, usize)>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut frames = Receiver::new();
        while let Ok(Some(body)) = frames.next(socket.as_fd()) {
            // Told as it came (a hold named or typed), counted as a keeper reads it.
            let (Ok(request), Ok(typed)) = (
                Request::decode(&body),
                Request::decode(&body).map(Request::typed),
            ) else {
                return;
            };
            let count = match &typed {
                Request::Handover { listens, .. } => 2 + listens.len(),
                Request::KeptDir => 1,
                Request::Hold { hold, .. } => hold.descriptors(),
                Request::Spawn { streams, .. } | Request::SpawnHeld { streams, .. } => {
                    let streams = match streams {
                        Streams::Slots(slots) => {
                            slots.iter().filter(|s| **s == Slot::Passed).count()
                        }
                        Streams::Terminal(_) => 0,
                    };
                    match &typed {
                        Request::SpawnHeld { hold, .. } => streams + hold.descriptors_at_start(),
                        _ => streams,
                    }
                }
                _ => 0,
            };
            let fds = frames
                .take_fds(count)
                .expect("the descriptors came with the request");
            drop(fds);
            let report = match &typed {
                Request::Spawn { id, .. } | Request::SpawnHeld { id, .. } => {
                    Some(Report::Spawned {
                        id: *id,
                        pid: 4242,
                        master: false,
                    })
                }
                _ => None,
            };
            if let Some(report) = report {
                fds::send(socket.as_fd(), &report.encode(), &[]).expect("report");
            }
            let _ = seen.send((request, count));
        }
    })
}

#[test]
fn a_keeper_that_has_not_said_it_speaks_protocol_2_is_sent_only_protocol_1() {
    use super::client::{Keeper, Pending, read_reports};
    use parking_lot::Mutex;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;
    let (host_end, keeper_end) = UnixStream::pair().expect("pair");
    let (seen_tx, seen) = std::sync::mpsc::channel();
    let fake = fake_keeper(keeper_end, seen_tx);
    // As an adopted keeper starts: of protocol 1 until it says otherwise.
    let pending = Arc::new(Mutex::new(Pending::default()));
    let (reports, reader) = (host_end.try_clone().expect("clone"), pending.clone());
    std::thread::spawn(move || read_reports(reports, Receiver::new(), &reader, || {}));
    let keeper = Keeper {
        socket: host_end,
        open: parking_lot::Mutex::new(true),
        pending,
        child: Mutex::new(None),
        adopted_pid: None,
        next: AtomicU64::new(0),
        kept_by_name: std::sync::atomic::AtomicBool::new(false),
    };
    let null = std::fs::File::open("/dev/null").expect("null");
    let held_fds = [null.as_fd(); 4];
    let hold = held_pipes();
    let start = |keeper: &Keeper| spawn_held(keeper, &null, &hold, &held_fds);
    let wait = Duration::from_secs(10);
    keeper.rename(4242, "bash-1");
    assert!(
        !start(&keeper).held,
        "a keeper of protocol 1 is not asked to hold"
    );
    match seen.recv_timeout(wait).expect("a request") {
        (Request::Spawn { .. }, 2) => {}
        other => panic!("a protocol 1 start with its streams' descriptors, not {other:?}"),
    }
    // As adopting a keeper whose `Handed` report said protocol 2 leaves it.
    keeper.pending.lock().protocol = 2;
    assert!(start(&keeper).held);
    match seen.recv_timeout(wait).expect("a request") {
        (Request::SpawnHeldNamed { hold, .. }, 6) => {
            assert_eq!(super::Hold::from(hold), held_pipes())
        }
        other => panic!("a held start with all its descriptors, not {other:?}"),
    }
    keeper.rename(4242, "bash-1");
    assert!(matches!(
        seen.recv_timeout(wait),
        Ok((Request::Rename { pgid: 4242, .. }, 0))
    ));
    keeper.stop();
    fake.join()
        .expect("the fake keeper ends with the host's side");
}

/// A keeper with a fake on the other side, of protocol `protocol` (as a keeper adopted from a
/// predecessor whose `Handed` report said it), and the requests it saw.
fn fake_of_protocol(
    protocol: u32,
) -> (
    super::client::Keeper,
    std::sync::mpsc::Receiver<(Request, usize)>,
    std::thread::JoinHandle<()>,
) {
    use super::client::{Keeper, Pending, read_reports};
    use parking_lot::Mutex;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    let (host_end, keeper_end) = UnixStream::pair().expect("pair");
    let (seen_tx, seen) = std::sync::mpsc::channel();
    let fake = fake_keeper(keeper_end, seen_tx);
    let pending = Arc::new(Mutex::new(Pending::default()));
    pending.lock().protocol = protocol;
    let (reports, reader) = (host_end.try_clone().expect("clone"), pending.clone());
    std::thread::spawn(move || read_reports(reports, Receiver::new(), &reader, || {}));
    let keeper = Keeper {
        socket: host_end,
        open: Mutex::new(true),
        pending,
        child: Mutex::new(None),
        adopted_pid: None,
        next: AtomicU64::new(0),
        kept_by_name: AtomicBool::new(false),
    };
    (keeper, seen, fake)
}

/// A handover's setup whose descriptors are `/dev/null`'s.
fn null_setup() -> super::HoldSetup {
    let null = || std::os::fd::OwnedFd::from(std::fs::File::open("/dev/null").expect("null"));
    super::HoldSetup {
        grace_ms: 1000,
        host: 1,
        listener: null(),
        lock: null(),
        listens: Vec::new(),
    }
}

/// The requests a keeper of `protocol` sees for a handover told the kept directory, a held start
/// and a hold, each with the number of descriptors beside it.
fn held_requests(protocol: u32) -> Vec<(Request, usize)> {
    let (keeper, seen, fake) = fake_of_protocol(protocol);
    let null = std::fs::File::open("/dev/null").expect("null");
    let held_fds = [null.as_fd(); 4];
    let hold = held_pipes();
    keeper.handover(&null_setup(), Some(null.as_fd()));
    let started = spawn_held(&keeper, &null, &hold, &held_fds);
    assert!(started.held);
    keeper.hold(4242, &hold, &held_fds);
    keeper.stop();
    fake.join()
        .expect("the fake keeper ends with the host's side");
    seen.try_iter().collect()
}

#[test]
fn a_keeper_of_protocol_3_is_told_the_kept_directory_once_and_sent_no_kept_file() {
    let by_name = |hold: &super::handover::hold::NamedHold| {
        let hold = super::Hold::from(hold.clone());
        hold.streams
            .iter()
            .all(|s| !s.kept && s.by_name() && !s.file.is_empty())
    };
    let seen = held_requests(3);
    assert!(matches!(seen[0], (Request::Handover { .. }, 2)), "{seen:?}");
    assert!(matches!(seen[1], (Request::KeptDir, 1)), "{seen:?}");
    match &seen[2] {
        (Request::SpawnHeldNamed { hold, .. }, 4) => assert!(by_name(hold), "{hold:?}"),
        other => panic!("a held start with its streams and read ends only, not {other:?}"),
    }
    match &seen[3] {
        (Request::HoldNamed { hold, .. }, 2) => assert!(by_name(hold), "{hold:?}"),
        other => panic!("a hold with its read ends only, not {other:?}"),
    }
    assert_eq!(seen.len(), 4);
}

#[test]
fn a_keeper_of_protocol_2_is_not_told_the_kept_directory_and_gets_every_kept_file() {
    let seen = held_requests(2);
    assert!(matches!(seen[0], (Request::Handover { .. }, 2)), "{seen:?}");
    match &seen[1] {
        (Request::SpawnHeldNamed { hold, .. }, 6) => {
            assert_eq!(super::Hold::from(hold.clone()), held_pipes());
        }
        other => panic!("a held start with all its descriptors, not {other:?}"),
    }
    match &seen[2] {
        (Request::HoldNamed { hold, .. }, 4) => {
            assert_eq!(super::Hold::from(hold.clone()), held_pipes());
        }
        other => panic!("a hold with all its descriptors, not {other:?}"),
    }
    assert_eq!(seen.len(), 3);
}

/// A keeper of protocol 5 is sent its holds typed; one of protocol 4 or earlier, named (above).
#[test]
fn a_keeper_of_protocol_5_is_sent_its_holds_typed() {
    let seen = held_requests(5);
    assert!(matches!(seen[1], (Request::KeptDir, 1)), "{seen:?}");
    match &seen[2] {
        (Request::SpawnHeld { hold, .. }, 4) => {
            assert_eq!(hold.held_as, super::HeldAs::Foreground(3));
        }
        other => panic!("a typed held start, not {other:?}"),
    }
    match &seen[3] {
        (Request::Hold { hold, .. }, 2) => assert_eq!(hold.held_as, super::HeldAs::Foreground(3)),
        other => panic!("a typed hold, not {other:?}"),
    }
}

#[test]
fn a_hold_by_name_leaves_out_only_its_kept_files_in_order() {
    use std::os::fd::AsRawFd;
    let files: Vec<std::fs::File> = (0..5)
        .map(|_| std::fs::File::open("/dev/null").expect("null"))
        .collect();
    let fds: Vec<_> = files.iter().map(AsFd::as_fd).collect();
    let raw = |fds: &[std::os::fd::BorrowedFd<'_>]| fds.iter().map(|f| f.as_raw_fd()).collect();
    let piped = super::Hold {
        stdin: true,
        ..held_pipes()
    };
    let (hold, left) = piped.by_name(&fds, false);
    assert_eq!(hold.descriptors(), 3);
    let expected: Vec<i32> = raw(&[fds[0], fds[2], fds[4]]);
    assert_eq!(raw(&left), expected);
    let terminal = super::Hold {
        terminal: true,
        streams: held_pipes().streams.split_off(1),
        ..held_pipes()
    };
    let (hold, left) = terminal.by_name(&fds[..1], true);
    assert!(left.is_empty());
    assert_eq!(hold.descriptors_at_start(), 0);
    let unnamed = super::Hold {
        streams: vec![super::HeldStream {
            file: String::new(),
            ..held_pipes().streams[0].clone()
        }],
        ..held_pipes()
    };
    let (hold, left) = unnamed.by_name(&fds[..2], false);
    assert_eq!((hold, left.len()), (unnamed.clone(), 2));
}

#[test]
fn a_file_kept_by_name_is_never_reached_through_a_symlink_or_another_file_in_its_place() {
    use super::handover::kept_file::KeptFile;
    use std::os::unix::fs::PermissionsExt;
    let d = std::env::temp_dir().join(format!("taskhost-kept-by-name-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("dir");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).expect("mode");
    std::fs::write(d.join("out.log"), b"kept").expect("file");
    std::fs::write(d.join("victim"), b"untouched").expect("victim");
    std::os::unix::fs::symlink(d.join("victim"), d.join("link.log")).expect("link");
    let dir = std::sync::Arc::new(std::os::fd::OwnedFd::from(
        std::fs::File::open(&d).expect("open dir"),
    ));
    let kept = KeptFile::named(&dir, "out.log");
    assert!(kept.is_there());
    assert_eq!(
        kept.with(|f| f.metadata().map(|m| m.len()).ok()),
        Some(Some(4))
    );
    assert!(matches!(KeptFile::named(&dir, "link.log"), KeptFile::None));
    assert!(matches!(KeptFile::named(&dir, "../victim"), KeptFile::None));
    std::fs::rename(d.join("out.log"), d.join("aside")).expect("aside");
    std::fs::write(d.join("out.log"), b"another").expect("another");
    assert!(kept.with(|_| ()).is_none(), "another file in its place");
    assert!(!kept.is_there(), "another file in its place");
    std::fs::remove_file(d.join("out.log")).expect("removed");
    std::os::unix::fs::symlink(d.join("aside"), d.join("out.log")).expect("a link to it");
    assert!(!kept.is_there(), "a link to the file in its place");
    assert!(kept.handed().is_none());
    assert_eq!(
        std::fs::read(d.join("victim")).expect("victim"),
        b"untouched"
    );
    std::fs::remove_dir_all(&d).expect("cleaned");
}
