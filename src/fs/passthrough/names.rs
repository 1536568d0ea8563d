//! Namespace changes made through the mount: creating, renaming and removing names. Apart
//! because each must be noted as the mount's own before its system call runs (`changing_names`),
//! or the watcher takes its inotify echo for a change behind the mount.

use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::Arc;

use fuser::{INodeNo, RenameFlags, ReplyEmpty, Request};

use super::{Passthrough, Res, errno};
use crate::fs::credentials::AsCaller;
use crate::fs::inode_store::Inode;
use crate::fs::self_changes::NameChange;
use crate::fs::sys::{self, cstr, cvt};
use crate::observation::Op;

impl Passthrough {
    /// Runs `op`, which changes the names in `changes`, noted as the mount's own beforehand:
    /// inotify queues the event while the system call runs, so the watcher may read it before
    /// the call returns (in-place `make run`: about one create in six was taken for a change
    /// behind the mount, which dropped the new name from the kernel's cache and so the inode,
    /// and with it the echo of the write that followed). A failed call takes its notes back.
    pub(super) fn changing_names<T>(
        &self,
        changes: &[(&Inode, &OsStr, NameChange)],
        op: impl FnOnce() -> io::Result<T>,
    ) -> io::Result<T> {
        for &(dir, name, change) in changes {
            self.self_changes.record(dir.dev, dir.ino, name, change);
        }
        let r = op();
        if r.is_err() {
            for &(dir, name, change) in changes {
                self.self_changes.withdraw(dir.dev, dir.ino, name, change);
            }
        }
        r
    }

    /// Runs a creating operation as the caller, then looks the new name up.
    pub(super) fn create_node(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        make: impl FnOnce(BorrowedFd<'_>, &CStr) -> io::Result<()>,
    ) -> io::Result<(Arc<Inode>, libc::stat)> {
        let parent = self.store.get(parent.0)?;
        let cname = cstr(name)?;
        let pfd = self.store.path_fd(&parent)?;
        {
            let _as = AsCaller::switch(req.uid(), req.gid())?;
            let created = [(&*parent, name, NameChange::Created)];
            self.changing_names(&created, || make(pfd.as_fd(), &cname))?;
        }
        self.store.lookup(&parent, &cname)
    }

    pub(super) fn do_rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
    ) -> Res<()> {
        let p = self.inode(parent)?;
        let np = self.inode(newparent)?;
        let (cname, cnew) = (cstr(name).map_err(errno)?, cstr(newname).map_err(errno)?);
        let pfd = self.store.path_fd(&p).map_err(errno)?;
        let npfd = self.store.path_fd(&np).map_err(errno)?;
        let exchange = flags.contains(RenameFlags::RENAME_EXCHANGE);
        // Inotify reports an exchange as two renames, one each way.
        let moved = [
            (&*p, name, NameChange::Removed),
            (&*np, newname, NameChange::Created),
            (&*np, newname, NameChange::Removed),
            (&*p, name, NameChange::Created),
        ];
        let moved = if exchange { &moved[..] } else { &moved[..2] };
        self.changing_names(moved, || {
            cvt(unsafe {
                libc::renameat2(
                    pfd.as_fd().as_raw_fd(),
                    cname.as_ptr(),
                    npfd.as_fd().as_raw_fd(),
                    cnew.as_ptr(),
                    flags.bits(),
                )
            })
        })
        .map_err(errno)?;
        // Keep reported paths right: the moved inode is now known under its new name.
        // Whether a directory moved, as far as a stat can tell (one that cannot is taken for
        // one: the world then looks for names below it).
        let mut dir = false;
        for (dirfd, parent, n, c) in [(&npfd, &np, newname, &cnew), (&pfd, &p, name, &cname)]
            .into_iter()
            .take(if exchange { 2 } else { 1 })
        {
            let st = sys::fstatat(dirfd.as_fd(), c, libc::AT_SYMLINK_NOFOLLOW).ok();
            dir |= st.is_none_or(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
            if let Some(id) = st.and_then(|st| self.store.known(st.st_dev, st.st_ino)) {
                self.store.set_name(id, parent.nodeid, n);
            }
        }
        let to = self.store.child_path(np.nodeid, newname);
        if let Some(to) = to {
            // Who renamed, read while the caller waits, as for a removal: an atomic save is a
            // program's last call, and the world tells a save by a program the agent ran from
            // one started elsewhere by the program's ancestry.
            let caller = self.caller(req.pid());
            self.observe
                .emit_from(Op::Rename { to, exchange, dir }, req.pid(), caller, || {
                    self.store.child_path(p.nodeid, name)
                });
        }
        Ok(())
    }

    pub(super) fn remove(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        flags: i32,
        reply: ReplyEmpty,
    ) {
        // Who removes, read while the caller waits: an `rm` is gone soon after its last
        // answer, and the world tells the agent's own removals from the others by the program.
        let caller = self.caller(req.pid());
        let result = (|| {
            let p = self.store.get(parent.0)?;
            let c = cstr(name)?;
            let pfd = self.store.path_fd(&p)?;
            self.changing_names(&[(&*p, name, NameChange::Removed)], || {
                cvt(unsafe { libc::unlinkat(pfd.as_fd().as_raw_fd(), c.as_ptr(), flags) })
            })?;
            Ok(())
        })();
        match result {
            Ok(_) => {
                let _answering = self.observe.answering();
                reply.ok();
                let op = if flags == 0 { Op::Unlink } else { Op::Rmdir };
                self.observe.emit_from(op, req.pid(), caller, || {
                    self.store.child_path(parent.0, name)
                });
            }
            Err(e) => reply.error(errno(e)),
        }
    }
}
