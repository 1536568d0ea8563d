//! The logical turn clock that ages entries.
//!
//! A harness that knows where turns are advances the clock explicitly. Without one, the agent's
//! rhythm is the best signal: tool calls come in bursts while the model works, separated by
//! pauses while it thinks, so a gap of `idle_gap` with no agent-attributed observation starts a
//! new turn at the next one. After a harness advance, gaps are ignored for `harness_grace`, so
//! the two sources do not double-count. Times are the observations' own, which keeps replays
//! deterministic.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;

use super::config::TurnsConfig;

pub struct TurnClock {
    turn: AtomicU64,
    idle_gap: Duration,
    harness_grace: Duration,
    times: Mutex<Times>,
}

#[derive(Default)]
struct Times {
    last_agent: Option<SystemTime>,
    last_harness: Option<SystemTime>,
}

/// How long from `earlier` to `later`, zero if the clock went backwards.
fn since(later: SystemTime, earlier: SystemTime) -> Duration {
    later.duration_since(earlier).unwrap_or(Duration::ZERO)
}

impl TurnClock {
    pub fn new(cfg: &TurnsConfig) -> Self {
        Self {
            turn: AtomicU64::new(0),
            idle_gap: Duration::from_millis(cfg.idle_gap_ms),
            harness_grace: Duration::from_millis(cfg.harness_grace_ms),
            times: Mutex::new(Times::default()),
        }
    }

    pub fn current(&self) -> u64 {
        self.turn.load(Ordering::Acquire)
    }

    /// Goes on from `turn`, where a saved world left off (`snapshot`).
    pub fn resume_at(&self, turn: u64) {
        self.turn.store(turn, Ordering::Release);
    }

    /// A harness says a new turn starts now. Returns the new turn.
    pub fn advance(&self, now: SystemTime) -> u64 {
        let mut t = self.times.lock();
        t.last_harness = Some(now);
        self.turn.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Agent activity at `at`; returns the turn it belongs to, starting a new one after an idle
    /// gap when no harness is driving.
    pub fn agent_activity(&self, at: SystemTime) -> u64 {
        let mut t = self.times.lock();
        let harness_driving = t
            .last_harness
            .is_some_and(|h| since(at, h) < self.harness_grace);
        let gap = t
            .last_agent
            .is_some_and(|last| since(at, last) >= self.idle_gap);
        if gap && !harness_driving {
            self.turn.fetch_add(1, Ordering::AcqRel);
        }
        if t.last_agent.is_none_or(|last| at > last) {
            t.last_agent = Some(at);
        }
        self.current()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn clock() -> TurnClock {
        TurnClock::new(&TurnsConfig {
            idle_gap_ms: 2000,
            harness_grace_ms: 10_000,
        })
    }

    #[test]
    fn idle_gaps_advance_without_harness() {
        let c = clock();
        assert_eq!(c.agent_activity(t(0)), 0);
        assert_eq!(c.agent_activity(t(1500)), 0);
        assert_eq!(
            c.agent_activity(t(3400)),
            0,
            "gap measured from the last activity"
        );
        assert_eq!(c.agent_activity(t(5400)), 1);
        assert_eq!(
            c.agent_activity(t(5000)),
            1,
            "out-of-order time never advances"
        );
    }

    #[test]
    fn harness_advance_suppresses_idle_gaps_for_a_while() {
        let c = clock();
        c.agent_activity(t(0));
        assert_eq!(c.advance(t(100)), 1);
        assert_eq!(c.agent_activity(t(5000)), 1, "harness is driving");
        assert_eq!(c.agent_activity(t(20_000)), 2, "harness went quiet");
    }
}
