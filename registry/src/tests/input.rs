//! write and peek: input to a live task, and unread output looked at without consuming it.

use super::*;
use crate::{MAX_INPUT_BYTES, RegistryError};

/// A stream task that takes input: what is written is recorded, and `eof` closes the input.
fn interactive(p: &Probe, input: &Arc<Mutex<Vec<(String, bool)>>>) -> TaskStart {
    let (p, input) = (p.clone(), input.clone());
    TaskStart::new("pty", "repl", move || {
        let (hooks, state) = p.hooks();
        let peek_state = state.clone();
        Ok(hooks
            .with_reader(move || std::mem::take(&mut state.lock().unwrap().output))
            .with_peeker(move || peek_state.lock().unwrap().output.clone())
            .with_writer(move |bytes: &[u8], eof: bool| {
                input
                    .lock()
                    .unwrap()
                    .push((String::from_utf8_lossy(bytes).into_owned(), eof));
                Ok(())
            }))
    })
}

#[tokio::test]
async fn input_reaches_a_live_task_as_written_with_its_end() {
    let (reg, _s) = registry();
    let (p, input) = (Probe::new(), Arc::default());
    let id = reg.start(interactive(&p, &input)).unwrap();
    reg.write(id.as_str(), None, b"x = 1\n", false).unwrap();
    reg.write(id.as_str(), None, b"", true).unwrap();
    assert_eq!(
        *input.lock().unwrap(),
        vec![("x = 1\n".to_owned(), false), (String::new(), true)]
    );
}

#[tokio::test]
async fn input_to_a_task_without_a_writer_a_settled_task_or_too_much_is_refused() {
    let (reg, _s) = registry();
    let plain = Probe::new();
    let no_input = reg.start(plain.stream_task("bash", "x")).unwrap();
    assert_eq!(
        reg.write(no_input.as_str(), None, b"y\n", false),
        Err(RegistryError::NoInput(no_input.clone()))
    );
    assert_eq!(
        RegistryError::NoInput(no_input.clone()).to_string(),
        format!("task {no_input} takes no input")
    );

    let (p, input) = (Probe::new(), Arc::default());
    let id = reg.start(interactive(&p, &input)).unwrap();
    let big = vec![b'a'; MAX_INPUT_BYTES + 1];
    let refused = reg.write(id.as_str(), None, &big, false).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "input too large: 65537 bytes (limit: 65536 bytes per call)"
    );
    assert!(input.lock().unwrap().is_empty(), "nothing was delivered");
    reg.write(id.as_str(), None, &big[1..], false).unwrap();

    p.settle(TaskOutcome::completed());
    settle_pass().await;
    let refused = reg.write(id.as_str(), None, b"late\n", false).unwrap_err();
    assert_eq!(
        refused.to_string(),
        format!("task {id} has already finished and takes no more input")
    );
    assert_eq!(
        reg.write("pty-99", None, b"x", false)
            .unwrap_err()
            .to_string(),
        "unknown task pty-99"
    );
}

#[tokio::test]
async fn input_to_another_sessions_task_is_refused() {
    let (reg, _s) = registry();
    let (a, b) = (agent(&reg, "a", "s-a"), agent(&reg, "b", "s-b"));
    let (p, input) = (Probe::new(), Arc::default());
    let id = reg.start(interactive(&p, &input).owner(a.clone())).unwrap();
    assert_eq!(
        reg.write(id.as_str(), Some(&b), b"rm -rf /\n", false),
        Err(RegistryError::ForeignTask(id.clone()))
    );
    assert!(input.lock().unwrap().is_empty());
    reg.write(id.as_str(), Some(&a), b"ok\n", false).unwrap();
}

#[tokio::test]
async fn a_writer_error_or_panic_is_the_writes_error() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    let q = p.clone();
    let id = reg
        .start(TaskStart::new("pty", "x", move || {
            let (hooks, _) = q.hooks();
            Ok(hooks.with_writer(move |_: &[u8], _| {
                let mut n = c.lock().unwrap();
                *n += 1;
                if *n == 1 {
                    Err(ProducerError("the program is not reading its input".into()))
                } else {
                    panic!("writer broke")
                }
            }))
        }))
        .unwrap();
    assert_eq!(
        reg.write(id.as_str(), None, b"a", false)
            .unwrap_err()
            .to_string(),
        "the program is not reading its input"
    );
    assert_eq!(
        reg.write(id.as_str(), None, b"a", false)
            .unwrap_err()
            .to_string(),
        "input writer panicked: writer broke"
    );
    assert_eq!(
        reg.get(id.as_str(), None).unwrap().status,
        crate::TaskStatus::Running
    );
}

#[tokio::test]
async fn a_peek_leaves_the_output_unread_and_the_task_unreported() {
    let (reg, _s) = registry();
    let (p, input) = (Probe::new(), Arc::default());
    let id = reg.start(interactive(&p, &input)).unwrap();
    p.push("ready on port 80");
    for _ in 0..2 {
        assert_eq!(
            reg.peek(id.as_str(), None).unwrap().text,
            "ready on port 80"
        );
    }
    p.push("80\n");
    p.settle(TaskOutcome::completed());
    settle_pass().await;
    let peeked = reg.peek(id.as_str(), None).unwrap();
    assert_eq!(peeked.text, "ready on port 8080\n");
    assert!(!peeked.snapshot.reported, "a peek reports nothing");
    assert_eq!(
        reg.read(id.as_str(), None).unwrap().text,
        "ready on port 8080\n"
    );
    assert_eq!(reg.peek(id.as_str(), None).unwrap().text, "");
}

#[tokio::test]
async fn a_peek_of_a_final_task_or_a_stream_without_a_peeker_is_refused() {
    let (reg, _s) = registry();
    let p = Probe::new();
    let final_id = reg.start(p.final_task("subagent", "x")).unwrap();
    assert_eq!(
        reg.peek(final_id.as_str(), None),
        Err(RegistryError::NotStream(final_id.clone()))
    );
    let q = Probe::new();
    let stream_id = reg.start(q.stream_task("bash", "x")).unwrap();
    assert_eq!(
        reg.peek(stream_id.as_str(), None),
        Err(RegistryError::NotWatchable(stream_id.clone()))
    );
}
