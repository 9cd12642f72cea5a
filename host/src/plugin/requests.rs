//! A plugin's requests copied into host types and checked: processes, agents, task declarations; and
//! the progress a foreground process reports.

use taskhost_abi::TaskDecl;
use taskhost_abi::{ProcessRequest, SubagentRequest};

/// The declaration's owning session, "" for an unowned task (the process service's key for spill files).
pub(crate) fn owner_session(decl: &TaskDecl) -> String {
    decl.owner_session
        .as_ref()
        .into_option()
        .map_or_else(String::new, |s| s.as_str().to_owned())
}

/// A plugin's agent request, copied into host types and checked.
pub(crate) fn subagent_run(r: &SubagentRequest) -> Result<crate::acp::SubagentRun, String> {
    let command: Vec<String> = r.command.iter().map(|c| c.as_str().to_owned()).collect();
    if command.first().is_none_or(String::is_empty) {
        return Err("subagent: the agent command is empty".to_owned());
    }
    let policy =
        crate::acp::PermissionPolicy::parse(r.permission_policy.as_str()).ok_or_else(|| {
            format!(
                "subagent: unknown permission_policy {:?} (expected reject or allow)",
                r.permission_policy.as_str()
            )
        })?;
    Ok(crate::acp::SubagentRun {
        command,
        cwd: r
            .cwd
            .as_ref()
            .into_option()
            .map(|c| std::path::PathBuf::from(c.as_str())),
        prompt: r.prompt.as_str().to_owned(),
        permission_policy: policy,
        grace: std::time::Duration::from_millis(r.grace_ms),
        setup_timeout: std::time::Duration::from_millis(r.setup_timeout_ms.max(1)),
        pass_env: r.pass_env.iter().map(|n| n.as_str().to_owned()).collect(),
    })
}

/// Tells `progress` (when the caller asked for it) how `process` is doing, at most ten times a second
/// and only when its output grew. Never ends: the caller drops it when the process settles.
pub(crate) async fn report_progress(
    process: &crate::process::Process,
    progress: Option<&super::call_scope::Progress>,
) -> std::convert::Infallible {
    let Some(progress) = progress else {
        return std::future::pending().await;
    };
    let mut reported = 0;
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        tick.tick().await;
        let (bytes, line) = process.progress();
        if bytes > reported {
            reported = bytes;
            progress(bytes as f64, line);
        }
    }
}

/// A plugin's process request, copied into host types.
pub(crate) fn process_spec(r: &ProcessRequest) -> crate::process::ProcessSpec {
    let mut spec = crate::process::ProcessSpec::new(r.command.as_str());
    spec.workdir = r
        .workdir
        .as_ref()
        .into_option()
        .map(|w| std::path::PathBuf::from(w.as_str()));
    spec.extra_env = r
        .extra_env
        .iter()
        .map(|t| (t.0.as_str().to_owned(), t.1.as_str().to_owned()))
        .collect();
    spec.grace = std::time::Duration::from_millis(r.grace_ms);
    spec.tail_bytes = usize::try_from(r.tail_bytes).unwrap_or(usize::MAX);
    spec.spill_cap = r.spill_cap_bytes;
    spec.tty = r.tty.then(|| crate::process::TtySize {
        cols: r.cols.max(1),
        rows: r.rows.max(1),
    });
    spec
}
