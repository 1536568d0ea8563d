//! The queue between notify's thread and the watcher thread.
//!
//! Not a channel: a blocking receive on crossbeam's (or std's, which is a port of it) spins and
//! then yields the CPU a few times before it sleeps, once per wait, and the mount's own changes
//! echo back as two or three events per file created, each of which found the watcher waiting.
//! While a shell created small files through the mount on two cores, that waiting was a fifth
//! of the daemon's CPU time (`perf`: `sched_yield` and the channel's spin loop in
//! `worldfs-watch`), taken from the shell and the FUSE threads it was waiting for. Here the
//! watcher sleeps as soon as the queue is empty, and takes everything queued at once.

use parking_lot::{Condvar, Mutex};

/// An unbounded queue with one consumer that takes all of it at a time.
#[derive(Debug)]
pub struct Inbox<T> {
    queue: Mutex<Vec<T>>,
    ready: Condvar,
}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        Self {
            queue: Mutex::new(Vec::new()),
            ready: Condvar::new(),
        }
    }
}

impl<T> Inbox<T> {
    pub fn push(&self, item: T) {
        self.queue.lock().push(item);
        // Wakes the consumer only if it sleeps: no system call while it is busy.
        self.ready.notify_one();
    }

    /// Waits until something is queued, then moves all of it into `batch` (emptied first), in
    /// the order it came.
    pub fn take_all(&self, batch: &mut Vec<T>) {
        batch.clear();
        let mut queue = self.queue.lock();
        while queue.is_empty() {
            self.ready.wait(&mut queue);
        }
        // Swapping hands the consumer's emptied buffer back, so neither side allocates anew.
        std::mem::swap(&mut *queue, batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn takes_everything_queued_in_order() {
        let inbox = Inbox::default();
        for i in 0..5 {
            inbox.push(i);
        }
        let mut batch = vec![99];
        inbox.take_all(&mut batch);
        assert_eq!(batch, [0, 1, 2, 3, 4]);
        inbox.push(5);
        inbox.take_all(&mut batch);
        assert_eq!(batch, [5]);
    }

    #[test]
    fn a_waiting_consumer_wakes_for_items_pushed_later() {
        let inbox = Arc::new(Inbox::default());
        let consumer = {
            let inbox = inbox.clone();
            std::thread::spawn(move || {
                let (mut seen, mut batch) = (Vec::new(), Vec::new());
                while seen.len() < 1000 {
                    inbox.take_all(&mut batch);
                    seen.append(&mut batch);
                }
                seen
            })
        };
        for i in 0..1000 {
            inbox.push(i);
            if i % 100 == 0 {
                std::thread::yield_now();
            }
        }
        let seen = consumer.join().expect("consumer thread");
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
    }
}
