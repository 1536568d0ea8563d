//! Pauses named by environment variables, in debug builds only: a test sets one to see every
//! time the race that a loaded machine shows once in hundreds of runs (a caller gone before its
//! request is emitted, a world that looks processes up late). Release builds never read them.

use std::sync::OnceLock;
use std::time::Duration;

/// Sleeps as many milliseconds as `var` says (read once, into `cell`); nothing when it is unset
/// or not a number, or in a release build.
#[inline(always)]
pub fn pause(cell: &'static OnceLock<Option<Duration>>, var: &str) {
    if cfg!(debug_assertions) {
        let pause = cell.get_or_init(|| {
            std::env::var(var)
                .ok()
                .and_then(|v| v.parse().ok())
                .map(Duration::from_millis)
        });
        if let Some(d) = pause {
            std::thread::sleep(*d);
        }
    }
}
