//! Messages for the user on stderr, from the daemons (`worldfs mount`, its watchdog, `worldfs
//! proxy`).
//!
//! `eprintln!` does not do for them: it panics when stderr cannot be written, and a daemon
//! that `worldfs run` started writes to a log another process may have stopped reading; and it
//! writes a line in pieces (one write per part of the format), so two daemons sharing a log
//! file interleave halves of lines. [`say!`](crate::say!) writes each line whole, in one
//! write(2), and a message that cannot be written is dropped.

use std::fmt;
use std::io::Write;

/// Writes `args` and a newline to stderr in one write; errors are ignored.
pub fn line(args: fmt::Arguments<'_>) {
    let mut s = args.to_string();
    s.push('\n');
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}

/// `eprintln!` for daemons: the line is written whole, and never panics (see the module).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say::line(format_args!($($arg)*))
    };
}
