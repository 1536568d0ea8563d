//! Reuse of rendered projections, kept as the JSON they serialize to.
//!
//! A projection depends on SOURCE (whose every change bumps the world's generation), on the
//! turn, on the harness state (every mutating method bumps the generation too) and on the
//! request. A render is reused only while all of these are what they were when it started, so
//! a reused projection is never older than a fresh one would be.
//!
//! Kept serialized because that is what a hit needs: the response line is the cached bytes with
//! the id around them, instead of a deep clone of an 80 KB `Value` and its serialization on
//! every call. When a change makes every client miss at once, they wait for one render of each
//! request shape instead of all rendering the same world (on a small machine that herd costs
//! more than the render itself).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde::Serialize;

use super::render::{ProjectionParams, Rendered};
use crate::world::World;

/// Renders kept for reuse: one per distinct request shape in use.
const KEPT: usize = 8;

/// A rendered projection, serialized.
#[derive(Debug)]
pub struct Cached {
    /// The result's compact JSON (`serde_json::to_string` of the rendered value).
    pub json: Arc<str>,
    pub tokens: u64,
}

/// What a rendered projection depends on besides SOURCE, whose changes bump the generation.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    params: ProjectionParams,
    generation: u64,
    turn: u64,
}

impl Key {
    fn now(world: &World, params: ProjectionParams) -> Key {
        Key {
            params,
            generation: world.generation(),
            turn: world.turn(),
        }
    }
}

/// How often renders were made and reused (for `stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RenderCounts {
    pub rendered: u64,
    pub reused: u64,
}

#[derive(Default)]
pub struct RenderCache {
    kept: Mutex<Vec<(Key, Arc<Cached>)>>,
    /// One lock per request shape being rendered; only entries someone holds are kept.
    flights: Mutex<Vec<(ProjectionParams, Arc<Mutex<()>>)>>,
    rendered: AtomicU64,
    reused: AtomicU64,
}

impl RenderCache {
    pub fn counts(&self) -> RenderCounts {
        RenderCounts {
            rendered: self.rendered.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
        }
    }

    /// The projection for `params` of the world as it is now: reused if nothing it depends on
    /// changed since it was rendered, else rendered with `render`. `reuse: false` renders it
    /// anew (right when changes to SOURCE may go unseen), and keeps nothing.
    pub fn get(
        &self,
        world: &World,
        params: ProjectionParams,
        reuse: bool,
        render: impl FnOnce(&ProjectionParams) -> Result<Rendered, String>,
    ) -> Result<Arc<Cached>, String> {
        if !reuse {
            return self.render(&params, render);
        }
        let key = Key::now(world, params);
        if let Some(hit) = self.lookup(&key) {
            return Ok(hit);
        }
        let flight = self.flight(&key.params);
        let _rendering = flight.lock();
        // Whoever held the lock may have rendered this world already; and the world may have
        // changed while we waited, so the key is taken again: newer is never stale.
        let key = Key::now(world, key.params);
        if let Some(hit) = self.lookup(&key) {
            return Ok(hit);
        }
        let cached = self.render(&key.params, render)?;
        let mut kept = self.kept.lock();
        kept.retain(|(k, _)| k.params != key.params);
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push((key, Arc::clone(&cached)));
        Ok(cached)
    }

    fn lookup(&self, key: &Key) -> Option<Arc<Cached>> {
        // Only the Arc is taken under the lock: nothing is copied while other clients wait.
        let hit = self
            .kept
            .lock()
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, c)| Arc::clone(c));
        if hit.is_some() {
            self.reused.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    fn flight(&self, params: &ProjectionParams) -> Arc<Mutex<()>> {
        let mut flights = self.flights.lock();
        // Clones are only made under this lock, so a count of one means nobody holds or waits.
        flights.retain(|(_, f)| Arc::strong_count(f) > 1);
        if let Some((_, f)) = flights.iter().find(|(p, _)| p == params) {
            return Arc::clone(f);
        }
        let f = Arc::new(Mutex::new(()));
        flights.push((params.clone(), Arc::clone(&f)));
        f
    }

    fn render(
        &self,
        params: &ProjectionParams,
        render: impl FnOnce(&ProjectionParams) -> Result<Rendered, String>,
    ) -> Result<Arc<Cached>, String> {
        let r = render(params)?;
        self.rendered.fetch_add(1, Ordering::Relaxed);
        let json = serde_json::to_string(&r.value)
            .map_err(|e| format!("serializing the projection: {e}"))?;
        Ok(Arc::new(Cached {
            json: json.into(),
            tokens: r.tokens,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::projection::{Format, StepOutput};

    fn world() -> (tempfile::TempDir, Arc<World>) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let w = World::builder_at(dir.path())
            .and_then(|b| b.build())
            .unwrap_or_else(|e| panic!("{e}"));
        (dir, w)
    }

    fn params(budget_tokens: u64) -> ProjectionParams {
        ProjectionParams {
            format: Format::Anthropic,
            budget_tokens,
            policy: None,
            tool_name: None,
            path_param: None,
            max_breakpoints: None,
            cache_ttl: None,
            absolute_paths: false,
            step_output: StepOutput::ShownOnce,
            last_step: true,
            line_numbers: None,
            evicted_limit: crate::socket::render::DEFAULT_EVICTED_LIMIT,
            session: None,
            request_shows: Vec::new(),
            request_outputs: Vec::new(),
            shown_calls: Vec::new(),
        }
    }

    /// A renderer that numbers its renders, so a reuse shows as an unchanged number.
    fn numbered(n: &AtomicUsize) -> impl Fn(&ProjectionParams) -> Result<Rendered, String> + '_ {
        move |_| {
            let i = n.fetch_add(1, Ordering::SeqCst);
            Ok(Rendered {
                value: json!({ "render": i, "text": "quote \" and \u{e9}" }),
                tokens: 3,
            })
        }
    }

    #[test]
    fn a_render_is_reused_only_while_nothing_it_depends_on_changed() {
        let (_dir, w) = world();
        let cache = RenderCache::default();
        let n = AtomicUsize::new(0);
        let get = |budget| {
            cache
                .get(&w, params(budget), true, numbered(&n))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let first = get(8000);
        assert_eq!(&*first.json, r#"{"render":0,"text":"quote \" and é"}"#);
        assert_eq!(first.tokens, 3);
        assert_eq!(get(8000).json, first.json, "unchanged world: reused");
        w.bump_generation();
        assert_eq!(&*get(8000).json, r#"{"render":1,"text":"quote \" and é"}"#);
        w.advance_turn();
        assert!(
            get(8000).json.contains(r#""render":2"#),
            "a new turn renders"
        );
        assert!(
            get(4000).json.contains(r#""render":3"#),
            "other params render"
        );
        assert!(
            get(8000).json.contains(r#""render":2"#),
            "both shapes are kept"
        );
        assert_eq!(
            cache.counts(),
            RenderCounts {
                rendered: 4,
                reused: 2
            }
        );
    }

    #[test]
    fn without_reuse_every_call_renders() {
        let (_dir, w) = world();
        let cache = RenderCache::default();
        let n = AtomicUsize::new(0);
        for _ in 0..3 {
            let _ = cache.get(&w, params(8000), false, numbered(&n));
        }
        assert_eq!(n.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn clients_missing_together_wait_for_one_render() {
        let (_dir, w) = world();
        let cache = RenderCache::default();
        let n = AtomicUsize::new(0);
        let start = Barrier::new(8);
        let slow = |p: &ProjectionParams| {
            std::thread::sleep(Duration::from_millis(50));
            numbered(&n)(p)
        };
        let got: Vec<Arc<str>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        cache
                            .get(&w, params(8000), true, slow)
                            .map(|c| Arc::clone(&c.json))
                            .unwrap_or_else(|e| panic!("{e}"))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| panic!("a client panicked")))
                .collect()
        });
        assert_eq!(n.load(Ordering::SeqCst), 1, "one render for all");
        assert!(got.iter().all(|j| *j == got[0]));
    }
}
