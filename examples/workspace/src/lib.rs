//! Counting lines, words and bytes, like `wc`.

/// Counts of one input.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub lines: usize,
    pub words: usize,
    pub bytes: usize,
}

/// Count lines, whitespace-separated words and bytes of `text`.
pub fn count(text: &str) -> Counts {
    Counts {
        lines: text.lines().count(),
        words: text.split_whitespace().count(),
        bytes: text.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_a_sentence() {
        let c = count("one two\nthree\n");
        assert_eq!(c, Counts { lines: 2, words: 3, bytes: 14 });
    }
}
