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
//!
//! The `Applier`'s other `impl` blocks are in `disk.rs` (where a path leads, what the disk holds
//! there) and `git_effects.rs` (what `git checkout` and `git stash` put back, as `git_commands.rs`
//! recognises them); recorded views are fitted to the file as it is by `reconcile.rs`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::reconcile::{future_view, names_directory, pad_to, partial_at};
use super::sha1;
use super::text;
use super::trace::{Kind, Step, Touch, TouchOp, Trace};
use crate::world::notebook;

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

/// Fails unless `p` is a regular file: opening a FIFO or a device that a base archive brought
/// along would block or reach hardware, and the agent read neither.
fn regular(p: &Path) -> Result<()> {
    let md = std::fs::metadata(p).with_context(|| format!("stat {}", p.display()))?;
    if !md.is_file() {
        anyhow::bail!("{} is not a regular file", p.display());
    }
    Ok(())
}

/// Opens `p` for reading with O_DIRECT, so that each `pread` reaches the mount as one READ of
/// exactly its bytes: the mount then sees the ranges the agent saw, no more. Through the page
/// cache, the kernel reads whole pages and a readahead window past them (sized by the machine),
/// some of it after `pread` has returned: the ranges would be page-sized and their order with the
/// socket calls that follow would change from run to run. FUSE takes unaligned O_DIRECT reads;
/// the daemon opens the backing file without it.
fn open_exact(p: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(p)
        .with_context(|| format!("open {} (O_DIRECT) through the mount", p.display()))
}

pub struct Applier {
    pub root: PathBuf,
    pub(super) backing: i32,
    /// The base files as unpacked, outside the mount: what `git checkout FILE` puts back.
    pub(super) pristine: Option<PathBuf>,
    /// `git stash` entries, top last: each file's content when stashed (`None`: deleted).
    pub(super) stash: Vec<Vec<(PathBuf, Option<Vec<u8>>)>>,
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
    pub(super) fn write_file(&self, rel: &Path, bytes: &[u8]) -> Result<()> {
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
        // A notebook's Read shows its cells, no line of its JSON: nothing to fit them into.
        let cells = notebook::is_notebook(rel)
            && cur
                .as_deref()
                .is_some_and(|c| notebook::render(c.as_bytes()).is_some());
        if let Some(content) = step.content.as_ref().filter(|_| text_file && !cells) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_rel_keeps_paths_inside() {
        let c = |p: &str| clean_rel(p).map(|p| p.to_string_lossy().into_owned());
        assert_eq!(c("./a/../b.py").as_deref(), Some("b.py"));
        assert_eq!(c(".").as_deref(), Some(""));
        assert_eq!(c("a/../../b"), None);
        assert_eq!(c("/etc/passwd"), None);
    }
}
