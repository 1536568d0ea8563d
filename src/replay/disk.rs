//! Where a path of the repository leads, and what the disk holds there. The base archive comes
//! from a recorded run on another machine, so its symlinks are followed by hand and never out of
//! the repository; the disk is read beneath the mount, through the O_PATH descriptor opened
//! before mounting, so that looking is not an access the world records: it is the ground truth
//! for staleness.

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use anyhow::Result;

use super::apply::Applier;

/// How many symlinks one path may pass through, as the kernel's own limit (ELOOP).
const MAX_LINKS: usize = 40;

impl Applier {
    /// The target of `rel` if it is a symlink (looked up beneath the mount, so the lookup is
    /// not an access the world records).
    fn link_target(&self, rel: &Path) -> Option<PathBuf> {
        let c = CString::new(rel.as_os_str().as_encoded_bytes()).ok()?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: valid directory descriptor, path and buffer of the length given.
        let n = unsafe {
            libc::readlinkat(
                self.backing,
                c.as_ptr(),
                buf.as_mut_ptr().cast::<libc::c_char>(),
                buf.len(),
            )
        };
        let n = usize::try_from(n).ok()?;
        buf.truncate(n);
        Some(PathBuf::from(std::ffi::OsString::from_vec(buf)))
    }

    /// `rel` with every symlink on the way resolved, as a path inside the repository: where
    /// the kernel would get to. The base archive comes from a recorded run on another machine,
    /// and a link in it to an absolute path (`/etc/x`, `/dev/null`) or above the root would
    /// make a replayed write or delete land outside the scratch copy: such paths are refused.
    /// With `keep_last`, a link in the last component is not followed (`rm link` removes the
    /// link).
    pub(super) fn resolve(&self, rel: &Path, keep_last: bool) -> Result<PathBuf> {
        if rel.is_absolute() {
            anyhow::bail!("{} is outside the repository", rel.display());
        }
        // components still to walk, owned: a link's target is spliced in front of them
        let owned = |p: &Path| -> Vec<Option<std::ffi::OsString>> {
            p.components()
                .filter(|c| !matches!(c, Component::CurDir))
                .map(|c| match c {
                    Component::Normal(n) => Some(n.to_owned()),
                    _ => None,
                })
                .collect()
        };
        let mut todo: std::collections::VecDeque<_> = owned(rel).into();
        let mut out = PathBuf::new();
        let mut links = 0;
        while let Some(c) = todo.pop_front() {
            // `None` is `..` (an absolute path never gets here: see the link below)
            let Some(name) = c else {
                if !out.pop() {
                    anyhow::bail!("{} leads above the repository", rel.display());
                }
                continue;
            };
            let next = out.join(&name);
            let last = todo.is_empty();
            match self.link_target(&next).filter(|_| !(keep_last && last)) {
                None => out = next,
                Some(target) => {
                    links += 1;
                    if links > MAX_LINKS {
                        anyhow::bail!("{}: too many symlinks", rel.display());
                    }
                    if target.is_absolute() {
                        anyhow::bail!(
                            "{} is a symlink to {}, outside the repository",
                            next.display(),
                            target.display()
                        );
                    }
                    for c in owned(&target).into_iter().rev() {
                        todo.push_front(c);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The file as it is on disk now (beneath the mount, symlinks inside the repository
    /// followed); `None` if missing, not a file, or reached through a link out of it.
    pub fn disk(&self, rel: &Path) -> Option<Vec<u8>> {
        let rel = self.resolve(rel, false).ok()?;
        if rel.as_os_str().is_empty() {
            return None;
        }
        let c = CString::new(rel.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: valid directory descriptor and path.
        let fd = unsafe {
            libc::openat(
                self.backing,
                c.as_ptr(),
                // O_NONBLOCK: a FIFO from the base archive would block the open for ever;
                // a regular file reads the same with it
                libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK,
            )
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: fresh descriptor we own.
        let mut f = unsafe { File::from_raw_fd(fd) };
        if !f.metadata().ok()?.is_file() {
            return None;
        }
        let mut v = Vec::new();
        f.read_to_end(&mut v).ok()?;
        Some(v)
    }

    pub fn disk_text(&self, rel: &Path) -> Option<String> {
        self.disk(rel)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// Is `rel` a path inside the repository once its symlinks are followed? A view of one
    /// that is not cannot be checked against the disk: the replay keeps no copy of it.
    pub fn inside(&self, rel: &Path) -> bool {
        self.resolve(rel, false).is_ok()
    }

    /// `rel` through the mount, symlinks resolved ([`Applier::resolve`]).
    pub(super) fn mounted(&self, rel: &Path) -> Result<PathBuf> {
        Ok(self.root.join(self.resolve(rel, false)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An applier over a plain directory (no mount): enough for path resolution.
    fn applier_over(dir: &Path) -> (Applier, File) {
        let c = CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: valid path; the descriptor is owned by the returned File.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY) };
        assert!(fd >= 0);
        // SAFETY: fresh descriptor.
        let f = unsafe { File::from_raw_fd(fd) };
        (Applier::new(dir, fd, None), f)
    }

    #[test]
    fn symlinks_are_followed_inside_the_repository_only() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir(d.join("src")).unwrap();
        std::fs::write(d.join("src/a.py"), "a\n").unwrap();
        symlink("src", d.join("alias")).unwrap();
        symlink("alias/a.py", d.join("l.py")).unwrap();
        symlink("/tmp", d.join("ext")).unwrap();
        symlink("src/../..", d.join("up")).unwrap();
        symlink("loop2", d.join("loop1")).unwrap();
        symlink("loop1", d.join("loop2")).unwrap();
        let (a, _fd) = applier_over(d);
        let r = |p: &str| a.resolve(Path::new(p), false).map_err(|e| e.to_string());
        assert_eq!(r("l.py"), Ok(PathBuf::from("src/a.py")));
        assert_eq!(r("alias/new.py"), Ok(PathBuf::from("src/new.py")));
        assert_eq!(a.disk(Path::new("l.py")), Some(b"a\n".to_vec()));
        // `rm l.py` removes the link
        assert_eq!(
            a.resolve(Path::new("l.py"), true).ok(),
            Some(PathBuf::from("l.py"))
        );
        assert!(r("ext/x").unwrap_err().contains("outside the repository"));
        assert!(r("up/x").unwrap_err().contains("above the repository"));
        assert!(r("loop1").unwrap_err().contains("too many symlinks"));
        assert!(a.disk(Path::new("ext/passwd")).is_none());
        assert!(a.mounted(Path::new("ext/x")).is_err());
    }
}
