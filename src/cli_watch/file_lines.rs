//! The lines `worldfs watch` prints for the mount's observations: one per thing done, reads
//! and writes of one file by one process that arrive together merged into one.

use std::collections::HashMap;

use serde_json::Value;

use super::format::clock;

/// One printed line: an observation, or several reads (writes) of one file by one process that
/// arrived together, merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Line {
    time_ms: u64,
    who: String,
    class: String,
    op: String,
    path: String,
    /// What was read or written: merged while the ranges touch.
    range: Option<(u64, u64)>,
    pid: u64,
    detail: String,
}

impl Line {
    pub(super) fn render(&self) -> String {
        let range = match self.range {
            Some((start, end)) if end > start => {
                format!("  bytes {start}-{} ({})", end - 1, size(end - start))
            }
            Some((start, _)) => format!("  nothing, at byte {start}"),
            None => String::new(),
        };
        let path = if self.path.is_empty() {
            "."
        } else {
            &self.path
        };
        format!(
            "{}  {:<22} {:<5}  {:<9} {path}{range}{}",
            clock(self.time_ms),
            self.who,
            self.class,
            self.op,
            self.detail
        )
    }

    /// Takes `next` into this line when it goes on the same read (or write) of the same file
    /// by the same process: FUSE splits a large read into requests that threads answer in any
    /// order.
    fn absorb(&mut self, next: &Line) -> bool {
        let (Some((a, b)), Some((c, d))) = (self.range, next.range) else {
            return false;
        };
        if self.op != next.op || self.pid != next.pid || self.path != next.path || c > b || a > d {
            return false;
        }
        self.range = Some((a.min(c), b.max(d)));
        true
    }
}

/// Most files whose last opener is remembered; past it the memory starts again.
const OPENERS_KEPT: usize = 4096;

/// Turns notifications of observations into lines, remembering across them who opened each
/// file: the kernel says who closes a file no more than the daemon learns it (a close may come
/// from a process that has exited), so a close is shown as its opener's.
pub(super) struct FileLines {
    /// Also what is left out by default: closes of files only read (the open already said
    /// it), and the watcher's echoes of the mount's own changes.
    all: bool,
    openers: HashMap<String, (String, String)>,
}

impl FileLines {
    pub(super) fn new(all: bool) -> FileLines {
        FileLines {
            all,
            openers: HashMap::new(),
        }
    }

    /// The lines for one notification's observations, in order.
    pub(super) fn lines(&mut self, records: &[Value]) -> Vec<Line> {
        let mut out: Vec<Line> = Vec::new();
        for r in records {
            let Some(mut line) = line(r, self.all) else {
                continue;
            };
            match line.op.as_str() {
                "open" | "create" => {
                    if self.openers.len() >= OPENERS_KEPT {
                        self.openers.clear();
                    }
                    self.openers
                        .insert(line.path.clone(), (line.who.clone(), line.class.clone()));
                }
                "close" if line.pid == 0 => {
                    if let Some((who, class)) = self.openers.get(&line.path) {
                        line.who.clone_from(who);
                        line.class.clone_from(class);
                    }
                }
                _ => {}
            }
            if let Some(last) = out.last_mut()
                && last.absorb(&line)
            {
                continue;
            }
            out.push(line);
        }
        out
    }
}

fn line(r: &Value, all: bool) -> Option<Line> {
    let u = |k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let flag = |k: &str| r.get(k).and_then(Value::as_bool).unwrap_or(false);
    let op = s("op");
    let pid = u("pid");
    let mut range = None;
    let (name, detail) = match op.as_str() {
        "open" => {
            let how = match (flag("read"), flag("write")) {
                (true, true) => Some("for reading and writing"),
                (false, true) => Some("for writing"),
                (true, false) => Some("for reading"),
                (false, false) => None,
            };
            let said: Vec<&str> = how
                .into_iter()
                .chain(flag("truncate").then_some("emptied"))
                .collect();
            let name = if flag("created") { "create" } else { "open" };
            let detail = if said.is_empty() {
                String::new()
            } else {
                format!("  {}", said.join(", "))
            };
            (name.to_owned(), detail)
        }
        "read" | "write" => {
            range = Some((u("offset"), u("offset").saturating_add(u("len"))));
            (op.clone(), String::new())
        }
        "close" if !flag("wrote") && !all => return None,
        "close" => (
            op.clone(),
            if flag("wrote") { "  (written)" } else { "" }.to_owned(),
        ),
        "truncate" => (op.clone(), format!("  to {} bytes", u("size"))),
        "set_attr" => ("setattr".to_owned(), String::new()),
        "read_dir" => ("list".to_owned(), String::new()),
        "unlink" => ("remove".to_owned(), String::new()),
        "link" => (
            "link".to_owned(),
            format!("  (another name of {})", s("target")),
        ),
        "rename" if flag("exchange") => ("exchange".to_owned(), format!("  <-> {}", s("to"))),
        "rename" => (op.clone(), format!("  -> {}", s("to"))),
        "fallocate" => {
            range = Some((u("offset"), u("offset").saturating_add(u("len"))));
            let name = if flag("punch_hole") {
                "punch"
            } else {
                "allocate"
            };
            (name.to_owned(), String::new())
        }
        "copy_in" => {
            range = Some((u("offset"), u("offset").saturating_add(u("len"))));
            ("copy".to_owned(), format!("  from {}", s("from")))
        }
        "external" => match s("change").as_str() {
            "echo" if !all => return None,
            "removed_file" => ("removed".to_owned(), String::new()),
            "rescan" => (
                "rescan".to_owned(),
                "  (the watcher lost events: anything may have changed)".to_owned(),
            ),
            "remounted" => (
                "remounted".to_owned(),
                "  (a file system mounted or unmounted here: what is below may be other files)"
                    .to_owned(),
            ),
            "unwatched" => (
                "unwatched".to_owned(),
                "  (inotify's watch limit: changes below go unseen until it is mounted again)"
                    .to_owned(),
            ),
            change => (change.to_owned(), String::new()),
        },
        "mkdir" | "mknod" | "symlink" | "rmdir" => (op.clone(), String::new()),
        // A newer daemon's operation: named as it comes, with its fields.
        _ => (op.clone(), format!("  {}", extra_fields(r))),
    };
    let who = if op == "external" {
        // The process, when the watcher named one (fanotify does) and it was still there.
        match r.get("comm").and_then(Value::as_str) {
            Some(comm) => format!("behind: {comm}[{pid}]"),
            None => "behind the mount".to_owned(),
        }
    } else {
        match (r.get("comm").and_then(Value::as_str), pid) {
            (Some(comm), pid) => format!("{comm}[{pid}]"),
            (None, 0) => "-".to_owned(),
            (None, pid) => format!("pid {pid}"),
        }
    };
    Some(Line {
        time_ms: u("time_ms"),
        who,
        class: r
            .get("class")
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_owned(),
        op: name,
        path: s("path"),
        range,
        pid,
        detail,
    })
}

/// The fields of an observation other than those every line shows.
fn extra_fields(r: &Value) -> String {
    const SHOWN: &[&str] = &["op", "seq", "time_ms", "path", "pid", "class", "comm"];
    let rest: serde_json::Map<String, Value> = r
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !SHOWN.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if rest.is_empty() {
        String::new()
    } else {
        Value::Object(rest).to_string()
    }
}

fn size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    match bytes {
        b if b < KIB => format!("{b} B"),
        b if b < KIB * KIB => format!("{:.1} KiB", b as f64 / KIB as f64),
        b => format!("{:.1} MiB", b as f64 / (KIB * KIB) as f64),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obs(op: Value) -> Value {
        let mut v = json!({"seq": 1, "time_ms": 0, "path": "src/a.py", "pid": 42,
                           "class": "agent", "comm": "cat"});
        if let (Some(o), Some(extra)) = (v.as_object_mut(), op.as_object()) {
            o.extend(extra.clone());
        }
        v
    }

    fn lines(records: &[Value], all: bool) -> Vec<Line> {
        FileLines::new(all).lines(records)
    }

    fn rendered(records: &[Value], all: bool) -> Vec<String> {
        lines(records, all)
            .iter()
            // Without the clock, which depends on the machine's time zone.
            .map(|l| {
                l.render()
                    .split_once("  ")
                    .map_or_else(String::new, |(_, r)| r.to_owned())
            })
            .collect()
    }

    #[test]
    fn each_kind_of_observation_has_its_line() {
        let cases = [
            (
                json!({"op": "open", "read": true, "write": false, "truncate": false,
                    "created": false}),
                "open      src/a.py  for reading",
            ),
            (
                json!({"op": "open", "read": false, "write": true, "truncate": true,
                    "created": true}),
                "create    src/a.py  for writing, emptied",
            ),
            (
                json!({"op": "read", "offset": 0, "len": 4096}),
                "read      src/a.py  bytes 0-4095 (4.0 KiB)",
            ),
            (
                json!({"op": "write", "offset": 10, "len": 0}),
                "write     src/a.py  nothing, at byte 10",
            ),
            (
                json!({"op": "close", "wrote": true}),
                "close     src/a.py  (written)",
            ),
            (
                json!({"op": "truncate", "size": 3}),
                "truncate  src/a.py  to 3 bytes",
            ),
            (json!({"op": "read_dir"}), "list      src/a.py"),
            (
                json!({"op": "rename", "to": "src/b.py", "exchange": false, "dir": false}),
                "rename    src/a.py  -> src/b.py",
            ),
            (
                json!({"op": "rename", "to": "src/b.py", "exchange": true, "dir": false}),
                "exchange  src/a.py  <-> src/b.py",
            ),
            (
                json!({"op": "link", "target": "src/c.py"}),
                "link      src/a.py  (another name of src/c.py)",
            ),
            (json!({"op": "unlink"}), "remove    src/a.py"),
            (
                json!({"op": "copy_in", "from": "x", "offset": 0, "len": 2048}),
                "copy      src/a.py  bytes 0-2047 (2.0 KiB)  from x",
            ),
            (
                json!({"op": "something_new", "n": 1}),
                "something_new src/a.py  {\"n\":1}",
            ),
        ];
        for (op, want) in cases {
            let got = rendered(&[obs(op.clone())], false);
            assert_eq!(got.len(), 1, "{op}");
            let expected = format!("{:<22} {:<5}  {want}", "cat[42]", "agent");
            assert_eq!(got[0], expected, "{op}");
        }
    }

    #[test]
    fn changes_behind_the_mount_name_no_program() {
        let mut v = json!({"seq": 3, "time_ms": 0, "path": "", "pid": 0, "class": null,
                           "comm": null, "op": "external", "change": "modified"});
        let got = rendered(std::slice::from_ref(&v), false);
        assert_eq!(
            got,
            [format!(
                "{:<22} {:<5}  modified  .",
                "behind the mount", "-"
            )]
        );
        v["change"] = json!("removed_file");
        assert!(rendered(std::slice::from_ref(&v), false)[0].ends_with("removed   ."));
        v["change"] = json!("remounted");
        v["path"] = json!("build");
        assert!(
            rendered(std::slice::from_ref(&v), false)[0].ends_with(
                "remounted build  (a file system mounted or unmounted here: what is below may be \
                 other files)"
            ),
            "{:?}",
            rendered(std::slice::from_ref(&v), false)
        );
        v["path"] = json!("");
        // fanotify names the process behind a change.
        v["pid"] = json!(4411);
        v["comm"] = json!("git");
        assert!(
            rendered(std::slice::from_ref(&v), false)[0].starts_with("behind: git[4411]      -"),
            "{:?}",
            rendered(std::slice::from_ref(&v), false)
        );
    }

    #[test]
    fn reads_of_one_file_by_one_process_arriving_together_are_one_line() {
        let read = |pid: u64, offset: u64| {
            let mut v = obs(json!({"op": "read", "offset": offset, "len": 131072}));
            v["pid"] = json!(pid);
            v
        };
        // Out of order (two threads answered), then another process, then the first again
        // after a gap: three lines.
        let got = lines(
            &[
                read(42, 131072),
                read(42, 0),
                read(42, 262144),
                read(7, 0),
                read(42, 0),
            ],
            false,
        );
        let ranges: Vec<_> = got.iter().map(|l| (l.pid, l.range)).collect();
        assert_eq!(
            ranges,
            [
                (42, Some((0, 393216))),
                (7, Some((0, 131072))),
                (42, Some((0, 131072)))
            ]
        );
        // A read and a write of the same bytes are two things done.
        let write = obs(json!({"op": "write", "offset": 0, "len": 10}));
        assert_eq!(lines(&[read(42, 0), write], false).len(), 2);
    }

    #[test]
    fn a_close_is_shown_as_its_openers() {
        let mut p = FileLines::new(false);
        let open = obs(
            json!({"op": "open", "read": false, "write": true, "truncate": false,
                             "created": false}),
        );
        assert_eq!(p.lines(&[open]).len(), 1);
        // In a later notification, without the pid the kernel does not give for a close.
        let mut close = obs(json!({"op": "close", "wrote": true}));
        close["pid"] = json!(0);
        close["comm"] = json!(null);
        close["class"] = json!(null);
        let got = p.lines(&[close.clone()]);
        assert_eq!(
            (got[0].who.as_str(), got[0].class.as_str()),
            ("cat[42]", "agent")
        );
        // A file nobody was seen opening: no one is named.
        close["path"] = json!("other");
        let got = p.lines(&[close]);
        assert_eq!((got[0].who.as_str(), got[0].class.as_str()), ("-", "-"));
    }

    #[test]
    fn plain_closes_and_echoes_show_only_with_all() {
        let close = obs(json!({"op": "close", "wrote": false}));
        let echo = json!({"seq": 2, "time_ms": 0, "path": "a", "pid": 0, "class": null,
                          "comm": null, "op": "external", "change": "echo"});
        let records = [close, echo];
        assert!(lines(&records, false).is_empty());
        assert_eq!(lines(&records, true).len(), 2);
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 * 1024 * 1024), "3.0 MiB");
    }
}
