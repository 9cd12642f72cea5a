//! Standard output of the commands people run (`tasks`, `policy-check`, `follow`, ...), written as a
//! Unix tool writes it: a reader that went away (`taskhost follow ID | head`) ends the command at
//! once and quietly with success, as ripgrep does; any other failure to write ends it with one
//! message and exit code 1. Never the panic `println!` gives on both.

use std::io::Write;

/// Writes `bytes` to standard output and flushes them, ending the process as the module says when
/// that fails.
pub fn bytes(bytes: &[u8]) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("taskhost: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// Writes `text` and a newline to standard output, as [`bytes`] does.
pub fn line(text: &str) {
    bytes(format!("{text}\n").as_bytes());
}

/// `println!` through [`line()`].
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::line(&format!($($arg)*))
    };
}
