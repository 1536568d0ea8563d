//! Subscriptions: one fan-out thread follows the world's ring of recent observations and offers
//! each subscriber the matching ones as JSON-RPC notifications; each projection served is offered
//! to the subscribers of projections by the thread that served it.
//!
//! Ingest never waits on a subscriber: the ingest thread only pushes into the ring. The fan-out
//! thread never waits either: each connection has a bounded queue of outgoing notifications and
//! the fan-out `try_send`s into it. When a queue is full (a slow or stuck client) the
//! observations are counted as dropped and the next notification that gets through says how many
//! were lost; so does `stats`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, UNIX_EPOCH};

use crossbeam_channel::{Sender, TrySendError};
use parking_lot::RwLock;
use serde::Deserialize;
use serde_json::{Value, json};

use super::protocol;
use crate::world::recent::Record;
use crate::world::{Class, World};

/// Method name of subscription notifications.
pub const NOTIFICATION: &str = "observations";
/// Method name of the notifications of projections served.
pub const PROJECTIONS: &str = "projections";
/// Method name of the notifications of model calls a proxy reported (`proxy.record`), sent to
/// the subscribers of projections.
pub const MODEL_CALLS: &str = "model_calls";
/// Method name of the notifications of steps recorded (`step.record`), sent to the subscribers
/// of projections: the tool calls those projections follow.
pub const STEPS: &str = "steps";
/// Most observations per notification.
const CHUNK: usize = 512;
/// How often the fan-out thread looks at the stop flag when nothing happens.
const TICK: Duration = Duration::from_millis(200);
/// Most subscriptions per connection: each costs filtering work on every observation.
pub const MAX_PER_CONNECTION: usize = 16;

/// A record as JSON: the observation (its `op` fields inline), plus class and program.
pub fn record_json(r: &Record) -> Value {
    let obs = &r.obs;
    let mut v = match serde_json::to_value(&obs.op) {
        Ok(Value::Object(m)) => m,
        // A path that is not UTF-8 (in a rename target, say) cannot be serialized by serde.
        _ => serde_json::Map::from_iter([("op".to_string(), Value::from("unrepresentable"))]),
    };
    // Lossy on purpose: paths are for humans and matching, and must never fail to serialize.
    for key in ["to", "target", "from"] {
        if let Some(p) = op_path(&obs.op, key) {
            v.insert(key.into(), Value::from(p.to_string_lossy().into_owned()));
        }
    }
    v.insert("seq".into(), Value::from(obs.seq));
    let ms = obs
        .time
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    v.insert("time_ms".into(), Value::from(ms));
    v.insert(
        "path".into(),
        Value::from(obs.path.to_string_lossy().into_owned()),
    );
    v.insert("pid".into(), Value::from(obs.pid));
    v.insert("class".into(), class_json(r.class));
    v.insert(
        "comm".into(),
        r.comm.as_deref().map_or(Value::Null, Value::from),
    );
    Value::Object(v)
}

fn op_path<'a>(op: &'a crate::observation::Op, key: &str) -> Option<&'a std::path::Path> {
    use crate::observation::Op;
    match (op, key) {
        (Op::Rename { to, .. }, "to") => Some(to),
        (Op::Link { target }, "target") => Some(target),
        (Op::CopyIn { from, .. }, "from") => Some(from),
        _ => None,
    }
}

fn class_json(c: Option<Class>) -> Value {
    match c {
        Some(Class::Agent) => "agent".into(),
        Some(Class::Weak) => "weak".into(),
        Some(Class::Scan) => "scan".into(),
        None => Value::Null,
    }
}

/// Which observations a subscriber (or `changes.since`) wants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// Classes to include: "agent", "weak", "scan", "none" (unattributed or external); all
    /// when absent.
    #[serde(default)]
    pub classes: Option<Vec<ClassFilter>>,
    /// Only paths at or below this relative path.
    #[serde(default)]
    pub prefix: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassFilter {
    Agent,
    Weak,
    Scan,
    None,
}

impl Filter {
    pub fn matches(&self, r: &Record) -> bool {
        if let Some(classes) = &self.classes {
            let want = match r.class {
                Some(Class::Agent) => ClassFilter::Agent,
                Some(Class::Weak) => ClassFilter::Weak,
                Some(Class::Scan) => ClassFilter::Scan,
                None => ClassFilter::None,
            };
            if !classes.contains(&want) {
                return false;
            }
        }
        match &self.prefix {
            Some(p) if !p.as_os_str().is_empty() => r.obs.path.starts_with(p),
            _ => true,
        }
    }
}

/// What a subscriber is sent.
enum Wants {
    Observations(Filter),
    Projections,
}

struct Sub {
    id: u64,
    conn: u64,
    wants: Wants,
    out: Sender<Vec<u8>>,
    /// Lost since the last notification that got through.
    pending_dropped: AtomicU64,
}

/// Every live subscription, and the fan-out thread's controls.
#[derive(Default)]
pub struct Registry {
    subs: RwLock<Vec<Arc<Sub>>>,
    next_id: AtomicU64,
    dropped_total: AtomicU64,
    delivered_total: AtomicU64,
    stop: AtomicBool,
}

impl Registry {
    /// Adds a subscription to observations for connection `conn`, whose notifications go to
    /// `out`.
    pub fn subscribe(&self, conn: u64, filter: Filter, out: Sender<Vec<u8>>) -> Result<u64, usize> {
        self.add(conn, Wants::Observations(filter), out)
    }

    /// Adds a subscription to the projections served, for connection `conn`.
    pub fn subscribe_projections(&self, conn: u64, out: Sender<Vec<u8>>) -> Result<u64, usize> {
        self.add(conn, Wants::Projections, out)
    }

    fn add(&self, conn: u64, wants: Wants, out: Sender<Vec<u8>>) -> Result<u64, usize> {
        let mut subs = self.subs.write();
        let mine = subs.iter().filter(|s| s.conn == conn).count();
        if mine >= MAX_PER_CONNECTION {
            return Err(mine);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        subs.push(Arc::new(Sub {
            id,
            conn,
            wants,
            out,
            pending_dropped: AtomicU64::new(0),
        }));
        Ok(id)
    }

    /// Removes subscription `id` if it belongs to `conn`.
    pub fn unsubscribe(&self, conn: u64, id: u64) -> bool {
        let mut subs = self.subs.write();
        let before = subs.len();
        subs.retain(|s| !(s.id == id && s.conn == conn));
        subs.len() != before
    }

    /// Removes every subscription of a closed connection.
    pub fn drop_connection(&self, conn: u64) {
        self.subs.write().retain(|s| s.conn != conn);
    }

    pub fn count(&self) -> usize {
        self.subs.read().len()
    }

    /// Whether anyone is subscribed to the projections served: the event is built only then.
    pub fn wants_projections(&self) -> bool {
        self.subs
            .read()
            .iter()
            .any(|s| matches!(s.wants, Wants::Projections))
    }

    /// Offers `event`, a projection just served, to its subscribers. Never waits: a subscriber
    /// whose queue is full is told how many it missed with the next one that gets through.
    pub fn publish_projection(&self, event: &Value) {
        self.publish_told(PROJECTIONS, "projection", event);
    }

    /// Offers `event`, a model call a proxy reported, to the subscribers of projections: it
    /// says what the projection was sent instead of.
    pub fn publish_model_call(&self, event: &Value) {
        self.publish_told(MODEL_CALLS, "call", event);
    }

    /// Offers `event`, a step just recorded, to the subscribers of projections.
    pub fn publish_step(&self, event: &Value) {
        self.publish_told(STEPS, "step", event);
    }

    fn publish_told(&self, method: &str, field: &str, event: &Value) {
        let subs: Vec<Arc<Sub>> = self
            .subs
            .read()
            .iter()
            .filter(|s| matches!(s.wants, Wants::Projections))
            .cloned()
            .collect();
        for sub in subs {
            let pending = sub.pending_dropped.load(Ordering::Relaxed);
            let mut params = json!({ "subscription": sub.id, "dropped": pending });
            params[field] = event.clone();
            let line = protocol::notification(method, params);
            match sub.out.try_send(line) {
                Ok(()) => {
                    sub.pending_dropped.fetch_sub(pending, Ordering::Relaxed);
                }
                Err(TrySendError::Full(_)) => {
                    sub.pending_dropped.fetch_add(1, Ordering::Relaxed);
                }
                // The connection's end removes its subscriptions.
                Err(TrySendError::Disconnected(_)) => {}
            }
        }
    }

    /// Observations that could not be delivered to some subscriber.
    pub fn dropped_total(&self) -> u64 {
        self.dropped_total.load(Ordering::Relaxed)
    }

    pub fn delivered_total(&self) -> u64 {
        self.delivered_total.load(Ordering::Relaxed)
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// Starts the fan-out thread; it ends after [`Registry::stop`].
    pub fn spawn_fanout(self: &Arc<Self>, world: Arc<World>) -> std::io::Result<JoinHandle<()>> {
        let me = Arc::clone(self);
        // Subscribers get what happens after they subscribe, not the ring's past. The start
        // is taken here, not in the new thread: a thread scheduled late would otherwise start
        // past observations made after a subscription it never delivered them to.
        let cursor = world.recent().pushed();
        std::thread::Builder::new()
            .name("worldfs-sock-fanout".into())
            .spawn(move || me.fanout(&world, cursor))
    }

    fn fanout(&self, world: &World, mut cursor: u64) {
        let recent = world.recent();
        while !self.stop.load(Ordering::Acquire) {
            if !recent.wait_past(cursor, TICK) {
                continue;
            }
            let got = recent.from_index(cursor, CHUNK);
            cursor = got.next_index;
            let subs: Vec<Arc<Sub>> = self
                .subs
                .read()
                .iter()
                .filter(|s| matches!(s.wants, Wants::Observations(_)))
                .cloned()
                .collect();
            if subs.is_empty() {
                continue;
            }
            // Serialized once per batch, shared by every subscriber.
            let json: Vec<Value> = got.records.iter().map(record_json).collect();
            let mut gone = Vec::new();
            for sub in &subs {
                let Wants::Observations(filter) = &sub.wants else {
                    continue;
                };
                if got.missed > 0 {
                    sub.pending_dropped.fetch_add(got.missed, Ordering::Relaxed);
                    self.dropped_total.fetch_add(got.missed, Ordering::Relaxed);
                }
                let matched: Vec<&Value> = got
                    .records
                    .iter()
                    .zip(&json)
                    .filter(|(r, _)| filter.matches(r))
                    .map(|(_, j)| j)
                    .collect();
                let pending = sub.pending_dropped.load(Ordering::Relaxed);
                if matched.is_empty() && pending == 0 {
                    continue;
                }
                let n = matched.len() as u64;
                let line = protocol::notification(
                    NOTIFICATION,
                    json!({ "subscription": sub.id, "observations": matched, "dropped": pending }),
                );
                match sub.out.try_send(line) {
                    Ok(()) => {
                        sub.pending_dropped.fetch_sub(pending, Ordering::Relaxed);
                        self.delivered_total.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(TrySendError::Full(_)) => {
                        sub.pending_dropped.fetch_add(n, Ordering::Relaxed);
                        self.dropped_total.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(TrySendError::Disconnected(_)) => gone.push(sub.id),
                }
            }
            if !gone.is_empty() {
                self.subs.write().retain(|s| !gone.contains(&s.id));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::observation::{Observation, Op};
    use crate::world::journal::JournalItem;

    fn rec(path: &str, class: Option<Class>) -> Record {
        Arc::new(JournalItem {
            obs: Observation {
                seq: 7,
                time: SystemTime::UNIX_EPOCH + Duration::from_millis(1500),
                op: Op::Rename {
                    to: "b".into(),
                    exchange: false,
                    dir: false,
                },
                path: path.into(),
                pid: 9,
                caller: None,
            },
            class,
            comm: Some(Arc::from("mv")),
        })
    }

    #[test]
    fn records_serialize_flat() {
        let v = record_json(&rec("src/a", Some(Class::Agent)));
        assert_eq!(
            v,
            json!({"op":"rename","to":"b","exchange":false,"dir":false,"seq":7,"time_ms":1500,
                   "path":"src/a","pid":9,"class":"agent","comm":"mv"})
        );
    }

    #[test]
    fn filters_by_class_and_prefix() {
        let f: Filter = serde_json::from_value(json!({"classes":["agent","none"],"prefix":"src"}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(f.matches(&rec("src/a", Some(Class::Agent))));
        assert!(f.matches(&rec("src/a", None)));
        assert!(!f.matches(&rec("src/a", Some(Class::Scan))));
        assert!(!f.matches(&rec("srcx/a", Some(Class::Agent))));
        assert!(Filter::default().matches(&rec("x", Some(Class::Scan))));
    }

    #[test]
    fn subscriptions_are_per_connection_and_capped() {
        let r = Registry::default();
        let (tx, _rx) = crossbeam_channel::bounded(1);
        let a = r.subscribe(1, Filter::default(), tx.clone());
        let Ok(a) = a else { panic!("refused") };
        assert!(!r.unsubscribe(2, a), "another connection cannot cancel it");
        assert!(r.unsubscribe(1, a));
        for _ in 0..MAX_PER_CONNECTION {
            assert!(r.subscribe(1, Filter::default(), tx.clone()).is_ok());
        }
        assert!(r.subscribe(1, Filter::default(), tx.clone()).is_err());
        r.drop_connection(1);
        assert_eq!(r.count(), 0);
    }

    #[test]
    fn projections_go_to_their_subscribers_alone_and_losses_are_told() {
        let r = Registry::default();
        assert!(!r.wants_projections());
        let (obs_tx, obs_rx) = crossbeam_channel::bounded(4);
        let (tx, rx) = crossbeam_channel::bounded(1);
        assert!(r.subscribe(1, Filter::default(), obs_tx).is_ok());
        assert!(!r.wants_projections());
        let Ok(id) = r.subscribe_projections(2, tx) else {
            panic!("refused")
        };
        assert!(r.wants_projections());
        let event = json!({"tokens": 10});
        // The queue holds one: the next two are lost, and the one after says so.
        for _ in 0..3 {
            r.publish_projection(&event);
        }
        assert!(
            obs_rx.try_recv().is_err(),
            "not to a subscriber of observations"
        );
        let first: Value = serde_json::from_slice(&rx.try_recv().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first["method"], PROJECTIONS);
        assert_eq!(first["params"]["subscription"], id);
        assert_eq!(first["params"]["projection"], event);
        assert_eq!(first["params"]["dropped"], 0);
        r.publish_projection(&event);
        let next: Value = serde_json::from_slice(&rx.try_recv().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(next["params"]["dropped"], 2);
        assert!(r.unsubscribe(2, id));
        assert!(!r.wants_projections());
    }
}
