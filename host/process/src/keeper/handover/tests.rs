//! Protocol 5's typed holds beside protocol 4's named ones: a peer of either reads what the other
//! sends it, in both directions (a host and its keeper, a keeper and a successor); protocol 7's
//! holds kept on after a handover beside the earlier protocols' forgotten ones.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use serde::{Deserialize, Serialize};

use super::held::{Setup, held};
use super::hold::{HeldAs, HeldStream, Hold};
use crate::Exit;
use crate::keeper::fds::{self, Receiver};
use crate::keeper::shared::{Shared, State};
use crate::keeper::wire::{Launch, Report, Request, Slot, Streams};

/// A hold as protocol 4 sent it: its `task` a string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Hold4 {
    task: String,
    n: u64,
    tail_bytes: u64,
    grace_ms: u64,
    terminal: bool,
    streams: Vec<HeldStream>,
    stdin: bool,
}

/// Protocol 4's requests, as its build declared them.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Request4 {
    Spawn {
        id: u64,
        launch: Launch,
        streams: Streams,
    },
    Watch {
        pgid: i32,
    },
    Forget {
        pgid: i32,
    },
    Hold {
        pgid: i32,
        hold: Hold4,
    },
    Handover {
        grace_ms: u64,
        host: i64,
        listens: Vec<String>,
    },
    Mark {
        prefix: String,
    },
    NoHandover,
    Rename {
        pgid: i32,
        task: String,
    },
    SpawnHeld {
        id: u64,
        launch: Launch,
        streams: Streams,
        hold: Hold4,
    },
    KeptDir,
    Successor {
        protocol: u32,
    },
    Carry {
        id: u64,
        pgid: i32,
        hold: Hold4,
    },
}

/// Protocol 4's reports, as its build declared them.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Report4 {
    Spawned {
        id: u64,
        pid: i32,
        master: bool,
    },
    Refused {
        id: u64,
        cause: String,
    },
    Exited {
        id: u64,
        exit: Exit,
    },
    Adopt {
        id: u64,
        pgid: i32,
        exit: Option<Exit>,
        hold: Hold4,
    },
    Handed {
        host: i64,
        markers: Vec<String>,
        next_id: u64,
        listens: Vec<String>,
    },
}

/// One output stream, its read end travelling alone.
fn stream() -> HeldStream {
    HeldStream {
        cap: 1 << 20,
        kept: false,
        file: String::new(),
        pending: Vec::new(),
        dropped: 0,
    }
}

fn hold(held_as: HeldAs) -> Hold {
    Hold {
        held_as,
        n: 9,
        tail_bytes: 64_000,
        grace_ms: 3000,
        terminal: false,
        streams: vec![stream()],
        stdin: false,
    }
}

fn hold4(task: &str) -> Hold4 {
    Hold4 {
        task: task.to_owned(),
        n: 9,
        tail_bytes: 64_000,
        grace_ms: 3000,
        terminal: false,
        streams: vec![stream()],
        stdin: false,
    }
}

fn launch() -> Launch {
    Launch {
        program: "/bin/true".into(),
        args: Vec::new(),
        env: Vec::new(),
        cwd: None,
    }
}

/// `message` in a frame, as either protocol writes one.
fn frame4(message: &impl Serialize) -> Vec<u8> {
    let body = postcard::to_allocvec(message).expect("encodes");
    let mut frame = u32::try_from(body.len())
        .expect("short")
        .to_le_bytes()
        .to_vec();
    frame.extend(body);
    frame
}

/// An empty directory `name`-PID in the temporary directory.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

fn null() -> OwnedFd {
    OwnedFd::from(std::fs::File::open("/dev/null").expect("null"))
}

#[test]
fn protocol_4s_named_holds_read_as_typed_holds() {
    let foreground = Request4::Hold {
        pgid: 7,
        hold: hold4("foreground:3"),
    };
    let body = postcard::to_allocvec(&foreground).expect("encodes");
    assert_eq!(
        Request::decode(&body).map(Request::typed),
        Ok(Request::Hold {
            pgid: 7,
            hold: hold(HeldAs::Foreground(3)),
        })
    );
    let spawn = Request4::SpawnHeld {
        id: 1,
        launch: launch(),
        streams: Streams::Slots([Slot::Null; 3]),
        hold: hold4("bash-4"),
    };
    let body = postcard::to_allocvec(&spawn).expect("encodes");
    match Request::decode(&body).map(Request::typed) {
        Ok(Request::SpawnHeld { hold: h, .. }) => {
            assert_eq!(h, hold(HeldAs::Task("bash-4".into())))
        }
        other => panic!("a typed held start, not {other:?}"),
    }
    // A task whose name only looks like a foreground command's stays a task.
    let carry = Request4::Carry {
        id: 2,
        pgid: 8,
        hold: hold4("foreground:x"),
    };
    let body = postcard::to_allocvec(&carry).expect("encodes");
    match Request::decode(&body).map(Request::typed) {
        Ok(Request::Carry { hold: h, .. }) => {
            assert_eq!(h.held_as, HeldAs::Task("foreground:x".into()));
        }
        other => panic!("a typed carry, not {other:?}"),
    }
    let adopt = Report4::Adopt {
        id: 3,
        pgid: 9,
        exit: None,
        hold: hold4("foreground:12"),
    };
    let body = postcard::to_allocvec(&adopt).expect("encodes");
    match Report::decode(&body).map(Report::typed) {
        Ok(Report::Adopt { hold: h, .. }) => assert_eq!(h.held_as, HeldAs::Foreground(12)),
        other => panic!("a typed adopt, not {other:?}"),
    }
}

#[test]
fn typed_holds_go_to_a_peer_of_protocol_4_named_as_it_reads_them() {
    let typed = Request::Hold {
        pgid: 7,
        hold: hold(HeldAs::Foreground(3)),
    };
    let frame = typed.for_protocol(4).encode();
    assert_eq!(
        postcard::from_bytes::<Request4>(&frame[4..]),
        Ok(Request4::Hold {
            pgid: 7,
            hold: hold4("foreground:3"),
        })
    );
    let carry = Request::Carry {
        id: 1,
        pgid: 8,
        hold: hold(HeldAs::Task("bash-2".into())),
    };
    let frame = carry.for_protocol(4).encode();
    assert_eq!(
        postcard::from_bytes::<Request4>(&frame[4..]),
        Ok(Request4::Carry {
            id: 1,
            pgid: 8,
            hold: hold4("bash-2"),
        })
    );
    let adopt = Report::Adopt {
        id: 3,
        pgid: 9,
        exit: Some(Exit::Code(0)),
        hold: hold(HeldAs::Foreground(12)),
    };
    let frame = adopt.for_protocol(4).encode();
    assert_eq!(
        postcard::from_bytes::<Report4>(&frame[4..]),
        Ok(Report4::Adopt {
            id: 3,
            pgid: 9,
            exit: Some(Exit::Code(0)),
            hold: hold4("foreground:12"),
        })
    );
    // Protocol 5's own variants come after every one protocol 4 knows: such a peer never mistakes
    // one for another of its messages.
    let frame = Request::Hold {
        pgid: 7,
        hold: hold(HeldAs::Foreground(3)),
    }
    .encode();
    assert!(postcard::from_bytes::<Request4>(&frame[4..]).is_err());
}

/// A keeper whose host is gone, holding the foreground command `Foreground(3)` in group 4242.
fn keeper_holding() -> Shared {
    let (out, _host) = UnixStream::pair().expect("pair");
    let held = held(3, hold(HeldAs::Foreground(3)), vec![null()], None).expect("held");
    Shared {
        state: Mutex::new(State {
            out,
            ids: HashMap::new(),
            count: 0,
            host_gone: true,
            held: HashMap::from([(4242, held)]),
            handover: None,
            markers: Vec::new(),
            next_id: 4,
            kept_dir: None,
            carried: Vec::new(),
            watching: false,
        }),
        spawned: Condvar::new(),
    }
}

/// The first report a keeper hands a successor that says it speaks `protocol`, as it came.
fn first_handed(protocol: u32) -> Vec<u8> {
    hand_over_from(&keeper_holding(), protocol)
}

/// The first report `keeper` hands a successor that says it speaks `protocol`, as it came.
fn hand_over_from(keeper: &Shared, protocol: u32) -> Vec<u8> {
    let (keeper_end, successor) = UnixStream::pair().expect("pair");
    let hello = Request::Successor { protocol }.encode();
    fds::send(successor.as_fd(), &hello, &[]).expect("hello");
    let setup = Setup {
        grace: Duration::from_secs(1),
        host: 1,
        listener: null(),
        lock: null(),
        listens: Vec::new(),
    };
    let conn = super::wait::hand_over(keeper, &setup, keeper_end);
    assert!(conn.is_some(), "handed over");
    let mut frames = Receiver::new();
    frames
        .next(successor.as_fd())
        .expect("read")
        .expect("a report")
}

#[test]
fn a_keeper_hands_a_successor_of_protocol_4_its_holds_named_and_one_of_5_typed() {
    let old = first_handed(4);
    match postcard::from_bytes::<Report4>(&old) {
        Ok(Report4::Adopt { hold, .. }) => assert_eq!(hold, hold4("foreground:3")),
        other => panic!("an adopt protocol 4 reads, not {other:?}"),
    }
    match Report::decode(&first_handed(5)) {
        Ok(Report::Adopt { hold: h, .. }) => assert_eq!(h, hold(HeldAs::Foreground(3))),
        other => panic!("a typed adopt, not {other:?}"),
    }
}

#[test]
fn a_keeper_holds_on_what_it_hands_a_successor_of_protocol_7_and_forgets_it_for_one_of_6() {
    for (protocol, held_on) in [(6, false), (7, true)] {
        let keeper = keeper_holding();
        if let Some(held) = keeper.state.lock().held.get_mut(&4242) {
            held.hold.streams[0].pending = b"drained while no host ran".to_vec();
            held.hold.streams[0].dropped = 7;
        }
        match Report::decode(&hand_over_from(&keeper, protocol)) {
            Ok(Report::Adopt { hold, .. }) => {
                assert_eq!(hold.streams[0].pending, b"drained while no host ran");
            }
            other => panic!("an adopt, not {other:?}"),
        }
        let st = keeper.state.lock();
        let held = st.held.get(&4242);
        assert_eq!(held.is_some(), held_on, "protocol {protocol}");
        if let Some(held) = held {
            // What the successor took is not handed over again.
            assert!(held.hold.streams[0].pending.is_empty());
            assert_eq!(held.hold.streams[0].dropped, 0);
            assert_eq!(held.hold.held_as, HeldAs::Foreground(3));
        }
    }
}

/// A keeper of protocol 4 waiting at `path` for a successor: it hands over a foreground command
/// named as protocol 4 names it, says protocol 4 after `Handed`, and returns the next request.
fn keeper_of_protocol_4(listener: UnixListener) -> std::thread::JoinHandle<Request4> {
    std::thread::spawn(move || {
        let (conn, _) = listener.accept().expect("a successor");
        let mut frames = Receiver::new();
        let hello = frames.next(conn.as_fd()).expect("read").expect("hello");
        assert_eq!(
            postcard::from_bytes::<Request4>(&hello),
            Ok(Request4::Successor {
                protocol: crate::keeper::wire::PROTOCOL
            })
        );
        let adopt = Report4::Adopt {
            id: 3,
            pgid: 4242,
            exit: Some(Exit::Code(0)),
            hold: hold4("foreground:3"),
        };
        let null = null();
        fds::send(conn.as_fd(), &frame4(&adopt), &[null.as_fd()]).expect("adopt");
        let handed = Report4::Handed {
            host: 1,
            markers: Vec::new(),
            next_id: 4,
            listens: Vec::new(),
        };
        fds::send(conn.as_fd(), &frame4(&(handed, 4u32)), &[null.as_fd()]).expect("handed");
        let next = frames.next(conn.as_fd()).expect("read").expect("a request");
        postcard::from_bytes::<Request4>(&next).expect("protocol 4 reads it")
    })
}

/// An upgrade runs the new host against the keeper the old build started: the new host takes its
/// named holds as typed, and sends it holds named as it reads them.
#[test]
fn a_successor_adopts_a_keeper_of_protocol_4_and_sends_it_holds_named() {
    let dir = scratch("taskhost-handover-4");
    let path = dir.join("handover.sock");
    let old = keeper_of_protocol_4(UnixListener::bind(&path).expect("listen"));
    let (keeper, handed) = crate::keeper::Keeper::adopt(&path, || {}).expect("adopted");
    std::fs::remove_dir_all(&dir).expect("cleaned");
    assert_eq!(handed.tasks.len(), 1);
    assert_eq!(handed.tasks[0].hold.held_as, HeldAs::Foreground(3));
    let read_end = null();
    keeper.hold(
        4242,
        &hold(HeldAs::Task("bash-1".into())),
        &[read_end.as_fd()],
    );
    assert_eq!(
        old.join().expect("the old keeper"),
        Request4::Hold {
            pgid: 4242,
            hold: hold4("bash-1"),
        }
    );
    keeper.stop();
}

/// A successor knows the keeper it adopted by the pid the keeper says (protocol 7), not by the
/// connection's credentials: those are whoever made the listener's (the gone host, or after an
/// upgrade the successor itself, whose stop then waited for itself to be gone).
#[test]
fn an_adopted_keeper_is_known_by_the_pid_it_says_not_by_the_listeners_maker() {
    let dir = scratch("taskhost-handover-pid");
    let path = dir.join("handover.sock");
    let listener = UnixListener::bind(&path).expect("listen");
    let mut stand_in = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("a process to stand for the keeper");
    let pid = stand_in.id();
    let keeper = std::thread::spawn(move || {
        let (conn, _) = listener.accept().expect("a successor");
        Receiver::new()
            .next(conn.as_fd())
            .expect("read")
            .expect("hello");
        let handed = Report::Handed {
            host: 1,
            markers: Vec::new(),
            next_id: 4,
            listens: Vec::new(),
        };
        let frame = frame4(&(handed, crate::keeper::wire::PROTOCOL, pid));
        fds::send(conn.as_fd(), &frame, &[null().as_fd()]).expect("handed");
        conn
    });
    let (adopted, _) = crate::keeper::Keeper::adopt(&path, || {}).expect("adopted");
    let _conn = keeper.join().expect("the keeper");
    std::fs::remove_dir_all(&dir).expect("cleaned");
    assert_ne!(pid, std::process::id());
    assert_eq!(adopted.pid(), Some(pid));
    stand_in.kill().expect("kill");
    stand_in.wait().expect("reaped");
    adopted.stop();
}
