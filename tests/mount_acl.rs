//! POSIX ACLs through the mount behave as they do natively: an ACL set through the mount reads
//! back the same, changes the mode's group bits to the mask the same way, and grants and denies
//! access to other users the same way (the kernel caches and enforces them, FUSE_POSIX_ACL).

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{Mount, cpath, errno, errno_name};

const ACL_USER_OBJ: u16 = 0x01;
const ACL_USER: u16 = 0x02;
const ACL_GROUP_OBJ: u16 = 0x04;
const ACL_MASK: u16 = 0x10;
const ACL_OTHER: u16 = 0x20;
const UNDEFINED: u32 = u32::MAX;
const READER: u32 = 65534; // nobody: granted read by the ACL
const STRANGER: u32 = 65533; // not named in the ACL

/// The kernel's `system.posix_acl_access` encoding: version 2, then (tag, perm, id) entries.
fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        v.extend(tag.to_le_bytes());
        v.extend(perm.to_le_bytes());
        v.extend(id.to_le_bytes());
    }
    v
}

fn run_as(uid: u32, dir: &Path, script: &str) -> i32 {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .uid(uid)
        .gid(uid)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.code().unwrap_or(-1))
        .unwrap_or(-2)
}

/// What one directory shows for the scenario, as comparable data.
fn scenario(dir: &Path) -> Vec<String> {
    let f = dir.join("secret");
    std::fs::write(&f, b"x").expect("write");
    let c = cpath(&f);
    assert_eq!(unsafe { libc::chmod(c.as_ptr(), 0o600) }, 0);
    let value = acl(&[
        (ACL_USER_OBJ, 6, UNDEFINED),
        (ACL_USER, 4, READER),
        (ACL_GROUP_OBJ, 0, UNDEFINED),
        (ACL_MASK, 4, UNDEFINED),
        (ACL_OTHER, 0, UNDEFINED),
    ]);
    let name = c"system.posix_acl_access";
    let mut out = Vec::new();
    let r = unsafe {
        libc::setxattr(
            c.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    out.push(format!(
        "setxattr: {}",
        if r == 0 {
            "ok".into()
        } else {
            errno_name(errno())
        }
    ));
    let mut buf = vec![0u8; 256];
    let n = unsafe { libc::getxattr(c.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), 256) };
    out.push(if n < 0 {
        format!("getxattr: {}", errno_name(errno()))
    } else {
        format!("getxattr: {:?}", &buf[..n as usize])
    });
    let mode = std::fs::metadata(&f)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777);
    out.push(match mode {
        Ok(m) => format!("mode: {m:o}"),
        Err(e) => format!("mode: {e}"),
    });
    out.push(format!("reader cat: {}", run_as(READER, dir, "cat secret")));
    out.push(format!(
        "stranger cat: {}",
        run_as(STRANGER, dir, "cat secret")
    ));
    // Removing the ACL takes the grant away again.
    let r = unsafe { libc::removexattr(c.as_ptr(), name.as_ptr()) };
    out.push(format!(
        "removexattr: {}",
        if r == 0 {
            "ok".into()
        } else {
            errno_name(errno())
        }
    ));
    out.push(format!(
        "reader cat after removal: {}",
        run_as(READER, dir, "cat secret")
    ));
    out
}

#[test]
fn acls_match_native_and_are_enforced() {
    let native = tempfile::tempdir().expect("tempdir");
    let expected = scenario(native.path());
    // The scenario itself must mean something: the ACL grants, then its removal denies.
    assert!(
        expected.contains(&"reader cat: 0".to_string()),
        "{expected:?}"
    );
    assert!(
        expected.contains(&"stranger cat: 1".to_string()),
        "{expected:?}"
    );
    assert!(
        expected.contains(&"reader cat after removal: 1".to_string()),
        "{expected:?}"
    );
    let m = Mount::mirror();
    let got = scenario(&m.root);
    assert_eq!(got, expected, "through the mount vs native");
}
