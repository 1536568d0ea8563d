//! Recognising, in the text of a recorded shell command, the git invocations that change files
//! without the trace saying how: `git checkout`/`git restore` of paths (put back as in the base)
//! and `git stash`. Recorded commands are never run, so their words are all the replay has; what
//! is not understood for certain is left alone, since a wrong guess would change files.

/// The paths `command` puts back as they are in the last commit: the arguments of
/// `git checkout [HEAD] [--] PATH...` and `git restore [--worktree] [--] PATH...`, in any of
/// its `&&`, `||`, `;`, `|` or newline separated parts. Forms that name another commit or
/// directory, or take other options, are left alone: their effect is not the base.
pub(super) fn git_restored(command: &str) -> Vec<String> {
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
pub(super) enum Stash {
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
pub(super) fn git_stashes(command: &str) -> Vec<Stash> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
