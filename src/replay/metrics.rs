//! Per-turn measures of one request against the disk as it is now:
//!
//! - **stale bytes**: bytes of file views whose lines no longer match the file at that place
//!   (a view of a deleted file is wholly stale; a line of a partial view, position unknown, is
//!   stale when it is no longer a line of the file);
//! - **fresh next-action recall**: for every read or edit of the next turn on a file the agent
//!   had already seen, does the request hold current content of the file (file level) and of
//!   every line the step needs (range level: the lines read, the lines holding `old_text`, the
//!   whole file for a whole read)? For the range level only needs whose lines the agent had
//!   already seen (or a file it wrote) count. A stale copy counts as `present_stale`;
//! - **forced re-reads**: range-level needs the request does not hold fresh.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::apply::{Applier, clean_rel};
use super::context::{Block, FileView};
use super::shown_lines::shown_runs;
use super::text;
use super::trace::{Kind, Step};
use crate::world::notebook;

/// What the next step needs to have in front of it.
#[derive(Debug, Clone)]
pub struct Need {
    pub path: String,
    /// 1-based inclusive lines; `None`: file level only.
    pub lines: Option<(u64, u64)>,
    pub is_read: bool,
}

/// Lines of each file the agent has seen so far (`None`: all of it).
#[derive(Debug, Default)]
pub struct Seen {
    files: HashMap<String, Option<Vec<(u64, u64)>>>,
}

impl Seen {
    pub fn knows(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    pub fn covers(&self, path: &str, a: u64, b: u64) -> bool {
        match self.files.get(path) {
            Some(None) => true,
            Some(Some(rs)) => covered(rs, a, b),
            None => false,
        }
    }

    fn add(&mut self, path: &str, r: Option<(u64, u64)>) {
        let e = self
            .files
            .entry(path.to_string())
            .or_insert_with(|| Some(Vec::new()));
        match (e.as_mut(), r) {
            (Some(v), Some(r)) => v.push(r),
            (Some(_), None) => *e = None,
            (None, _) => {}
        }
    }

    /// The content an edit step is about to change, to be handed to [`Seen::record`] once it
    /// has been applied.
    pub fn before(s: &Step, applier: &Applier) -> Option<String> {
        let p = s
            .path
            .as_deref()
            .filter(|_| s.kind == Kind::Edit && s.in_repo())?;
        applier.disk_text(&clean_rel(p)?)
    }

    /// Records what a step showed the agent. A command's reads count only for the lines of the
    /// file its output shows (`nl -ba f | grep x` read all of `f` and showed a few lines; `cat
    /// a b` showed both whole), so a scan is not mistaken for having seen the file; so do the
    /// reads of a whole file whose output the harness cut to its head and tail. Searches (`grep
    /// x f`) do not make a file seen, as before. An edit makes the lines it changed seen (the
    /// agent wrote them), not the rest of the file: a `sed -i '316s/a/b/'` shows nothing of line
    /// 840. `before` is the file as it was before the edit ([`Seen::before`]). A refused call
    /// ([`Step::refused`]) shows nothing.
    pub fn record(&mut self, s: &Step, before: Option<&str>, applier: &Applier) {
        if s.refused() {
            // it changed nothing and showed an error, not the file
            return;
        }
        // a whole read whose output the harness cut (no `content`) showed what its output holds
        let cut = s.kind == Kind::Read && s.content.is_none() && s.line_ranges().is_none();
        let Some(p) = s.path.as_deref().filter(|_| s.in_repo() && !cut) else {
            let output = s.output.as_deref().unwrap_or("");
            for t in s.touches() {
                if !matches!(t.op, super::trace::TouchOp::Read) {
                    continue;
                }
                let Some(cur) = clean_rel(&t.path).and_then(|r| applier.disk_text(&r)) else {
                    continue;
                };
                for run in shown_runs(&cur, t.range.map(|[a, b]| (a, b)), output) {
                    self.add(&t.path, Some(run));
                }
            }
            return;
        };
        match s.kind {
            Kind::Read if s.partial() => self.add(p, Some((0, 0))),
            Kind::Read => match s.line_ranges() {
                Some(rs) => text::merged_ranges(&rs)
                    .into_iter()
                    .for_each(|r| self.add(p, Some(r))),
                None => self.add(p, None),
            },
            Kind::Write => self.add(p, None),
            Kind::Edit => {
                let after = clean_rel(p).and_then(|r| applier.disk_text(&r));
                match (before, after) {
                    (Some(b), Some(a)) => {
                        // known, even if it changed nothing one can point at
                        self.files
                            .entry(p.to_string())
                            .or_insert_with(|| Some(Vec::new()));
                        for run in changed_runs(b, &a) {
                            self.add(p, Some(run));
                        }
                    }
                    // a file the edit created: all of it is the agent's
                    (None, Some(_)) => self.add(p, None),
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

/// The runs of lines of `after` (1-based inclusive) that are not lines of `before` where the
/// diff puts them: what an edit wrote.
pub fn changed_runs(before: &str, after: &str) -> Vec<(u64, u64)> {
    let diff = similar::TextDiff::from_lines(before, after);
    diff.ops()
        .iter()
        .filter(|op| op.tag() != similar::DiffTag::Equal && !op.new_range().is_empty())
        .map(|op| {
            let r = op.new_range();
            (r.start as u64 + 1, r.end as u64)
        })
        .collect()
}

fn covered(rs: &[(u64, u64)], a: u64, b: u64) -> bool {
    if a > b {
        // nothing asked for
        return true;
    }
    let mut v: Vec<(u64, u64)> = rs.to_vec();
    v.sort();
    let mut need = a;
    for (x, y) in v {
        if x <= need && y >= need {
            // compared before stepping past `y`: a run may end at `u64::MAX` (`sed -n '8,$p'`)
            if y >= b {
                return true;
            }
            need = y + 1;
        }
    }
    false
}

/// The needs of one turn's steps, against the disk now (before the steps run).
pub fn needs(steps: &[&Step], applier: &Applier) -> Vec<Need> {
    let mut out = Vec::new();
    for s in steps {
        if !matches!(s.kind, Kind::Read | Kind::Edit) || !s.in_repo() {
            continue;
        }
        let Some(path) = s.path.clone() else { continue };
        let Some(rel) = clean_rel(&path) else {
            continue;
        };
        let Some(cur) = applier.disk_text(&rel) else {
            continue;
        };
        let n = text::lines(&cur).len() as u64;
        let lines = match s.kind {
            // Read shows a notebook whole, as its cells: no line of its JSON is a place in them.
            _ if notebook::is_notebook(&rel) => None,
            Kind::Read if s.partial() => None,
            Kind::Read => match s.line_ranges() {
                Some(rs) => {
                    let rs = text::merged_ranges(&rs);
                    let a = rs.first().map_or(1, |r| r.0);
                    let b = rs.last().map_or(n, |r| r.1).min(n);
                    (a <= b).then_some((a, b))
                }
                None => (n > 0).then_some((1, n)),
            },
            _ => s
                .replacements()
                .first()
                .map(|r| r.old.as_str())
                .filter(|o| !o.is_empty())
                .and_then(|o| {
                    let at = cur.find(o)?;
                    let a = cur[..at].matches('\n').count() as u64 + 1;
                    let b = a + o.matches('\n').count() as u64;
                    Some((a, b.min(n).max(a)))
                }),
        };
        out.push(Need {
            path,
            lines,
            is_read: s.kind == Kind::Read,
        });
    }
    out
}

/// The measures of one request at one turn.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TurnMeasure {
    pub stale_bytes: u64,
    pub view_bytes: u64,
    pub needs_file: u64,
    pub fresh_file: u64,
    pub present_stale_file: u64,
    pub needs_range: u64,
    pub fresh_range: u64,
    pub forced_rereads: u64,
    pub reads_next: u64,
}

/// Fresh lines per file in a request, and its stale bytes.
struct Holdings {
    fresh: BTreeMap<String, Vec<(u64, u64)>>,
    stale_paths: BTreeMap<String, u64>,
    stale_bytes: u64,
    view_bytes: u64,
    /// Per stale view, where it first disagrees with the disk (for `worldfs replay --misses`).
    stale_detail: Vec<(String, String)>,
}

fn holdings(blocks: &[Block], applier: &Applier) -> Holdings {
    let mut h = Holdings {
        fresh: BTreeMap::new(),
        stale_paths: BTreeMap::new(),
        stale_bytes: 0,
        view_bytes: 0,
        stale_detail: Vec::new(),
    };
    let mut cache: HashMap<String, Option<String>> = HashMap::new();
    let mut cells: HashMap<String, Option<String>> = HashMap::new();
    for v in blocks.iter().flat_map(|b| &b.views) {
        // a view of a path outside the repository (`../x`, or through a link out of it) is
        // nothing the replay can hold or check: the step that made it was not replayed
        let Some(rel) = clean_rel(&v.path).filter(|r| applier.inside(r)) else {
            continue;
        };
        let cur = cache
            .entry(v.path.clone())
            .or_insert_with(|| applier.disk_text(&rel));
        let bytes = v.bytes();
        h.view_bytes += bytes;
        let mut stale = match cur {
            None => bytes,
            Some(cur) => stale_in(v, cur),
        };
        if stale > 0 && notebook::is_notebook(&rel) {
            // A notebook is shown as its cells: a view of those is as current as one of its JSON.
            let cells = cells
                .entry(v.path.clone())
                .or_insert_with(|| cur.as_deref().and_then(|c| notebook::render(c.as_bytes())));
            // Placed nowhere: Read sends a figure as an image, where the cells name it in a line.
            if let Some(cells) = cells {
                stale = stale.min(stale_anywhere(&v.lines, cells));
            }
        }
        h.stale_bytes += stale;
        if stale > 0 {
            *h.stale_paths.entry(v.path.clone()).or_default() += stale;
            let c = cur.as_deref().map(text::lines).unwrap_or_default();
            let at =
                v.lines.iter().enumerate().find(|(i, l)| {
                    !line_at(&c, v.first, *i).is_some_and(|d| text::same_line(d, l))
                });
            if let Some((i, l)) = at {
                h.stale_detail.push((v.path.clone(), format!(
                    "view of {} lines at {}{}: line {} is {:?} in the view, {:?} on disk ({} lines)",
                    v.lines.len(),
                    v.first,
                    if v.partial { " (partial)" } else { "" },
                    v.first.saturating_add(i as u64),
                    l,
                    line_at(&c, v.first, i),
                    c.len()
                )));
            }
        } else if !v.partial && !v.lines.is_empty() {
            h.fresh
                .entry(v.path.clone())
                .or_default()
                .push((v.first, v.first.saturating_add(v.lines.len() as u64 - 1)));
        } else {
            h.fresh.entry(v.path.clone()).or_default();
        }
    }
    h
}

fn stale_in(v: &FileView, cur: &str) -> u64 {
    if v.partial {
        // position unknown (pattern ranges, several ranges run together): each line must
        // still be a line of the file
        return stale_anywhere(&v.lines, cur);
    }
    let c = text::lines(cur);
    v.lines
        .iter()
        .enumerate()
        .filter(|(i, l)| !line_at(&c, v.first, *i).is_some_and(|d| text::same_line(d, l)))
        .map(|(_, l)| l.len() as u64 + 1)
        .sum()
}

/// Bytes of `lines` that are no line of `cur`.
fn stale_anywhere(lines: &[String], cur: &str) -> u64 {
    let have: std::collections::HashSet<&str> = text::lines(cur).into_iter().collect();
    lines
        .iter()
        .filter(|l| !have.contains(l.as_str()))
        .map(|l| l.len() as u64 + 1)
        .sum()
}

/// Line `first + i` (1-based) of `c`. A view's first line comes from a trace or a rendered
/// gutter, either of which may say 0 or a number past any file: such a line is not in it.
fn line_at<'a>(c: &[&'a str], first: u64, i: usize) -> Option<&'a str> {
    let k = usize::try_from(first.checked_sub(1)?)
        .ok()?
        .checked_add(i)?;
    c.get(k).copied()
}

/// A need the request did not hold fresh, for `worldfs replay --misses` (a debugging aid).
#[derive(Debug, Clone, Serialize)]
pub struct Miss {
    pub path: String,
    pub lines: Option<(u64, u64)>,
    /// The request held some current content of the file.
    pub file_fresh: bool,
    /// The request held a stale copy.
    pub stale: bool,
    /// The current lines of the file the request held.
    pub held: Vec<(u64, u64)>,
    /// Not a need: a stale view, and where it first disagrees with the disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_detail: Option<String>,
}

/// Measures one request (`blocks`) before the next turn's `needs`; also returns the needs it
/// missed (file or range level) and its stale views, for `worldfs replay --misses`.
pub fn measure(
    blocks: &[Block],
    needs: &[Need],
    seen: &Seen,
    applier: &Applier,
) -> (TurnMeasure, Vec<Miss>) {
    let h = holdings(blocks, applier);
    let mut misses: Vec<Miss> = h
        .stale_detail
        .iter()
        .map(|(path, d)| Miss {
            path: path.clone(),
            lines: None,
            file_fresh: false,
            stale: true,
            held: Vec::new(),
            stale_detail: Some(d.clone()),
        })
        .collect();
    let mut m = TurnMeasure {
        stale_bytes: h.stale_bytes,
        view_bytes: h.view_bytes,
        ..Default::default()
    };
    for n in needs {
        if n.is_read {
            m.reads_next += 1;
        }
        if !seen.knows(&n.path) {
            continue;
        }
        m.needs_file += 1;
        let fresh = h.fresh.contains_key(&n.path);
        if fresh {
            m.fresh_file += 1;
        } else if h.stale_paths.contains_key(&n.path) {
            m.present_stale_file += 1;
        }
        let mut missed = !fresh;
        if let Some((a, b)) = n.lines
            && seen.covers(&n.path, a, b)
        {
            m.needs_range += 1;
            let ok = h.fresh.get(&n.path).is_some_and(|rs| covered(rs, a, b));
            if ok {
                m.fresh_range += 1;
            } else {
                m.forced_rereads += 1;
                missed = true;
            }
        }
        if missed {
            misses.push(Miss {
                path: n.path.clone(),
                lines: n.lines,
                file_fresh: fresh,
                stale: h.stale_paths.contains_key(&n.path),
                held: h.fresh.get(&n.path).cloned().unwrap_or_default(),
                stale_detail: None,
            });
        }
    }
    (m, misses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_shows_the_lines_it_wrote() {
        let before = "a\nb\nc\nd\ne\n";
        // sed -i '2s/b/B/': line 2 only
        assert_eq!(changed_runs(before, "a\nB\nc\nd\ne\n"), vec![(2, 2)]);
        // two lines inserted after d, one deleted at the top
        assert_eq!(changed_runs(before, "b\nc\nd\nx\ny\ne\n"), vec![(4, 5)]);
        assert_eq!(changed_runs(before, before), vec![]);
    }

    #[test]
    fn an_edit_makes_seen_only_the_lines_it_wrote_and_a_write_all_of_them() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let file: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("f.py"), &file).unwrap();
        // the directory's descriptor, closed when the test ends
        let backing = std::fs::File::open(dir.path()).unwrap();
        let applier = Applier::new(dir.path(), backing.as_raw_fd(), None);
        let step = |kind: &str, path: &str| -> Step {
            serde_json::from_value(serde_json::json!({
                "record": "step", "step": 0, "turn": 1, "kind": kind, "path": path,
                "command": "sed -i '3s/line 3/line three/' f.py",
            }))
            .unwrap()
        };
        let mut seen = Seen::default();
        let edit = step("edit", "f.py");
        let before = Seen::before(&edit, &applier);
        std::fs::write(
            dir.path().join("f.py"),
            file.replace("line 3\n", "line three\n"),
        )
        .unwrap();
        seen.record(&edit, before.as_deref(), &applier);
        assert!(seen.knows("f.py"));
        assert!(seen.covers("f.py", 3, 3));
        assert!(
            !seen.covers("f.py", 80, 90),
            "an edit of line 3 showed nothing of line 80"
        );

        std::fs::write(dir.path().join("g.py"), "print(1)\n").unwrap();
        seen.record(&step("write", "g.py"), None, &applier);
        assert!(seen.covers("g.py", 1, 1));
    }

    #[test]
    fn coverage() {
        assert!(covered(&[(1, 5), (6, 9)], 2, 8));
        assert!(!covered(&[(1, 5), (7, 9)], 2, 8));
        assert!(covered(&[(1, 100)], 1, 1));
        // `sed -n '8,$p'` recorded with a sentinel end
        assert!(covered(&[(1, 2), (8, u64::MAX)], 8, 10));
        assert!(covered(&[(8, u64::MAX)], 9, u64::MAX));
        assert!(!covered(&[(1, 2), (8, u64::MAX)], 2, 8));
    }

    #[test]
    fn a_view_placed_at_line_0_or_past_any_file_is_stale_not_a_panic() {
        let view = |first| FileView {
            path: "f".into(),
            first,
            lines: vec!["a".into()],
            partial: false,
        };
        assert_eq!(stale_in(&view(0), "a\n"), 2);
        assert_eq!(stale_in(&view(u64::MAX), "a\n"), 2);
        assert_eq!(stale_in(&view(1), "a\n"), 0);
    }

    #[test]
    fn several_ranges_make_seen_and_needed_the_lines_sed_prints() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let file: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("f.py"), &file).unwrap();
        let backing = std::fs::File::open(dir.path()).unwrap();
        let applier = Applier::new(dir.path(), backing.as_raw_fd(), None);
        let read = |ranges: &str, content: &str| -> Step {
            serde_json::from_value(serde_json::json!({
                "record": "step", "step": 0, "turn": 1, "kind": "read", "path": "f.py",
                "ranges": serde_json::from_str::<serde_json::Value>(ranges).unwrap(),
                "content": content,
            }))
            .unwrap()
        };
        // sed -n '8,$p;1,2p'
        let mut seen = Seen::default();
        let s = read(
            "[[8,18446744073709551615],[1,2]]",
            "line 1\nline 2\nline 8\n",
        );
        seen.record(&s, None, &applier);
        assert!(seen.covers("f.py", 8, 10));
        assert!(seen.covers("f.py", 1, 2));
        assert!(!seen.covers("f.py", 2, 8));
        // sed -n '5,3p' prints line 5
        let mut seen = Seen::default();
        let s = read("[[5,3]]", "line 5\n");
        seen.record(&s, None, &applier);
        assert!(seen.covers("f.py", 5, 5));
        let n = needs(&[&s], &applier);
        assert_eq!(n.first().and_then(|n| n.lines), Some((5, 5)));
    }
}
