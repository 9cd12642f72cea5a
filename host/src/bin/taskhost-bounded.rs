//! `taskhost-bounded --bounds JSON -- PROGRAM [ARGS...]`: applies a principal's bounds to itself and
//! executes the program (see `taskhost_process::bounds`). The host starts every bounded process
//! through it when it sits beside the host's binary: it does only this, so it starts in a fraction of
//! the time the whole host binary takes. Exits 125, before the program runs, when a bound cannot be
//! applied.

use std::ffi::OsString;
use std::process::ExitCode;

use taskhost_process::bounds;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let error = bounds::enter_args(&args);
    eprintln!("taskhost-bounded: {error}");
    ExitCode::from(bounds::REFUSED_EXIT)
}
