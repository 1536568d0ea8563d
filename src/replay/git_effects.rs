//! What a replayed command's `git checkout`/`git restore` and `git stash` do to the files,
//! carried out against the base files the trace starts from (unpacked outside the mount). The
//! commands themselves are recognised by [`super::git_commands`]; this is the half that writes.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::apply::{Applier, clean_rel};
use super::git_commands::{Stash, git_restored, git_stashes};
use super::trace::Step;

/// The list of the repository's paths a base archive carries at its root (not a file of it).
const BASE_LISTING: &str = ".worldfs-base-listing";

impl Applier {
    /// The base content of `rel` if `step` is a command that restores it from the last commit
    /// (the trace's base): `git checkout FILE`, `git restore FILE`.
    pub(super) fn restored(&self, step: &Step, rel: &Path) -> Option<Vec<u8>> {
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

    /// `git checkout .`, `git checkout -- DIR`, `git restore DIR`: every file of the base under
    /// the directory that is not as in the base is put back (and a file named alone, if its
    /// write touch, [`Applier::restored`], did not already). Files the agent created there stay,
    /// as git leaves untracked files; the base archive holds only the files the trace uses,
    /// which are the ones that can differ.
    pub(super) fn restore_directories(&mut self, step: &Step) -> Result<()> {
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
            if let Ok(rel) = entry.path().strip_prefix(pristine)
                && rel != Path::new(BASE_LISTING)
            {
                out.push((rel.to_owned(), entry.path().to_owned()));
            }
        }
        out.sort();
        Ok(out)
    }

    /// `git stash` and `git stash pop|apply|drop` ([`git_stashes`]): a push puts every base
    /// file that differs back as in the base and keeps what it was; a pop or apply brings that
    /// back. Files the base archive lacks are untracked to git, and stay.
    pub(super) fn stash(&mut self, step: &Step) -> Result<()> {
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
}
