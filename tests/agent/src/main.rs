//! A scripted ACP agent: what it does is read from the prompt text, so tests are deterministic.
//!
//! - `echo: TEXT` answers TEXT (in chunks split at `|`) and ends the turn.
//! - `wait` streams "thinking" and waits until cancelled (then answers `cancelled`), or 60 s.
//! - `refuse`, `max-tokens` end the turn with that stop reason.
//! - `ask` asks permission for a tool call and answers with the option the client chose;
//!   `ask-after-cancel` does so once the turn is cancelled, and ends it normally.
//! - `crash` exits with code 3 mid-turn; `garbage` writes a line that is not JSON-RPC and exits.
//! - with `TASKHOST_TEST_AGENT_HANG_INIT=1` it never answers `initialize`.
//! - with `TASKHOST_TEST_AGENT_MARK=FILE` it appends where it is to FILE, a line each: `started`,
//!   then `waiting` once a `wait` or `ask-after-cancel` turn waits for its cancel, so a test can act
//!   at that point instead of after a pause.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, ContentChunk, InitializeRequest,
    InitializeResponse, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse,
    SessionId, SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallUpdate, ToolCallUpdateFields,
};
use agent_client_protocol::{Agent, Result, Stdio};
use tokio_util::sync::CancellationToken;

/// Appends `line` to the file `TASKHOST_TEST_AGENT_MARK` names, if it names one.
fn mark(line: &str) {
    use std::io::Write;
    if let Some(path) = std::env::var_os("TASKHOST_TEST_AGENT_MARK") {
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| writeln!(f, "{line}"));
    }
}

fn prompt_text(r: &PromptRequest) -> String {
    r.prompt
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}

#[tokio::main]
async fn main() -> Result<()> {
    mark("started");
    let hang_init = std::env::var_os("TASKHOST_TEST_AGENT_HANG_INIT").is_some();
    let cancels: Arc<Mutex<HashMap<String, CancellationToken>>> = Arc::default();
    let on_cancel = cancels.clone();
    Agent
        .v1()
        .name("taskhost-test-agent")
        .on_receive_request(
            async move |r: InitializeRequest, responder, _cx| {
                if hang_init {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                responder.respond(
                    InitializeResponse::new(r.protocol_version)
                        .agent_capabilities(AgentCapabilities::new()),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_r: NewSessionRequest, responder, _cx| {
                responder.respond(NewSessionResponse::new(SessionId::new("scripted-1")))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: PromptRequest, responder, cx| {
                let token = CancellationToken::new();
                cancels
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(r.session_id.to_string(), token.clone());
                let cx2 = cx.clone();
                // Spawned: a handler that waited here would keep session/cancel from being read.
                cx.spawn(async move {
                    let text = prompt_text(&r);
                    let say = |s: &str| {
                        cx2.send_notification(SessionNotification::new(
                            r.session_id.clone(),
                            SessionUpdate::AgentMessageChunk(ContentChunk::new(
                                ContentBlock::Text(TextContent::new(s)),
                            )),
                        ))
                    };
                    let stop = if let Some(answer) = text.strip_prefix("echo: ") {
                        for chunk in answer.split('|') {
                            say(chunk)?;
                        }
                        StopReason::EndTurn
                    } else if text == "wait" {
                        say("thinking")?;
                        mark("waiting");
                        tokio::select! {
                            () = token.cancelled() => StopReason::Cancelled,
                            () = tokio::time::sleep(Duration::from_secs(60)) => StopReason::EndTurn,
                        }
                    } else if text == "ask" || text == "ask-after-cancel" {
                        if text == "ask-after-cancel" {
                            mark("waiting");
                            tokio::select! {
                                () = token.cancelled() => {}
                                () = tokio::time::sleep(Duration::from_secs(60)) => {}
                            }
                        }
                        let options = vec![
                            PermissionOption::new(
                                "allow-once",
                                "Allow",
                                PermissionOptionKind::AllowOnce,
                            ),
                            PermissionOption::new(
                                "reject-once",
                                "Reject",
                                PermissionOptionKind::RejectOnce,
                            ),
                        ];
                        let tool_call = ToolCallUpdate::new("call-1", ToolCallUpdateFields::new());
                        let asked =
                            RequestPermissionRequest::new(r.session_id.clone(), tool_call, options);
                        let answer = cx2.send_request(asked).block_task().await?;
                        match answer.outcome {
                            RequestPermissionOutcome::Selected(s) => {
                                say(&format!("permission: {}", s.option_id))?
                            }
                            _ => say("permission: cancelled")?,
                        }
                        StopReason::EndTurn
                    } else if text == "refuse" {
                        StopReason::Refusal
                    } else if text == "max-tokens" {
                        say("partial")?;
                        StopReason::MaxTokens
                    } else if text == "crash" {
                        std::process::exit(3);
                    } else if text == "garbage" {
                        println!("this is not json-rpc");
                        std::process::exit(0);
                    } else {
                        say(&format!("unknown script: {text}"))?;
                        StopReason::EndTurn
                    };
                    responder.respond(PromptResponse::new(stop))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx| {
                if let Some(t) = on_cancel
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&n.session_id.to_string())
                {
                    t.cancel();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await
}
