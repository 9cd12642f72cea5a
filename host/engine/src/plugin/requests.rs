//! A plugin's requests copied into the services' host types and checked: task declarations,
//! processes, agents, external work.

use taskhost_abi::{ExternalRequest, ProcessRequest, SubagentRequest, TaskDecl};

use crate::process::{ProcessSpec, TtySize};
use crate::services::TaskDeclaration;
use crate::services::acp::{PermissionPolicy, SubagentRun};
use crate::services::external::External;

/// A plugin's task declaration.
pub(crate) fn declaration(decl: &TaskDecl) -> TaskDeclaration {
    TaskDeclaration {
        kind: decl.kind.as_str().to_owned(),
        label: decl.label.as_str().to_owned(),
        output_limit_bytes: decl.output_limit_bytes.into_option(),
        owner_session: decl
            .owner_session
            .as_ref()
            .into_option()
            .map(|s| s.as_str().to_owned()),
        after: decl.after.iter().map(|a| a.as_str().to_owned()).collect(),
    }
}

/// A plugin's agent request, checked.
pub(crate) fn subagent_run(r: &SubagentRequest) -> Result<SubagentRun, String> {
    let command: Vec<String> = r.command.iter().map(|c| c.as_str().to_owned()).collect();
    if command.first().is_none_or(String::is_empty) {
        return Err("subagent: the agent command is empty".to_owned());
    }
    let policy = match r.permission_policy {
        taskhost_abi::PermissionPolicy::Reject => PermissionPolicy::Reject,
        taskhost_abi::PermissionPolicy::Allow => PermissionPolicy::Allow,
    };
    Ok(SubagentRun {
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
        home: r
            .home
            .as_ref()
            .into_option()
            .map(|h| std::path::PathBuf::from(h.as_str())),
    })
}

/// A plugin's process request.
pub(crate) fn process_spec(r: &ProcessRequest) -> ProcessSpec {
    let mut spec = ProcessSpec::new(r.command.as_str());
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
    spec.tty = r.tty.then(|| TtySize {
        cols: r.cols.max(1),
        rows: r.rows.max(1),
    });
    spec
}

/// A plugin's external work.
pub(crate) fn external(r: &ExternalRequest) -> External {
    External {
        start: r.start_command.as_str().to_owned(),
        poll: r.poll_command.as_str().to_owned(),
        cancel: r.cancel_command.as_str().to_owned(),
        output: r.output_path.as_str().to_owned(),
        poll_every: std::time::Duration::from_millis(r.poll_ms),
    }
}
