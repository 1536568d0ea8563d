//! Telling the accept loop to end, at once.
//!
//! The loop polls the listener with a timeout so that it notices a stop; without a wake-up, an
//! unmount waited out that timeout (100 ms of every `worldfs mount`'s end, and of every test
//! that mounts). An eventfd polled beside the listener ends the wait when the stop comes.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub(super) struct StopSignal {
    stopped: AtomicBool,
    /// `None` if the kernel gave no eventfd: the loop then notices the stop at its timeout.
    wake: Option<OwnedFd>,
}

impl StopSignal {
    pub(super) fn new() -> StopSignal {
        // SAFETY: eventfd has no memory arguments; a non-negative result is a new descriptor
        // that nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        StopSignal {
            stopped: AtomicBool::new(false),
            wake: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }),
        }
    }

    pub(super) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        if let Some(fd) = &self.wake {
            let one: u64 = 1;
            // SAFETY: writes the 8 bytes of `one` to a descriptor we own.
            unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }

    pub(super) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Waits up to `timeout` for `l` to become readable or for the stop; whether `l` is.
    pub(super) fn wait_readable(&self, l: &UnixListener, timeout: Duration) -> bool {
        let mut fds = [
            libc::pollfd {
                fd: l.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                // poll skips a negative descriptor.
                fd: self.wake.as_ref().map_or(-1, AsRawFd::as_raw_fd),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: two valid pollfds, for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        n > 0 && fds[0].revents & libc::POLLIN != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_stop_ends_the_wait_before_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let l = UnixListener::bind(dir.path().join("s")).unwrap();
        let stop = std::sync::Arc::new(StopSignal::new());
        let s = std::sync::Arc::clone(&stop);
        let t = std::thread::spawn(move || {
            let start = Instant::now();
            let readable = s.wait_readable(&l, Duration::from_secs(30));
            (readable, start.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        stop.stop();
        let (readable, waited) = t.join().unwrap();
        assert!(!readable);
        assert!(stop.is_stopped());
        // Far below the 30 s timeout: woken, not timed out (a loose bound, for a loaded machine).
        assert!(waited < Duration::from_secs(20), "waited {waited:?}");
    }
}
