//! Reading /proc/self/mountinfo: which worldfs mounts exist, so mounting twice over one path
//! and unmounting something that is not ours are refused, and which file systems are mounted
//! below SOURCE, so the watcher sees changes there too.

use std::io;
use std::path::{Path, PathBuf};

pub const FSTYPE: &str = "fuse.worldfs";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// The mount's id (as `statx`'s `STATX_MNT_ID` and `name_to_handle_at` give it).
    pub id: u64,
    /// The id of the mount this one is mounted on.
    pub parent: u64,
    pub mount_point: PathBuf,
    pub fstype: String,
    /// The source field: worldfs puts SOURCE's path there.
    pub source: String,
    /// The mounted file system's device number (mountinfo's `major:minor`). For FUSE it names
    /// the connection under /sys/fs/fuse/connections, and reading it never touches the mount
    /// (a stat of a dead FUSE mount blocks).
    pub dev: u64,
}

/// Mount points are octal-escaped (`\040` for a space) in mountinfo.
fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = &field[i + 1..(i + 4).min(field.len())];
            if oct.len() == 3
                && let Ok(v) = u8::from_str_radix(oct, 8)
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

pub fn parse(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let fields: Vec<&str> = pre.split(' ').collect();
            let id = fields.first()?.parse().ok()?;
            let parent = fields.get(1)?.parse().ok()?;
            let (major, minor) = fields.get(2)?.split_once(':')?;
            let dev = libc::makedev(major.parse().ok()?, minor.parse().ok()?);
            let mount_point = fields.get(4)?;
            let mut post = post.split(' ');
            let fstype = post.next()?.to_string();
            let source = post.next().unwrap_or("").to_string();
            Some(MountEntry {
                id,
                parent,
                mount_point: unescape(mount_point),
                fstype,
                source,
                dev,
            })
        })
        .collect()
}

pub fn read() -> io::Result<Vec<MountEntry>> {
    Ok(parse(&std::fs::read_to_string("/proc/self/mountinfo")?))
}

/// worldfs mounts currently present, newest last.
pub fn worldfs_mounts() -> io::Result<Vec<MountEntry>> {
    Ok(read()?.into_iter().filter(|m| m.fstype == FSTYPE).collect())
}

/// The device number of the worldfs mount at `target`, if one is there. (worldfs refuses to
/// mount on or under one of its mounts, so there is at most one.)
pub fn worldfs_dev_at(target: &Path) -> Option<u64> {
    worldfs_mounts()
        .ok()?
        .into_iter()
        .find(|m| m.mount_point == target)
        .map(|m| m.dev)
}

/// The worldfs mount whose mount point is `path` or an ancestor of it.
pub fn worldfs_mount_covering(path: &Path) -> io::Result<Option<MountEntry>> {
    Ok(worldfs_mounts()?
        .into_iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.as_os_str().len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fuse_and_escaped_entries() {
        let text = "36 25 0:32 / /work/my\\040proj rw,nosuid,nodev,relatime shared:1 - fuse.worldfs /work/my\\040proj rw,user_id=0\n\
                    22 1 8:1 / / rw,relatime - ext4 /dev/vda rw\n";
        let m = parse(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].mount_point, PathBuf::from("/work/my proj"));
        assert_eq!(m[0].fstype, FSTYPE);
        assert_eq!(m[0].dev, libc::makedev(0, 32));
        assert_eq!((m[0].id, m[0].parent), (36, 25));
        assert_eq!(m[1].fstype, "ext4");
        assert_eq!(m[1].mount_point, PathBuf::from("/"));
    }
}
