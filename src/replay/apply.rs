//! Replaying one step through the mount with real system calls.
//!
//! - `read`: the recorded line ranges are read with `pread` at their byte offsets (a whole file
//!   when no range; a `partial` read reads the recorded text where it is found, else the whole
//!   file). If the disk does not show what the agent saw (an earlier command changed the file
//!   in a way the trace could not describe), the recorded lines are first spliced in with a
//!   write through the mount, and counted as `reconciled`.
//! - `edit`: str_replace of `old_text` by `new_text` (all occurrences with `replace_all`), or
//!   the `edits` of a MultiEdit in order, written through the mount. A file tool's call that
//!   answered an error changed nothing and is replayed as nothing (`refused`). Shell edits
//!   without texts (`sed -i ...`) take their effect from the next read of the file (looked
//!   ahead), or rewrite the file unchanged (a write is still observed); `git checkout FILE` puts
//!   the base file back. `disk_sha1_before` is checked when present.
//! - `write`: the new content, written through the mount.
//! - `command`/`search`: their `touches` as file accesses: read (ranges), exec (whole read),
//!   search of a file (looked up, not read: the agent saw only the matching lines, which the
//!   command's output carries; the file is an input of that output), search of a directory
//!   (skipped: a scan the world ignores), write (as an unparsed edit), delete (unlink). Then a
//!   command's `git checkout DIR` and `git stash` operations. Recorded commands are never run.
//! - `message`/`other`: nothing on disk.
//!
//! The disk itself is read beneath the mount through an O_PATH descriptor opened before mounting
//! ([`Applier::disk`]); that is the ground truth for staleness.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::sha1;
use super::text;
use super::trace::{Kind, Step, Touch, TouchOp, Trace};

/// What the replay did, by kind of effect.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ApplyCounts {
    pub steps: u64,
    /// Steps whose effects were all carried out (or had none).
    pub applied: u64,
    /// Steps with an effect that could not be carried out (listed in `problems`).
    pub failed: u64,
    pub reads: u64,
    pub edits: u64,
    pub writes: u64,
    pub commands: u64,
    pub searches: u64,
    pub messages: u64,
    pub others: u64,
    pub effects_unknown: u64,
    pub touch_reads: u64,
    pub touch_writes: u64,
    pub touch_deletes: u64,
    pub touch_execs: u64,
    pub touch_searches: u64,
    pub touch_scans_skipped: u64,
    pub outside_repo: u64,
    pub pre_setup_skipped: u64,
    /// File-tool calls that answered an error ([`Step::refused`]): replayed as nothing.
    pub refused: u64,
    pub reconciled: u64,
    pub lookahead_edits: u64,
    /// Files put back as in the base by `git checkout FILE` / `git restore FILE`.
    pub restored: u64,
    /// Files changed by `git stash` and `git stash pop`/`apply`.
    pub stashed: u64,
    pub unchanged_rewrites: u64,
    pub missing_files: u64,
    pub sha1_checked: u64,
    pub sha1_mismatch: u64,
    pub problems: Vec<String>,
}

/// Opens `p` for reading with O_DIRECT, so that each `pread` reaches the mount as one READ of
/// exactly its bytes: the mount then sees the ranges the agent saw, no more. Through the page
/// cache, the kernel reads whole pages and a readahead window past them (sized by the machine),
/// some of it after `pread` has returned: the ranges would be page-sized and their order with the
/// socket calls that follow would change from run to run. FUSE takes unaligned O_DIRECT reads;
/// the daemon opens the backing file without it.
/// Fails unless `p` is a regular file: opening a FIFO or a device that a base archive brought
/// along would block or reach hardware, and the agent read neither.
fn regular(p: &Path) -> Result<()> {
    let md = std::fs::metadata(p).with_context(|| format!("stat {}", p.display()))?;
    if !md.is_file() {
        anyhow::bail!("{} is not a regular file", p.display());
    }
    Ok(())
}

fn open_exact(p: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(p)
        .with_context(|| format!("open {} (O_DIRECT) through the mount", p.display()))
}

pub struct Applier {
    pub root: PathBuf,
    backing: i32,
    /// The base files as unpacked, outside the mount: what `git checkout FILE` puts back.
    pristine: Option<PathBuf>,
    /// `git stash` entries, top last: each file's content when stashed (`None`: deleted).
    stash: Vec<Vec<(PathBuf, Option<Vec<u8>>)>>,
    pub counts: ApplyCounts,
}

/// A repository-relative path that stays inside the root, or `None`: `./a/../b.py` is `b.py`,
/// `../x` and absolute paths are outside. Lexical only; symlinks are resolved by the applier.
pub fn clean_rel(p: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in Path::new(p).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// The list of the repository's paths a base archive carries at its root (not a file of it).
const BASE_LISTING: &str = ".worldfs-base-listing";

/// How many symlinks one path may pass through, as the kernel's own limit (ELOOP).
const MAX_LINKS: usize = 40;

/// Errors that mean the mount itself is gone: the replay cannot go on. Any other error of a
/// step's system calls is the trace's (a write to what is a directory here, a special file)
/// and is listed among the problems.
fn mount_is_gone(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .filter_map(std::io::Error::raw_os_error)
        .any(|n| matches!(n, libc::ENOTCONN | libc::ECONNABORTED | libc::ENODEV))
}

impl Applier {
    pub fn new(root: &Path, backing: i32, pristine: Option<PathBuf>) -> Applier {
        Applier {
            root: root.to_owned(),
            backing,
            pristine,
            stash: Vec::new(),
            counts: ApplyCounts::default(),
        }
    }

    /// The base content of `rel` if `step` is a command that restores it from the last commit
    /// (the trace's base): `git checkout FILE`, `git restore FILE`.
    fn restored(&self, step: &Step, rel: &Path) -> Option<Vec<u8>> {
        let pristine = self.pristine.as_ref()?;
        let cwd = step
            .cwd
            .as_deref()
            .map_or(Some(PathBuf::new()), clean_rel)?;
        let named = git_restored(step.command.as_deref()?)
            .iter()
            .filter_map(|p| clean_rel(p))
            .any(|p| cwd.join(p) == rel);
        if !named {
            return None;
        }
        let p = pristine.join(rel);
        if !std::fs::symlink_metadata(&p).ok()?.is_file() {
            // not in the last commit: git refuses, the file stays as it is
            return None;
        }
        std::fs::read(&p).ok()
    }

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
    fn resolve(&self, rel: &Path, keep_last: bool) -> Result<PathBuf> {
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

    /// `git checkout .`, `git checkout -- DIR`, `git restore DIR`: every file of the base under
    /// the directory that is not as in the base is put back (and a file named alone, if its
    /// write touch, [`Applier::restored`], did not already). Files the agent created there stay,
    /// as git leaves untracked files; the base archive holds only the files the trace uses,
    /// which are the ones that can differ.
    fn restore_directories(&mut self, step: &Step) -> Result<()> {
        let Some(command) = step.command.as_deref().filter(|_| self.pristine.is_some()) else {
            return Ok(());
        };
        let Some(cwd) = step.cwd.as_deref().map_or(Some(PathBuf::new()), clean_rel) else {
            return Ok(());
        };
        let named: Vec<PathBuf> = git_restored(command)
            .iter()
            .filter_map(|p| clean_rel(&cwd.join(p).to_string_lossy()))
            .collect();
        if named.is_empty() {
            return Ok(());
        }
        for (rel, base_path) in self.base_files()? {
            // a directory named takes its files, a file named itself
            if named.iter().any(|n| rel.starts_with(n)) && self.to_base(&rel, &base_path)?.is_some()
            {
                self.counts.restored += 1;
            }
        }
        Ok(())
    }

    /// Writes `rel` back as the base has it (`base_path`) if it differs; returns what it was
    /// then (`Some(None)`: it did not exist), or `None` when it was already as in the base.
    fn to_base(&self, rel: &Path, base_path: &Path) -> Result<Option<Option<Vec<u8>>>> {
        let base =
            std::fs::read(base_path).with_context(|| format!("reading {}", base_path.display()))?;
        let now = self.disk(rel);
        if now.as_deref() == Some(base.as_slice()) {
            return Ok(None);
        }
        self.write_file(rel, &base)?;
        Ok(Some(now))
    }

    /// The base's regular files (paths in the repository), the listing left out.
    fn base_files(&self) -> Result<Vec<(PathBuf, PathBuf)>> {
        let Some(pristine) = &self.pristine else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let walk = ignore::WalkBuilder::new(pristine)
            .standard_filters(false)
            .follow_links(false)
            .build();
        for entry in walk {
            let entry = entry.with_context(|| format!("walking {}", pristine.display()))?;
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if let Ok(rel) = entry.path().strip_prefix(pristine) {
                if rel != Path::new(BASE_LISTING) {
                    out.push((rel.to_owned(), entry.path().to_owned()));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// `git stash` and `git stash pop|apply|drop` ([`git_stashes`]): a push puts every base
    /// file that differs back as in the base and keeps what it was; a pop or apply brings that
    /// back. Files the base archive lacks are untracked to git, and stay.
    fn stash(&mut self, step: &Step) -> Result<()> {
        for op in git_stashes(step.command.as_deref().unwrap_or("")) {
            match op {
                Stash::Push => {
                    let mut entry = Vec::new();
                    for (rel, base_path) in self.base_files()? {
                        if let Some(was) = self.to_base(&rel, &base_path)? {
                            entry.push((rel, was));
                        }
                    }
                    // "No local changes to save": git pushes no entry
                    if !entry.is_empty() {
                        self.counts.stashed += entry.len() as u64;
                        self.stash.push(entry);
                    }
                }
                Stash::Pop | Stash::Apply => {
                    let entry = match op {
                        Stash::Pop => self.stash.pop(),
                        _ => self.stash.last().cloned(),
                    };
                    for (rel, content) in entry.unwrap_or_default() {
                        self.counts.stashed += 1;
                        match content {
                            Some(bytes) => self.write_file(&rel, &bytes)?,
                            None => {
                                let p = self.mounted(&rel)?;
                                std::fs::remove_file(&p)
                                    .with_context(|| format!("delete {}", p.display()))?;
                            }
                        }
                    }
                }
                Stash::Drop => {
                    self.stash.pop();
                }
            }
        }
        Ok(())
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
    fn mounted(&self, rel: &Path) -> Result<PathBuf> {
        Ok(self.root.join(self.resolve(rel, false)?))
    }

    fn problem(&mut self, step: &Step, what: String) {
        self.counts
            .problems
            .push(format!("step {} ({}): {what}", step.step, step.kind.name()));
    }

    /// Reads bytes `[start, end)` of `rel` through the mount.
    fn read_span(&self, rel: &Path, start: usize, end: usize) -> Result<()> {
        let p = self.mounted(rel)?;
        regular(&p)?;
        let f = open_exact(&p)?;
        let mut buf = vec![0u8; end.saturating_sub(start).max(1)];
        if end > start {
            let mut off = 0;
            while off < buf.len() {
                let n = f
                    .read_at(&mut buf[off..], (start + off) as u64)
                    .with_context(|| format!("read {} through the mount", p.display()))?;
                if n == 0 {
                    break;
                }
                off += n;
            }
        } else {
            // an empty range still opens and reads (what `sed -n` past the end would do)
            let _ = f.read_at(&mut buf, start as u64);
        }
        Ok(())
    }

    fn read_whole(&self, rel: &Path) -> Result<()> {
        let p = self.mounted(rel)?;
        let md = std::fs::metadata(&p).with_context(|| format!("stat {}", p.display()))?;
        if md.is_dir() {
            std::fs::read_dir(&p)
                .with_context(|| format!("list {}", p.display()))?
                .for_each(drop);
            return Ok(());
        }
        if !md.is_file() {
            anyhow::bail!("{} is not a regular file", p.display());
        }
        let mut f = open_exact(&p)?;
        f.read_to_end(&mut Vec::new())
            .with_context(|| format!("read {} through the mount", p.display()))?;
        Ok(())
    }

    /// Writes `bytes` as the whole new content of `rel` through the mount.
    fn write_file(&self, rel: &Path, bytes: &[u8]) -> Result<()> {
        let p = self.mounted(rel)?;
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("mkdir -p {} through the mount", parent.display()))?;
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .with_context(|| format!("open {} for writing through the mount", p.display()))?;
        f.write_all(bytes)
            .with_context(|| format!("write {} through the mount", p.display()))?;
        Ok(())
    }

    /// A write whose effect is unknown: the next read of the file says what it became (looked
    /// ahead), else the file is rewritten with its own bytes (a write, observed, no change).
    fn unparsed_write(&mut self, trace: &Trace, idx: usize, rel: &Path) -> Result<()> {
        if let Err(e) = self.unparsed_write_inner(trace, idx, rel) {
            let step = &trace.steps[idx];
            self.problem(step, format!("{e:#}"));
        }
        Ok(())
    }

    fn unparsed_write_inner(&mut self, trace: &Trace, idx: usize, rel: &Path) -> Result<()> {
        let p = self.mounted(rel)?;
        if p.is_dir() {
            return Ok(());
        }
        if !p.exists() && names_directory(trace, rel) {
            // `mkdir -p d` parsed as a write of `d`; later steps use it as a directory
            return std::fs::create_dir_all(&p)
                .with_context(|| format!("mkdir -p {} through the mount", p.display()));
        }
        let cur = self.disk_text(rel);
        if let Some(view) = future_view(trace, idx, rel) {
            let recorded = text::lines(&view.text);
            let first = match (&cur, view.partial) {
                (Some(c), true) => partial_at(c, &recorded),
                (None, true) => None,
                (_, false) => Some(view.first.unwrap_or(1)),
            };
            let new = match (&cur, first) {
                (Some(c), Some(first)) => text::splice(c, first, &recorded),
                (None, Some(1)) => Some(view.text.clone()),
                _ => None,
            };
            if let Some(new) = new {
                self.counts.lookahead_edits += 1;
                return self.write_file(rel, new.as_bytes());
            }
        }
        self.counts.unchanged_rewrites += 1;
        // the file's own bytes, not its text: a file that is not UTF-8 must stay as it is
        match self.disk(rel) {
            Some(bytes) => {
                let f = OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .with_context(|| format!("open {} for writing", p.display()))?;
                let n = bytes.len().min(4096);
                f.write_at(&bytes[..n], 0)
                    .with_context(|| format!("rewrite {}", p.display()))?;
                Ok(())
            }
            None => self.write_file(rel, b""),
        }
    }

    fn check_sha1(&mut self, step: &Step, rel: &Path) {
        if let Some(want) = &step.disk_sha1_before {
            self.counts.sha1_checked += 1;
            let have = self.disk(rel).map(|b| sha1::hex(&b));
            if have.as_deref() != Some(want.as_str()) {
                self.counts.sha1_mismatch += 1;
                self.problem(
                    step,
                    format!(
                        "{}: disk sha1 {have:?} before the change, trace says {want}",
                        rel.display()
                    ),
                );
            }
        }
    }

    /// Replays step `idx` of `trace`. Returns the paths it read (inputs of a command's output).
    /// Errors are I/O failures of the mount itself; anything the trace cannot support is
    /// counted instead.
    pub fn apply(&mut self, trace: &Trace, idx: usize) -> Result<Vec<PathBuf>> {
        let step = &trace.steps[idx];
        self.counts.steps += 1;
        let before = self.counts.problems.len();
        let mut inputs = Vec::new();
        if step.effects_unknown() {
            self.counts.effects_unknown += 1;
        }
        if step.pre_setup.unwrap_or(false) {
            self.counts.pre_setup_skipped += 1;
            self.counts.applied += 1;
            return Ok(inputs);
        }
        if step.refused() {
            self.counts.refused += 1;
            self.counts.applied += 1;
            return Ok(inputs);
        }
        if let Err(e) = self.effects(trace, idx, &mut inputs) {
            if mount_is_gone(&e) {
                return Err(e);
            }
            self.problem(step, format!("{e:#}"));
        }
        if self.counts.problems.len() == before {
            self.counts.applied += 1;
        } else {
            self.counts.failed += 1;
        }
        inputs.sort();
        inputs.dedup();
        Ok(inputs)
    }

    /// The step's effects on the files. An error is a system call that failed: the caller
    /// tells the trace's (listed) from the mount's (fatal).
    fn effects(&mut self, trace: &Trace, idx: usize, inputs: &mut Vec<PathBuf>) -> Result<()> {
        let step = &trace.steps[idx];
        let rel = match (&step.path, step.in_repo()) {
            (Some(p), true) => clean_rel(p),
            _ => None,
        };
        match step.kind {
            Kind::Read => {
                self.counts.reads += 1;
                match rel {
                    Some(rel) => {
                        self.apply_read(step, &rel)?;
                        inputs.push(rel);
                    }
                    None => self.counts.outside_repo += 1,
                }
            }
            Kind::Edit => {
                self.counts.edits += 1;
                match rel {
                    Some(rel) => self.apply_edit(trace, idx, &rel)?,
                    None => self.counts.outside_repo += 1,
                }
            }
            Kind::Write => {
                self.counts.writes += 1;
                match rel {
                    Some(rel) => {
                        self.check_sha1(step, &rel);
                        match &step.content {
                            Some(c) => self.write_file(&rel, c.as_bytes())?,
                            None => self.unparsed_write(trace, idx, &rel)?,
                        }
                    }
                    None => self.counts.outside_repo += 1,
                }
            }
            Kind::Command | Kind::Search => {
                if step.kind == Kind::Command {
                    self.counts.commands += 1;
                } else {
                    self.counts.searches += 1;
                }
                for t in step.touches() {
                    if let Some(p) = self.apply_touch(trace, idx, t)? {
                        inputs.push(p);
                    }
                }
                if step.kind == Kind::Command {
                    self.restore_directories(step)?;
                    self.stash(step)?;
                }
            }
            Kind::Message => self.counts.messages += 1,
            Kind::Other => {
                self.counts.others += 1;
                for t in step.touches() {
                    if let Some(p) = self.apply_touch(trace, idx, t)? {
                        inputs.push(p);
                    }
                }
            }
        }
        Ok(())
    }

    fn apply_read(&mut self, step: &Step, rel: &Path) -> Result<()> {
        let ranges = step.line_ranges();
        let raw = self.disk(rel);
        // a file that is not UTF-8 cannot be compared with the text the trace recorded (which a
        // converter decoded somehow): splicing that text in would change its encoding
        let text_file = raw
            .as_deref()
            .is_none_or(|b| std::str::from_utf8(b).is_ok());
        let cur = raw.map(|b| String::from_utf8_lossy(&b).into_owned());
        if let Some(content) = step.content.as_ref().filter(|_| text_file) {
            let recorded = text::lines(content);
            let first = match &ranges {
                _ if step.partial() => cur.as_deref().and_then(|c| partial_at(c, &recorded)),
                None => Some(1),
                Some(rs) if rs.len() == 1 => Some(rs[0][0]),
                _ => None,
            };
            // a CRLF file that the tool showed as LF lines is what it showed
            let crlf = cur
                .as_deref()
                .filter(|_| !content.contains('\r'))
                .and_then(text::crlf_as_lf);
            if let Some(first) = first {
                let new = match (&crlf, &cur) {
                    (Some(lf), _) => text::splice(&pad_to(lf, first), first, &recorded)
                        .map(|n| text::lf_as_crlf(&n)),
                    (None, Some(c)) => text::splice(&pad_to(c, first), first, &recorded),
                    (None, None) if first == 1 => Some(content.clone()),
                    // a file the base lacks, seen from line `first` on: there it is
                    (None, None) => text::splice(&pad_to("", first), first, &recorded),
                };
                if let Some(new) = new {
                    self.counts.reconciled += 1;
                    self.write_file(rel, new.as_bytes())?;
                }
            }
        }
        let Some(cur) = self.disk_text(rel) else {
            self.counts.missing_files += 1;
            if self.mounted(rel)?.is_dir() {
                return self.read_whole(rel);
            }
            // `cat missing.py` answered an error, and the agent saw it: nothing to replay
            let failed = step.is_error == Some(true) || step.returncode.is_some_and(|r| r != 0);
            if !failed {
                self.problem(step, format!("{} does not exist", rel.display()));
            }
            return Ok(());
        };
        match (ranges, step.partial()) {
            (Some(rs), false) => {
                // as `sed -n` prints them: in file order, each line once
                for (a, b) in text::merged_ranges(&rs) {
                    let (s, e) = text::line_span(&cur, a, b);
                    self.read_span(rel, s, e)?;
                }
            }
            (_, true) => match step.content.as_deref().and_then(|c| {
                let c = c.trim_end_matches('\n');
                if c.is_empty() {
                    None
                } else {
                    cur.find(c).map(|s| (s, s + c.len()))
                }
            }) {
                Some((s, e)) => self.read_span(rel, s, e)?,
                None => self.read_whole(rel)?,
            },
            (None, false) => self.read_whole(rel)?,
        }
        Ok(())
    }

    fn apply_edit(&mut self, trace: &Trace, idx: usize, rel: &Path) -> Result<()> {
        let step = &trace.steps[idx];
        self.check_sha1(step, rel);
        let replacements = step.replacements();
        if replacements.is_empty() {
            return self.unparsed_write(trace, idx, rel);
        }
        if let [r] = replacements.as_slice()
            && r.old.is_empty()
        {
            // Claude Code's Edit with an empty old_string creates the file (or fills an empty
            // one); it refuses a file with content, and a refused call never gets here
            return match self.disk(rel) {
                Some(b) if !b.is_empty() => {
                    self.problem(
                        step,
                        format!("empty old_text, and {} is not empty", rel.display()),
                    );
                    Ok(())
                }
                _ => self.write_file(rel, r.new.as_bytes()),
            };
        }
        let Some(mut cur) = self.disk_text(rel) else {
            self.counts.missing_files += 1;
            self.problem(step, format!("{} does not exist", rel.display()));
            return Ok(());
        };
        // Claude Code matches old_string in a CRLF file as LF lines and writes CRLF back
        let crlf = !replacements.iter().all(|r| cur.contains(r.old.as_str()))
            && replacements.iter().all(|r| !r.old.contains('\r'))
            && cur.contains("\r\n");
        if crlf {
            cur = cur.replace("\r\n", "\n");
        }
        for r in &replacements {
            if r.old.is_empty() || !cur.contains(r.old.as_str()) {
                self.problem(step, format!("old_text not found in {}", rel.display()));
                return Ok(());
            }
            cur = if r.all {
                cur.replace(r.old.as_str(), &r.new)
            } else {
                cur.replacen(r.old.as_str(), &r.new, 1)
            };
        }
        if crlf {
            cur = text::lf_as_crlf(&cur);
        }
        self.write_file(rel, cur.as_bytes())
    }

    fn apply_touch(&mut self, trace: &Trace, idx: usize, t: &Touch) -> Result<Option<PathBuf>> {
        let step = &trace.steps[idx];
        let rel = match (t.in_repo.unwrap_or(true), clean_rel(&t.path)) {
            (true, Some(r)) => r,
            _ => {
                self.counts.outside_repo += 1;
                return Ok(None);
            }
        };
        match t.op {
            TouchOp::Read | TouchOp::Exec | TouchOp::Search => {
                let p = self.mounted(&rel)?;
                match t.op {
                    TouchOp::Read => self.counts.touch_reads += 1,
                    TouchOp::Exec => self.counts.touch_execs += 1,
                    _ => self.counts.touch_searches += 1,
                }
                let Ok(md) = std::fs::metadata(&p) else {
                    self.counts.missing_files += 1;
                    return Ok(None);
                };
                if md.is_dir() {
                    // a scan of a tree: the world ignores scanners
                    self.counts.touch_scans_skipped += 1;
                    return Ok(None);
                }
                if t.op == TouchOp::Search {
                    // the agent saw matching lines (the command's output), not the file: looked
                    // up, not read, and an input of the output
                    return Ok(Some(rel));
                }
                let ranges = match (&t.ranges, t.range) {
                    (Some(rs), _) if !rs.is_empty() => Some(rs.clone()),
                    (_, Some(r)) => Some(vec![r]),
                    _ => None,
                };
                match (t.op, ranges, t.partial.unwrap_or(false)) {
                    (TouchOp::Read, Some(rs), false) => {
                        let cur = self.disk_text(&rel).unwrap_or_default();
                        for (a, b) in text::merged_ranges(&rs) {
                            let (s, e) = text::line_span(&cur, a, b);
                            self.read_span(&rel, s, e)?;
                        }
                    }
                    _ => self.read_whole(&rel)?,
                }
                Ok(Some(rel))
            }
            TouchOp::Write => {
                self.counts.touch_writes += 1;
                if self.mounted(&rel)?.is_dir() {
                    return Ok(None);
                }
                if let Some(base) = self.restored(step, &rel) {
                    self.counts.restored += 1;
                    self.write_file(&rel, &base)?;
                    return Ok(None);
                }
                self.unparsed_write(trace, idx, &rel)?;
                Ok(None)
            }
            TouchOp::Delete => {
                self.counts.touch_deletes += 1;
                // `rm link` removes the link, not what it points to
                let p = self.root.join(self.resolve(&rel, true)?);
                if p == self.root {
                    // `rm -rf .`: what is in the repository goes, the mount point stays
                    for e in
                        std::fs::read_dir(&p).with_context(|| format!("list {}", p.display()))?
                    {
                        let e = e.with_context(|| format!("list {}", p.display()))?;
                        let child = e.path();
                        let r = if e.file_type().is_ok_and(|t| t.is_dir()) {
                            std::fs::remove_dir_all(&child)
                        } else {
                            std::fs::remove_file(&child)
                        };
                        r.with_context(|| format!("delete {}", child.display()))?;
                    }
                    return Ok(None);
                }
                let r = match std::fs::symlink_metadata(&p) {
                    Ok(md) if md.is_dir() => std::fs::remove_dir_all(&p),
                    Ok(_) => std::fs::remove_file(&p),
                    Err(_) => Ok(()),
                };
                r.with_context(|| format!("step {}: delete {}", step.step, p.display()))?;
                Ok(None)
            }
        }
    }
}

/// A view of a file the trace shows later: its lines, and where they start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FutureView {
    /// 1-based first line; `None`: the whole file, or (`partial`) not known.
    pub first: Option<u64>,
    pub text: String,
    /// The lines are somewhere in the file (a pattern range such as `sed -n '/a/,/b/p'`).
    pub partial: bool,
}

/// The next view of `rel` the trace shows after step `idx` (a read of one range, of the whole
/// file, or of a pattern range), if no structured write or edit of it comes first.
pub fn future_view(trace: &Trace, idx: usize, rel: &Path) -> Option<FutureView> {
    for s in &trace.steps[idx + 1..] {
        let same = s
            .path
            .as_deref()
            .and_then(clean_rel)
            .is_some_and(|p| p == rel);
        if !same {
            continue;
        }
        if s.refused() {
            continue;
        }
        match s.kind {
            Kind::Read => {
                let text = s.content.clone()?;
                if s.partial() {
                    return Some(FutureView {
                        first: None,
                        text,
                        partial: true,
                    });
                }
                return match s.line_ranges() {
                    None => Some(FutureView {
                        first: None,
                        text,
                        partial: false,
                    }),
                    Some(rs) if rs.len() == 1 => Some(FutureView {
                        first: Some(rs[0][0]),
                        text,
                        partial: false,
                    }),
                    _ => None,
                };
            }
            Kind::Write => return None,
            Kind::Edit if !s.replacements().is_empty() => return None,
            _ => {}
        }
    }
    None
}

/// The paths `command` puts back as they are in the last commit: the arguments of
/// `git checkout [HEAD] [--] PATH...` and `git restore [--worktree] [--] PATH...`, in any of
/// its `&&`, `||`, `;`, `|` or newline separated parts. Forms that name another commit or
/// directory, or take other options, are left alone: their effect is not the base.
pub fn git_restored(command: &str) -> Vec<String> {
    simple_commands(command)
        .iter()
        .flat_map(|w| restored_by(w))
        .collect()
}

/// The simple commands of `command`, as words: its lines, split at `;`, `&&`, `||` and `|`.
fn simple_commands(command: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in command.lines() {
        let Some(words) = shlex::split(line) else {
            continue;
        };
        let mut part: Vec<String> = Vec::new();
        for w in words.into_iter().chain([";".to_string()]) {
            let (word, ends) = match w.strip_suffix(';') {
                Some(rest) => (rest.to_string(), true),
                None if matches!(w.as_str(), "&&" | "||" | "|") => (String::new(), true),
                None => (w, false),
            };
            if !word.is_empty() {
                part.push(word);
            }
            if ends && !part.is_empty() {
                out.push(std::mem::take(&mut part));
            }
        }
    }
    out
}

/// What a `git stash` command does to the work tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stash {
    /// `git stash`, `git stash push`, `git stash save`: changes to tracked files go on the
    /// stack, the files are as in the last commit again.
    Push,
    /// `git stash pop`: the top entry's changes come back and it leaves the stack.
    Pop,
    /// `git stash apply`: the same, and the entry stays.
    Apply,
    /// `git stash drop`: the top entry leaves the stack, the files stay.
    Drop,
}

/// The `git stash` operations of `command`, in order. A push limited to paths (`git stash
/// push -- f`) or of another entry than the top (`pop stash@{1}`) is not understood: skipped.
pub fn git_stashes(command: &str) -> Vec<Stash> {
    simple_commands(command)
        .iter()
        .filter_map(|w| {
            let w: Vec<&str> = w.iter().map(String::as_str).collect();
            let (["git", "stash"], rest) = w.split_at(w.len().min(2)) else {
                return None;
            };
            let (sub, args) = match rest.split_first() {
                None => ("push", &[][..]),
                // `git stash -u`: a push with options
                Some((s, _)) if s.starts_with('-') => ("push", rest),
                Some((s, a)) => (*s, a),
            };
            match sub {
                "push" | "save" if whole_tree(args) => Some(Stash::Push),
                "pop" if args.is_empty() => Some(Stash::Pop),
                "apply" if args.is_empty() => Some(Stash::Apply),
                "drop" if args.is_empty() => Some(Stash::Drop),
                _ => None,
            }
        })
        .collect()
}

/// Do the options of `git stash push` leave the whole work tree to it (no pathspec)? `-m MSG`
/// takes the next word as its message. `git stash save MESSAGE` (the old form) is read as a
/// pathspec and skipped: rare, and a wrong guess would change files.
fn whole_tree(args: &[&str]) -> bool {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "-m" | "--message" => {
                it.next();
            }
            "--" => return false,
            a if a.starts_with('-') => {}
            _ => return false,
        }
    }
    true
}

/// [`git_restored`] for one simple command, as words.
fn restored_by(words: &[String]) -> Vec<String> {
    let (Some("git"), Some(sub)) = (
        words.first().map(String::as_str),
        words.get(1).map(String::as_str),
    ) else {
        return Vec::new();
    };
    let args = &words[2..];
    let (opts, paths) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => {
            let i = args
                .iter()
                .position(|a| !a.starts_with('-') && a != "HEAD")
                .unwrap_or(args.len());
            (&args[..i], &args[i..])
        }
    };
    let fine = match sub {
        "checkout" => opts.iter().all(|o| o == "HEAD"),
        "restore" => opts.iter().all(|o| o == "--worktree" || o == "-W"),
        _ => false,
    };
    if !fine || paths.iter().any(|p| p.starts_with('-')) {
        return Vec::new();
    }
    paths.to_vec()
}

/// Does any step of the trace name a path below `rel` (so `rel` is a directory)?
fn names_directory(trace: &Trace, rel: &Path) -> bool {
    let below = |p: &str| clean_rel(p).is_some_and(|p| p != rel && p.starts_with(rel));
    trace
        .steps
        .iter()
        .any(|s| s.path.as_deref().is_some_and(below) || s.touches().iter().any(|t| below(&t.path)))
}

/// Where the lines of a `partial` read (a pattern range such as `sed -n '/def f/,/^$/p'`) sit
/// in `cur`, when they are not there verbatim (an edit the trace could not describe came
/// before): the 1-based line where they start. First choice, a span as long as the recorded
/// lines that starts with their first line and ends with their last (only lines inside it
/// differ); else the one place where they differ from `cur` by a single insertion (some lines
/// added, maybe some replaced) with matching lines on both sides. `None` when they are there
/// verbatim or cannot be placed without guessing: a pure deletion looks the same as several
/// ranges run together, and a wrong guess would corrupt the file.
fn partial_at(cur: &str, recorded: &[&str]) -> Option<u64> {
    let c = text::lines(cur);
    let (first, last) = (*recorded.first()?, *recorded.last()?);
    let k = recorded.len();
    if first.trim().is_empty() || last.trim().is_empty() || k < 2 {
        return None;
    }
    if c.windows(k).any(|w| w == recorded) {
        return None;
    }
    let starts = || (0..c.len()).filter(|&i| c[i] == first);
    if let Some(i) = starts().find(|&i| c.len() - i >= k && c[i + k - 1] == last) {
        return Some(i as u64 + 1);
    }
    let mut found = starts().filter(|&i| one_insertion(&c[i..], recorded));
    match (found.next(), found.next()) {
        (Some(i), None) => Some(i as u64 + 1),
        _ => None,
    }
}

/// Does `recorded` read like the start of `c` after one insertion: a common head, a common
/// tail of at least two lines (one line such as `return x` recurs too often to anchor), and
/// between them more lines added than removed, few enough that the anchors mean something?
fn one_insertion(c: &[&str], recorded: &[&str]) -> bool {
    let k = recorded.len();
    let slack = (k / 4).max(3);
    let head = recorded.iter().zip(c).take_while(|(a, b)| a == b).count();
    (head + 1..=c.len().min(k + slack)).any(|end| {
        // the recorded lines after the head end where `c[..end]` ends
        let tail = recorded[head..]
            .iter()
            .rev()
            .zip(c[head..end].iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let added = k - head - tail;
        let removed = end - head - tail;
        tail >= 2 && added > removed && added - removed <= slack && removed <= slack
    })
}

/// `cur` with empty lines appended so that line `first` exists: a read that saw lines past the
/// end of the rebuilt file (earlier changes the trace could not describe made it longer) puts
/// them where the agent saw them, not right after the last line.
fn pad_to(cur: &str, first: u64) -> std::borrow::Cow<'_, str> {
    let n = text::lines(cur).len() as u64;
    if first <= n + 1 {
        return std::borrow::Cow::Borrowed(cur);
    }
    let mut s = cur.to_string();
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(&"\n".repeat((first - 1 - n) as usize));
    std::borrow::Cow::Owned(s)
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

    #[test]
    fn git_stash_commands_are_told_apart() {
        use Stash::*;
        assert_eq!(
            git_stashes("git stash && bin/test x; git stash pop"),
            [Push, Pop]
        );
        assert_eq!(git_stashes("git stash -u\ngit stash apply"), [Push, Apply]);
        assert_eq!(git_stashes("git stash push -m wip | cat"), [Push]);
        assert_eq!(git_stashes("git stash drop"), [Drop]);
        // not the whole work tree, or not the top entry: not understood
        assert!(git_stashes("git stash push -- a.py").is_empty());
        assert!(git_stashes("git stash pop stash@{1}").is_empty());
        assert!(git_stashes("git stash list && git status").is_empty());
        assert!(git_stashes("echo git stash").is_empty());
    }

    #[test]
    fn clean_rel_keeps_paths_inside() {
        let c = |p: &str| clean_rel(p).map(|p| p.to_string_lossy().into_owned());
        assert_eq!(c("./a/../b.py").as_deref(), Some("b.py"));
        assert_eq!(c(".").as_deref(), Some(""));
        assert_eq!(c("a/../../b"), None);
        assert_eq!(c("/etc/passwd"), None);
    }

    #[test]
    fn a_partial_read_is_placed_only_where_its_span_fits() {
        let cur = "a\ndef f():\n    x = 1\n    return x\nb\n";
        // edited inside: same span, first and last lines in place
        let rec = ["def f():", "    x = 2", "    return x"];
        assert_eq!(partial_at(cur, &rec), Some(2));
        // there verbatim: nothing to do
        let same = ["def f():", "    x = 1", "    return x"];
        assert_eq!(partial_at(cur, &same), None);
        // two ranges run together (span shorter than the distance): not placed
        assert_eq!(partial_at(cur, &["a", "b"]), None);
    }

    #[test]
    fn a_partial_read_with_inserted_lines_is_placed_where_both_ends_match() {
        let cur = "import os\ndef f():\n    a = 1\n    b = 2\n    return a\n\ndef g():\n    pass\n";
        // `sed -i` inserted a check; `sed -n '/def f/,/return/p'` shows it
        let rec = [
            "def f():",
            "    if x:",
            "        raise",
            "    a = 1",
            "    b = 2",
            "    return a",
        ];
        assert_eq!(partial_at(cur, &rec), Some(2));
        assert_eq!(
            text::splice(cur, 2, &rec).unwrap(),
            "import os\ndef f():\n    if x:\n        raise\n    a = 1\n    b = 2\n    return a\n\ndef g():\n    pass\n"
        );
        // two ranges run together: lines missing in between, none added: not placed
        let two = "def f():\n    return 1\nx = 1\ny = 2\ndef g():\n    return 2\n";
        let rec = ["def f():", "    return 1", "def g():", "    return 2"];
        assert_eq!(partial_at(two, &rec), None);
        // the same insertion fits two places: not placed
        let twice = "def f():\n    a = 1\n    return a\ndef f():\n    a = 1\n    return a\n";
        let rec = ["def f():", "    new", "    a = 1", "    return a"];
        assert_eq!(partial_at(twice, &rec), None);
        // a lone matching last line is no anchor
        let rec = ["a", "n1", "n2", "n3", "x"];
        assert_eq!(partial_at("a\nb\nc\nx\n", &rec), None);
    }

    #[test]
    fn git_checkout_and_restore_name_the_files_put_back() {
        let v = |c: &str| git_restored(c);
        assert_eq!(v("git checkout a.py"), ["a.py"]);
        assert_eq!(v("git checkout -- a.py b.py"), ["a.py", "b.py"]);
        assert_eq!(v("git checkout HEAD -- a.py"), ["a.py"]);
        assert_eq!(v("git restore --worktree 'x y.py'"), ["x y.py"]);
        assert_eq!(
            v("cp a.py a.bak\ngit checkout a.py && python3 t.py; git checkout b.py"),
            ["a.py", "b.py"]
        );
        assert_eq!(v("git checkout a.py; python3 t.py"), ["a.py"]);
        // another commit, the index only, a new branch, other commands: not the base
        assert!(v("git checkout abc123 -- a.py").is_empty());
        assert!(v("git restore --staged a.py").is_empty());
        assert!(v("git checkout -b topic").is_empty());
        assert!(v("git stash && git diff a.py").is_empty());
        assert!(v("echo git checkout a.py").is_empty());
    }

    #[test]
    fn padding_puts_lines_where_the_agent_saw_them() {
        assert_eq!(pad_to("a\nb\n", 3), "a\nb\n");
        assert_eq!(pad_to("a\nb", 5), "a\nb\n\n\n");
        assert_eq!(text::lines(&pad_to("a\nb\n", 5)).len(), 4);
    }
}
