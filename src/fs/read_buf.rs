//! One read buffer per FUSE thread, kept from one READ to the next.
//!
//! Daemon I/O answers each READ (up to 1 MiB, `max_pages`) from a buffer the size of the
//! request. A fresh `vec![0; size]` per request cost, at that size, an `mmap` and `munmap` from
//! the allocator, a page fault for every 4 KiB of it and a memset, for every MiB read. The buffer
//! here grows to the largest request seen and is then only written by `pread`.

use std::cell::RefCell;

thread_local! {
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's buffer, at least `size` bytes long.
pub fn with<R>(size: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        if b.len() < size {
            b.resize(size, 0);
        }
        f(&mut b[..size])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_largest_request_and_keeps_it() {
        let first = with(8, |b| {
            b.copy_from_slice(b"12345678");
            b.as_ptr() as usize
        });
        // A smaller request gets the same memory, as long as it was.
        let (again, len) = with(4, |b| (b.as_ptr() as usize, b.len()));
        assert_eq!((again, len), (first, 4));
        assert_eq!(with(16, |b| b.len()), 16);
        // Another thread has its own.
        let other = std::thread::spawn(|| with(4, |b| b.len()))
            .join()
            .unwrap_or_else(|_| panic!("thread"));
        assert_eq!(other, 4);
    }
}
