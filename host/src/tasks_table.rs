//! The task table of `taskhost tasks` as people read it: fitted to the terminal's width (the
//! command cut to what is left), the status coloured on a terminal, times relative to now.

use std::path::Path;

use taskhost_store::TaskRecord;

/// How the table is drawn.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Style {
    /// The terminal's columns; `None` draws every command whole (a pipe, a file).
    pub(crate) width: Option<usize>,
    /// Colour the status (a terminal without `NO_COLOR`).
    pub(crate) colour: bool,
    /// Now, in milliseconds since the epoch.
    pub(crate) now_ms: u64,
}

impl Style {
    /// The style for stdout: its width and colour when it is a terminal.
    pub(crate) fn for_stdout(now_ms: u64) -> Self {
        let stdout = std::io::stdout();
        let terminal = std::io::IsTerminal::is_terminal(&stdout);
        let width = terminal
            .then(|| rustix::termios::tcgetwinsize(&stdout).ok())
            .flatten()
            .map(|size| usize::from(size.ws_col))
            .filter(|&cols| cols > 0);
        Self {
            width,
            colour: terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            now_ms,
        }
    }
}

/// The narrowest the command column is cut to.
const MIN_COMMAND: usize = 12;

/// The records as a table people read.
pub(crate) fn table(records: &[TaskRecord], dir: &Path, style: Style) -> String {
    if records.is_empty() {
        return format!("(no tasks in {})", dir.display());
    }
    let header = [
        "ID", "KIND", "OWNER", "STATUS", "EXIT", "STARTED", "ENDED", "COMMAND",
    ];
    let mut rows = vec![header.map(str::to_owned)];
    for r in records {
        rows.push([
            r.id.clone(),
            r.kind.clone(),
            r.owner.clone().unwrap_or_else(|| "-".into()),
            match r.expired_at_ms {
                Some(_) => format!("{} (expired)", r.status),
                None => r.status.clone(),
            },
            r.detail.clone().unwrap_or_else(|| "-".into()),
            ago(style.now_ms, r.started_at_ms),
            r.finished_at_ms
                .map_or_else(|| "-".into(), |t| ago(style.now_ms, t)),
            taskhost_registry::excerpt(&r.label).into_owned(),
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| {
            rows.iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let used: usize = widths.iter().map(|w| w + 2).sum();
    let room = style.width.map(|w| w.saturating_sub(used).max(MIN_COMMAND));
    rows.iter()
        .enumerate()
        .map(|(n, row)| line(row, &widths, room, style.colour && n > 0))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One row: the cells padded to their column, the status coloured, the command cut to `room`.
fn line(row: &[String; 8], widths: &[usize], room: Option<usize>, colour: bool) -> String {
    let mut line = String::new();
    for (c, cell) in row.iter().enumerate() {
        if c == 7 {
            line.push_str(&cut(cell, room));
            break;
        }
        let shown = match colour_of(cell) {
            Some(code) if c == 3 && colour => format!("\x1b[{code}m{cell}\x1b[0m"),
            _ => cell.clone(),
        };
        line.push_str(&shown);
        line.push_str(&" ".repeat(widths[c] - cell.chars().count() + 2));
    }
    line
}

/// `text` in at most `room` characters, its end replaced by `…` when cut.
fn cut(text: &str, room: Option<usize>) -> String {
    match room {
        Some(room) if text.chars().count() > room => {
            let kept: String = text.chars().take(room.saturating_sub(1)).collect();
            format!("{kept}…")
        }
        _ => text.to_owned(),
    }
}

/// The SGR colour of a status: green completed, red failed, yellow killed, magenta lost, cyan
/// while it runs.
fn colour_of(status: &str) -> Option<&'static str> {
    let name = status.split(' ').next().unwrap_or_default();
    Some(match name {
        "completed" => "32",
        "failed" => "31",
        "killed" => "33",
        "lost" => "35",
        "running" | "stopping" | "queued" => "36",
        _ => return None,
    })
}

/// `at` as people say it from `now`: `5s ago`, `3m ago`, `2h ago`, `4d ago`.
pub(crate) fn ago(now_ms: u64, at_ms: u64) -> String {
    let seconds = now_ms.saturating_sub(at_ms) / 1000;
    match seconds {
        0..60 => format!("{seconds}s ago"),
        60..3600 => format!("{}m ago", seconds / 60),
        3600..172_800 => format!("{}h ago", seconds / 3600),
        _ => format!("{}d ago", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_relative_to_now() {
        let now = 10 * 86_400_000;
        assert_eq!(ago(now, now - 5_000), "5s ago");
        assert_eq!(ago(now, now - 185_000), "3m ago");
        assert_eq!(ago(now, now - 7_200_000), "2h ago");
        assert_eq!(ago(now, now - 4 * 86_400_000), "4d ago");
        assert_eq!(ago(now, now + 1_000), "0s ago");
    }

    #[test]
    fn a_command_is_cut_to_the_room_left() {
        assert_eq!(cut("make -j4 test", Some(6)), "make …");
        assert_eq!(cut("make", Some(6)), "make");
        assert_eq!(cut("make -j4 test", None), "make -j4 test");
    }
}
