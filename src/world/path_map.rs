//! A map keyed by path that hashes the path's bytes once.
//!
//! A selection looks up every candidate in what the requester's previous selection offered,
//! kept and showed: 60,000 lookups in a world of 20,000 entries, each of them hashing a path.
//! `Path`'s own `Hash` walks the path for separators and feeds the hasher one component at a
//! time through SipHash; here the bytes go in one piece through FxHash. The paths are the
//! world's own normalized ones (no `.`, no doubled or trailing `/`), so equal paths have equal
//! bytes, and the keys are names from the user's own tree, not input chosen to collide.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustc_hash::FxHashMap;

/// Path -> `V`, by the path's bytes.
#[derive(Debug, Clone)]
pub(crate) struct PathMap<V> {
    map: FxHashMap<Box<[u8]>, V>,
}

impl<V> Default for PathMap<V> {
    fn default() -> Self {
        Self {
            map: FxHashMap::default(),
        }
    }
}

fn bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

impl<V> PathMap<V> {
    pub fn with_capacity(n: usize) -> Self {
        Self {
            map: FxHashMap::with_capacity_and_hasher(n, Default::default()),
        }
    }

    pub fn insert(&mut self, path: &Path, v: V) -> Option<V> {
        self.map.insert(bytes(path).into(), v)
    }

    pub fn get(&self, path: &Path) -> Option<&V> {
        self.map.get(bytes(path))
    }

    pub fn get_mut_or_insert_with(&mut self, path: &Path, f: impl FnOnce() -> V) -> &mut V {
        self.map.entry(bytes(path).into()).or_insert_with(f)
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.map.contains_key(bytes(path))
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&Path, &mut V) -> bool) {
        self.map
            .retain(|k, v| keep(Path::new(OsStr::from_bytes(k)), v));
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Path, &V)> {
        self.map
            .iter()
            .map(|(k, v)| (Path::new(OsStr::from_bytes(k)), v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &Path> {
        self.map.keys().map(|k| Path::new(OsStr::from_bytes(k)))
    }
}

impl<'a, V> FromIterator<(&'a Path, V)> for PathMap<V> {
    fn from_iter<I: IntoIterator<Item = (&'a Path, V)>>(iter: I) -> Self {
        let mut m = Self::default();
        for (p, v) in iter {
            m.insert(p, v);
        }
        m
    }
}

/// A set of paths, by their bytes ([`PathMap`]).
pub(crate) type PathSet = PathMap<()>;

impl<'a> FromIterator<&'a Path> for PathSet {
    fn from_iter<I: IntoIterator<Item = &'a Path>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut m = Self::with_capacity(iter.size_hint().0);
        for p in iter {
            m.insert(p, ());
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_by_path_and_gives_back_the_paths() {
        let mut m: PathMap<u32> = PathMap::default();
        assert_eq!(m.insert(Path::new("src/a.rs"), 1), None);
        assert_eq!(m.insert(Path::new("src/a.rs"), 2), Some(1));
        *m.get_mut_or_insert_with(Path::new("b"), || 10) += 1;
        assert_eq!(m.get(Path::new("src/a.rs")), Some(&2));
        assert_eq!(m.get(Path::new("b")), Some(&11));
        assert!(!m.contains(Path::new("src")));
        m.retain(|p, _| p != Path::new("b"));
        let keys: Vec<&Path> = m.keys().collect();
        assert_eq!(keys, [Path::new("src/a.rs")]);
        let s: PathSet = [Path::new("x"), Path::new("y/z")].into_iter().collect();
        assert!(s.contains(Path::new("y/z")) && s.len() == 2);
    }
}
