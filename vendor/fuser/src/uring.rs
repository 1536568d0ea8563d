//! FUSE-over-io_uring transport (Linux 6.14+).
//!
//! **worldfs patch to fuser 0.18, meant for upstream.** Everything new lives in this file; the
//! rest of the crate changes only where it must: `Session` remembers whether INIT negotiated
//! `FUSE_OVER_IO_URING` and starts [`start`] from `run`, `ReplySender` gains a `Ring` variant,
//! and `RequestWithSender` can carry a ring sender instead of the `/dev/fuse` channel.
//!
//! Why: with `/dev/fuse` the kernel queues a request on one shared list and wakes whichever
//! daemon thread sleeps in `read`, often on another CPU; the reply then wakes the caller back
//! across CPUs. On small VMs those two cross-CPU wakeups (IPIs, VM exits) dominate the latency
//! of metadata round trips. With io_uring the kernel keeps one queue per CPU, puts a request on
//! the queue of the CPU the caller runs on, and completes it to the thread serving that queue;
//! pinning that thread to the same CPU keeps both wakeups local.
//!
//! Protocol (see the kernel's `Documentation/filesystems/fuse-io-uring.rst`,
//! `fs/fuse/dev_uring.c` and `include/uapi/linux/fuse.h`):
//! - INIT (on `/dev/fuse`) negotiates `FUSE_OVER_IO_URING`; the kernel offers it only while the
//!   module parameter `enable_uring` is set. Until every queue has an entry registered, the
//!   kernel holds requests back, so once negotiated, the ring must come up (or the session end).
//! - Each queue `qid` (one per *possible* CPU) registers entries with
//!   `FUSE_IO_URING_CMD_REGISTER`: an SQE128 `IORING_OP_URING_CMD` on the `/dev/fuse` fd whose
//!   80-byte command area holds `struct fuse_uring_cmd_req`, and whose `addr`/`len` point at an
//!   `iovec[2]`: a header buffer (`struct fuse_uring_req_header`) and a payload buffer of at
//!   least the connection's maximum payload.
//! - A CQE with result 0 means a request sits in the entry: `fuse_in_header` in `in_out`, the
//!   first (per-opcode) argument in `op_in`, the rest in the payload (`payload_sz` bytes).
//! - The reply goes into the same buffers (`fuse_out_header` in `in_out`, everything after it
//!   in the payload, `payload_sz` set) and is sent with `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`
//!   carrying the entry's `commit_id`; its completion is the next request.
//! - FORGET, INTERRUPT and notifications keep using `/dev/fuse`, so the reader threads stay.
//!
//! fuser's parser wants the contiguous `/dev/fuse` layout, so each request is rebuilt as
//! `in_header ++ op_in[..n] ++ payload`, where `n` follows from `in_header.len` (the kernel sets
//! it to the size of all arguments, as for `/dev/fuse`).
//!
//! Replies: a handler normally replies before it returns, on the queue thread, and the reply is
//! written straight into the entry's buffers. A reply may also arrive later from another thread
//! (a filesystem that defers replies): the queue thread then waits for it before committing, so
//! it is correct but serialises that queue; filesystems that defer replies should not use the
//! ring.

use std::io;
use std::io::IoSlice;
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::thread::JoinHandle;

use io_uring::IoUring;
use io_uring::cqueue;
use io_uring::opcode;
use io_uring::squeue;
use io_uring::types;
use log::debug;
use log::error;
use log::warn;
use nix::unistd::Uid;
use parking_lot::Condvar;
use parking_lot::Mutex;

use crate::Filesystem;
use crate::channel::Channel;
use crate::channel::ChannelSender;
use crate::ll::Operation;
use crate::passthrough::BackingId;
use crate::request::RequestWithSender;
use crate::session::FilesystemHolder;
use crate::session::SessionACL;
use crate::session::SessionEventLoop;

const FUSE_IO_URING_CMD_REGISTER: u32 = 1;
const FUSE_IO_URING_CMD_COMMIT_AND_FETCH: u32 = 2;

const IN_OUT_HEADER_SZ: usize = 128;
const OP_IN_OUT_SZ: usize = 128;
const IN_HEADER_SZ: usize = 40;
const OUT_HEADER_SZ: usize = 16;

/// Entries per queue. One thread serves a queue and handles its entries one after the other;
/// more than one entry lets the kernel hand over the next request while the thread is busy.
const QUEUE_DEPTH: usize = 4;

/// `struct fuse_uring_ent_in_out`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct EntInOut {
    flags: u64,
    /// To be echoed in the COMMIT_AND_FETCH command.
    commit_id: u64,
    /// Bytes valid in the payload buffer, in either direction.
    payload_sz: u32,
    padding: u32,
    reserved: u64,
}

/// `struct fuse_uring_req_header`.
#[repr(C)]
#[derive(Debug)]
struct ReqHeader {
    in_out: [u8; IN_OUT_HEADER_SZ],
    op_in: [u8; OP_IN_OUT_SZ],
    ent_in_out: EntInOut,
}

const _: () = assert!(size_of::<ReqHeader>() == 288);
const _: () = assert!(size_of::<EntInOut>() == 32);
// The `len` fix-up in `uring_cmd` relies on the SQE layout.
const _: () = assert!(size_of::<squeue::Entry128>() == 128);

/// `struct fuse_uring_cmd_req`, in the first bytes of the 80-byte SQE command area.
fn cmd_req(commit_id: u64, qid: u16) -> [u8; 80] {
    let mut cmd = [0u8; 80];
    // flags (u64) stays 0.
    cmd[8..16].copy_from_slice(&commit_id.to_ne_bytes());
    cmd[16..18].copy_from_slice(&qid.to_ne_bytes());
    cmd
}

/// The sizes the ring needs, known once INIT has been answered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingParams {
    /// Payload buffer size per entry: at least the kernel's `max(FUSE_MIN_READ_BUFFER,
    /// max_write, max_pages * PAGE_SIZE)`, or REGISTER is rejected.
    pub(crate) payload_size: usize,
}

impl RingParams {
    pub(crate) fn new(max_write: u32, max_readahead: u32) -> Self {
        let page = page_size::get();
        // max_pages as fuser requests it covers max(max_write, max_readahead), rounded up.
        let biggest = max_write.max(max_readahead) as usize;
        let pages = biggest.div_ceil(page) * page;
        // FUSE_MIN_READ_BUFFER is 8192.
        Self {
            payload_size: pages.max(biggest).max(8192),
        }
    }
}

/// Number of queues the kernel expects: one per possible CPU (`num_possible_cpus()`), since it
/// picks the queue by the CPU the caller runs on and waits for every queue to register.
fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let mut max: Option<usize> = None;
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let last = part.rsplit('-').next().unwrap_or(part);
        let n: usize = last.parse().map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("/sys/devices/system/cpu/possible: {text:?}: {e}"),
            )
        })?;
        max = Some(max.map_or(n, |m: usize| m.max(n)));
    }
    max.map(|m| m + 1).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "/sys/devices/system/cpu/possible is empty",
        )
    })
}

/// Whether this process can create the kind of ring the transport needs (io_uring may be
/// disabled by `kernel.io_uring_disabled` or a seccomp filter). Cheap; meant to be asked before
/// negotiating `FUSE_OVER_IO_URING`, since a negotiated ring that cannot start ends the session.
pub fn io_uring_usable() -> io::Result<()> {
    IoUring::<squeue::Entry128, cqueue::Entry>::builder()
        .build(2)
        .map(drop)
}

/// Reply state of one ring entry, shared between its queue thread and the reply sender.
#[derive(Debug)]
struct Slot {
    state: Mutex<SlotState>,
    replied: Condvar,
}

#[derive(Debug)]
struct SlotState {
    /// The entry's buffers; owned by the queue thread, which touches them only while no reply
    /// is outstanding (`awaiting == false`).
    header: *mut ReqHeader,
    payload: *mut u8,
    payload_len: usize,
    /// A request was handed to the filesystem and its reply has not been written yet.
    awaiting: bool,
}

// SAFETY: the raw pointers are only dereferenced under the mutex while `awaiting` is set, and
// the queue thread keeps the buffers alive and untouched until `awaiting` is cleared.
unsafe impl Send for SlotState {}

/// Sends a reply into a ring entry (see the module docs). Clones share the entry; only the
/// first reply is taken.
#[derive(Debug, Clone)]
pub(crate) struct RingReplySender {
    slot: Arc<Slot>,
    /// For backing-file ioctls, which still go to `/dev/fuse`.
    ch: ChannelSender,
}

impl RingReplySender {
    pub(crate) fn send(&self, data: &[IoSlice<'_>]) -> io::Result<()> {
        let mut st = self.slot.state.lock();
        if !st.awaiting {
            return Err(io::Error::other("ring entry already replied to"));
        }
        let total: usize = data.iter().map(|s| s.len()).sum();
        let result = if total < OUT_HEADER_SZ {
            Err(io::Error::other(format!(
                "reply of {total} bytes has no header"
            )))
        } else if total - OUT_HEADER_SZ > st.payload_len {
            Err(io::Error::other(format!(
                "reply payload of {} bytes exceeds the ring buffer ({} bytes)",
                total - OUT_HEADER_SZ,
                st.payload_len
            )))
        } else {
            Ok(())
        };
        // SAFETY: `awaiting` is set, so the queue thread leaves the buffers to us (see SlotState).
        let header = unsafe { &mut *st.header };
        let payload = unsafe { std::slice::from_raw_parts_mut(st.payload, st.payload_len) };
        match &result {
            Ok(()) => {
                let mut pos = 0usize;
                for s in data {
                    let mut bytes: &[u8] = s;
                    if pos < OUT_HEADER_SZ {
                        let n = bytes.len().min(OUT_HEADER_SZ - pos);
                        header.in_out[pos..pos + n].copy_from_slice(&bytes[..n]);
                        pos += n;
                        bytes = &bytes[n..];
                    }
                    let off = pos - OUT_HEADER_SZ;
                    payload[off..off + bytes.len()].copy_from_slice(bytes);
                    pos += bytes.len();
                }
                header.ent_in_out.payload_sz = (total - OUT_HEADER_SZ) as u32;
            }
            Err(_) => {
                // Still answer, so the request does not hang: EIO with the request's id, which
                // the header already holds at bytes 8..16 (first slice) when it was written.
                let unique = data
                    .first()
                    .filter(|s| s.len() >= OUT_HEADER_SZ)
                    .map(|s| &s[8..16])
                    .unwrap_or(&[0; 8]);
                header.in_out[..4].copy_from_slice(&(OUT_HEADER_SZ as u32).to_ne_bytes());
                header.in_out[4..8].copy_from_slice(&(-libc::EIO).to_ne_bytes());
                header.in_out[8..16].copy_from_slice(unique);
                header.ent_in_out.payload_sz = 0;
            }
        }
        st.awaiting = false;
        self.slot.replied.notify_one();
        result
    }

    pub(crate) fn open_backing(&self, fd: std::os::fd::BorrowedFd<'_>) -> io::Result<BackingId> {
        self.ch.open_backing(fd)
    }

    pub(crate) unsafe fn wrap_backing(&self, id: u32) -> BackingId {
        unsafe { self.ch.wrap_backing(id) }
    }
}

/// One registered ring entry and its buffers. The buffers are raw allocations because the
/// kernel and the reply sender write into them behind Rust's back; the queue thread reads them
/// only while no command is in flight and no reply is outstanding.
struct Entry {
    header: *mut ReqHeader,
    payload: *mut u8,
    payload_len: usize,
    /// Passed to the kernel by address; must stay put while the entry is registered.
    iov: Box<[libc::iovec; 2]>,
    slot: Arc<Slot>,
    /// The command in flight, to resubmit after EINTR/EAGAIN.
    last_cmd: u32,
    commit_id: u64,
    /// The kernel has torn the entry down (ENOTCONN): the connection is gone.
    dead: bool,
}

impl Entry {
    fn new(payload_len: usize) -> Self {
        let header = Box::into_raw(Box::new(ReqHeader {
            in_out: [0; IN_OUT_HEADER_SZ],
            op_in: [0; OP_IN_OUT_SZ],
            ent_in_out: EntInOut::default(),
        }));
        // Zeroed lazily by the allocator: untouched pages of a large payload cost nothing.
        let payload = Box::into_raw(vec![0u8; payload_len].into_boxed_slice()).cast::<u8>();
        let iov = Box::new([
            libc::iovec {
                iov_base: header.cast(),
                iov_len: size_of::<ReqHeader>(),
            },
            libc::iovec {
                iov_base: payload.cast(),
                iov_len: payload_len,
            },
        ]);
        let slot = Arc::new(Slot {
            state: Mutex::new(SlotState {
                header,
                payload,
                payload_len,
                awaiting: false,
            }),
            replied: Condvar::new(),
        });
        Entry {
            header,
            payload,
            payload_len,
            iov,
            slot,
            last_cmd: FUSE_IO_URING_CMD_REGISTER,
            commit_id: 0,
            dead: false,
        }
    }

    /// SAFETY: only while the kernel and the reply sender leave the entry alone.
    unsafe fn header(&mut self) -> &mut ReqHeader {
        unsafe { &mut *self.header }
    }

    /// SAFETY: as for `header`.
    unsafe fn payload(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.payload, self.payload_len) }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these exact types and sizes; the queue thread drops
        // entries only once the kernel has released them (see `Queue::run`).
        unsafe {
            drop(Box::from_raw(self.header));
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.payload,
                self.payload_len,
            )));
        }
    }
}

/// Starts one pinned thread per queue, registers every entry and returns once all queues have
/// registered (or one failed, in which case the error is returned and the session must end:
/// the kernel holds requests back until the ring is complete).
pub(crate) fn start<FS: Filesystem>(
    params: RingParams,
    ch: &Channel,
    filesystem: &Arc<FilesystemHolder<FS>>,
    allowed: SessionACL,
    session_owner: Uid,
) -> io::Result<Vec<JoinHandle<io::Result<()>>>> {
    let nr_queues = possible_cpus()?;
    if nr_queues > usize::from(u16::MAX) {
        return Err(io::Error::other(format!(
            "{nr_queues} CPUs: too many queues"
        )));
    }
    let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
    let mut threads = Vec::with_capacity(nr_queues);
    for qid in 0..nr_queues {
        let queue = Queue {
            qid: qid as u16,
            params,
            event_loop: SessionEventLoop {
                thread_name: format!("fuser-ring-{qid}"),
                filesystem: filesystem.clone(),
                ch: ch.clone(),
                allowed,
                session_owner,
            },
        };
        let ready = ready_tx.clone();
        threads.push(
            thread::Builder::new()
                .name(format!("fuser-ring-{qid}"))
                .spawn(move || queue.run(ready))?,
        );
    }
    drop(ready_tx);
    for _ in 0..nr_queues {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(io::Error::other(
                    "a ring queue thread ended before registering",
                ));
            }
        }
    }
    debug!("io_uring: {nr_queues} queues of {QUEUE_DEPTH} entries registered");
    Ok(threads)
}

struct Queue<FS: Filesystem> {
    qid: u16,
    params: RingParams,
    event_loop: SessionEventLoop<FS>,
}

impl<FS: Filesystem> Queue<FS> {
    fn run(self, ready: mpsc::Sender<io::Result<()>>) -> io::Result<()> {
        pin_to_cpu(self.qid);
        let setup = self.setup();
        let (mut ring, mut entries) = match setup {
            Ok(x) => {
                let _ = ready.send(Ok(()));
                x
            }
            Err(e) => {
                let e = io::Error::new(e.kind(), format!("io_uring queue {}: {e}", self.qid));
                let _ = ready.send(Err(io::Error::new(e.kind(), e.to_string())));
                return Err(e);
            }
        };
        drop(ready);
        let result = self.serve(&mut ring, &mut entries);
        if let Err(e) = &result {
            error!("io_uring queue {}: {e}", self.qid);
        }
        // The ring goes first: its commands point into the entries' buffers.
        drop(ring);
        if !entries.iter().all(|e| e.dead) {
            // Commands may still be in flight (an error ended the loop), and the kernel could
            // write into their buffers while it cancels them: leak rather than free them.
            std::mem::forget(entries);
        }
        result
    }

    fn dev_fd(&self) -> i32 {
        self.event_loop.ch.as_fd().as_raw_fd()
    }

    fn setup(&self) -> io::Result<(IoUring<squeue::Entry128, cqueue::Entry>, Vec<Entry>)> {
        let ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder()
            .build(QUEUE_DEPTH as u32)
            .map_err(|e| io::Error::new(e.kind(), format!("creating the ring: {e}")))?;
        let mut entries = Vec::with_capacity(QUEUE_DEPTH);
        for _ in 0..QUEUE_DEPTH {
            entries.push(Entry::new(self.params.payload_size));
        }
        let mut ring = ring;
        for (idx, ent) in entries.iter().enumerate() {
            self.push(&mut ring, idx, ent)?;
        }
        ring.submit()
            .map_err(|e| io::Error::new(e.kind(), format!("submitting REGISTER: {e}")))?;
        Ok((ring, entries))
    }

    /// Queues the entry's next command (REGISTER or COMMIT_AND_FETCH).
    fn push(
        &self,
        ring: &mut IoUring<squeue::Entry128, cqueue::Entry>,
        idx: usize,
        ent: &Entry,
    ) -> io::Result<()> {
        let commit_id = if ent.last_cmd == FUSE_IO_URING_CMD_REGISTER {
            0
        } else {
            ent.commit_id
        };
        let mut sqe = opcode::UringCmd80::new(types::Fd(self.dev_fd()), ent.last_cmd)
            .cmd(cmd_req(commit_id, self.qid))
            .addr(Some(ent.iov.as_ptr() as u64))
            .build()
            .user_data(idx as u64);
        // io-uring's UringCmd80 cannot set `sqe->len`, and REGISTER requires it to be the
        // number of iovecs (2). SAFETY: Entry128 is repr(C) over `struct io_uring_sqe`, whose
        // u32 `len` is at byte offset 24 (asserted size above; the layout is kernel ABI).
        unsafe {
            let p = (&mut sqe as *mut squeue::Entry128)
                .cast::<u8>()
                .add(24)
                .cast::<u32>();
            p.write_unaligned(2);
        }
        // SAFETY: the iovecs and buffers the SQE points at live in `entries`, which outlives
        // the ring (the ring is dropped first in `run`).
        unsafe { ring.submission().push(&sqe) }
            .map_err(|_| io::Error::other("ring submission queue full"))
    }

    fn serve(
        &self,
        ring: &mut IoUring<squeue::Entry128, cqueue::Entry>,
        entries: &mut [Entry],
    ) -> io::Result<()> {
        // Room for the contiguous /dev/fuse layout; u64 keeps fuse_in_header aligned.
        let cap = IN_HEADER_SZ + OP_IN_OUT_SZ + self.params.payload_size;
        let mut buf: Vec<u64> = vec![0; cap.div_ceil(8)];
        let sender = self.event_loop.ch.sender();
        let mut completions: Vec<(usize, i32)> = Vec::with_capacity(QUEUE_DEPTH);
        loop {
            if entries.iter().all(|e| e.dead) {
                return Ok(());
            }
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => return Err(io::Error::new(e.kind(), format!("io_uring_enter: {e}"))),
            }
            completions.clear();
            completions.extend(
                ring.completion()
                    .map(|c| (c.user_data() as usize, c.result())),
            );
            for &(idx, res) in &completions {
                let Some(ent) = entries.get_mut(idx) else {
                    warn!(
                        "io_uring queue {}: completion for unknown entry {idx}",
                        self.qid
                    );
                    continue;
                };
                if res < 0 {
                    match -res {
                        libc::EINTR | libc::EAGAIN => {
                            self.push(ring, idx, ent)?;
                        }
                        // The connection is gone (unmount or abort): the entry is released.
                        libc::ENOTCONN | libc::ECONNABORTED | libc::ECANCELED => ent.dead = true,
                        // A refused REGISTER makes the kernel clear `fc->io_uring` and send
                        // requests to /dev/fuse again (unless the ring was already complete, in
                        // which case the other entries serve): the session goes on either way.
                        e if ent.last_cmd == FUSE_IO_URING_CMD_REGISTER => {
                            warn!(
                                "io_uring queue {}: the kernel refused REGISTER: {}; requests \
                                 fall back to /dev/fuse",
                                self.qid,
                                io::Error::from_raw_os_error(e)
                            );
                            ent.dead = true;
                        }
                        e => {
                            return Err(io::Error::new(
                                io::Error::from_raw_os_error(e).kind(),
                                format!(
                                    "COMMIT_AND_FETCH failed: {}",
                                    io::Error::from_raw_os_error(e)
                                ),
                            ));
                        }
                    }
                    continue;
                }
                self.handle(ent, &mut buf, &sender)?;
                ent.last_cmd = FUSE_IO_URING_CMD_COMMIT_AND_FETCH;
                self.push(ring, idx, ent)?;
            }
        }
    }

    /// Handles the request that sits in `ent` and leaves its reply in the entry's buffers.
    fn handle(&self, ent: &mut Entry, buf: &mut [u64], sender: &ChannelSender) -> io::Result<()> {
        // SAFETY: the kernel completed the command and no reply is outstanding.
        let header = unsafe { ent.header() };
        let commit_id = header.ent_in_out.commit_id;
        let payload_sz = header.ent_in_out.payload_sz as usize;
        let in_len = u32::from_ne_bytes([
            header.in_out[0],
            header.in_out[1],
            header.in_out[2],
            header.in_out[3],
        ]) as usize;
        let mut unique = [0u8; 8];
        unique.copy_from_slice(&header.in_out[8..16]);
        ent.commit_id = commit_id;
        // SAFETY: plain bytes over an u64 buffer, for as long as `buf` is borrowed.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), buf.len() * 8) };
        let op_len = in_len.checked_sub(IN_HEADER_SZ + payload_sz).filter(|&n| {
            n <= OP_IN_OUT_SZ && payload_sz <= ent.payload_len && in_len <= bytes.len()
        });
        let Some(op_len) = op_len else {
            // Not what the kernel promises; answer EIO rather than guess the layout.
            error!(
                "io_uring queue {}: request of length {in_len} with payload {payload_sz} does not fit",
                self.qid
            );
            write_error(ent, unique, libc::EIO);
            return Ok(());
        };
        {
            // SAFETY: as above.
            let header = unsafe { &*ent.header };
            let payload = unsafe { ent.payload() };
            bytes[..IN_HEADER_SZ].copy_from_slice(&header.in_out[..IN_HEADER_SZ]);
            bytes[IN_HEADER_SZ..IN_HEADER_SZ + op_len].copy_from_slice(&header.op_in[..op_len]);
            bytes[IN_HEADER_SZ + op_len..in_len].copy_from_slice(&payload[..payload_sz]);
        }

        ent.slot.state.lock().awaiting = true;
        let ring_sender = RingReplySender {
            slot: ent.slot.clone(),
            ch: sender.clone(),
        };
        match RequestWithSender::with_ring(sender.clone(), ring_sender, &bytes[..in_len]) {
            Some(req) => {
                if let Ok(Operation::Destroy(_)) = req.request.operation() {
                    // DESTROY needs an answer but must not end this thread: the kernel tears
                    // the queue down next, which ends it.
                    req.reply::<crate::ReplyEmpty>().ok();
                } else {
                    req.dispatch(&self.event_loop);
                }
            }
            None => {
                // Unparseable: the sender was dropped unused, so answer here.
                let mut st = ent.slot.state.lock();
                if st.awaiting {
                    st.awaiting = false;
                    drop(st);
                    write_error(ent, unique, libc::EIO);
                }
            }
        }
        // A reply from another thread (deferred by the filesystem) arrives through the slot.
        let mut st = ent.slot.state.lock();
        while st.awaiting {
            ent.slot.replied.wait(&mut st);
        }
        Ok(())
    }
}

fn write_error(ent: &mut Entry, unique: [u8; 8], errno: i32) {
    // SAFETY: called by the queue thread while no reply is outstanding.
    let h = unsafe { ent.header() };
    h.in_out[..4].copy_from_slice(&(OUT_HEADER_SZ as u32).to_ne_bytes());
    h.in_out[4..8].copy_from_slice(&(-errno).to_ne_bytes());
    h.in_out[8..16].copy_from_slice(&unique);
    h.ent_in_out.payload_sz = 0;
}
/// Keeps the queue thread on its CPU, so the caller and the thread that serves it share one.
fn pin_to_cpu(qid: u16) {
    // SAFETY: cpu_set_t is plain data; CPU_SET stays in bounds for qid < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if usize::from(qid) >= libc::CPU_SETSIZE as usize {
            return;
        }
        libc::CPU_SET(usize::from(qid), &mut set);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
            // E.g. a possible but offline CPU: serve unpinned; the queue is then rarely used.
            debug!(
                "io_uring queue {qid}: cannot pin to CPU {qid}: {}",
                io::Error::last_os_error()
            );
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn cmd_req_layout() {
        let c = cmd_req(0x0102_0304_0506_0708, 3);
        assert_eq!(&c[..8], &[0; 8]);
        assert_eq!(
            u64::from_ne_bytes(c[8..16].try_into().unwrap()),
            0x0102_0304_0506_0708
        );
        assert_eq!(u16::from_ne_bytes(c[16..18].try_into().unwrap()), 3);
        assert!(c[18..].iter().all(|&b| b == 0));
    }

    #[test]
    fn payload_covers_max_pages() {
        let p = RingParams::new(1 << 20, 1 << 20);
        assert!(p.payload_size >= 1 << 20);
        let p = RingParams::new(4096, 1000);
        assert!(p.payload_size >= 8192);
    }
}
