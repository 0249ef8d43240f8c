//! Trace-level filters (reference §2.2): a span whose payloads exceed `max_span_bytes`, or a
//! SERVER span with ERROR status, blocks its whole trace; later spans of a blocked trace are
//! dropped. The blocked set is bounded in size and age so it cannot grow without limit.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// The estimate the reference adds to the payload sizes (bytes).
pub const SPAN_OVERHEAD_BYTES: usize = 50_000;

/// Remembers blocked traces for `ttl`, at most `capacity` of them (oldest evicted first).
#[derive(Debug)]
pub struct TraceFilter {
    blocked: HashMap<String, Instant>,
    order: VecDeque<(Instant, String)>,
    capacity: usize,
    ttl: Duration,
}

impl Default for TraceFilter {
    fn default() -> Self {
        TraceFilter::new(100_000, Duration::from_secs(600))
    }
}

impl TraceFilter {
    /// A filter remembering up to `capacity` traces for `ttl` each.
    pub fn new(capacity: usize, ttl: Duration) -> TraceFilter {
        TraceFilter {
            blocked: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            ttl,
        }
    }

    /// Whether `trace_id` is blocked now.
    pub fn is_blocked(&mut self, trace_id: &str) -> bool {
        self.expire(Instant::now());
        self.blocked.contains_key(trace_id)
    }

    /// Blocks `trace_id`.
    pub fn block(&mut self, trace_id: &str) {
        let now = Instant::now();
        self.expire(now);
        if self.blocked.insert(trace_id.to_string(), now).is_none() {
            self.order.push_back((now, trace_id.to_string()));
        }
        while self.blocked.len() > self.capacity {
            if let Some((_, id)) = self.order.pop_front() {
                self.blocked.remove(&id);
            }
        }
    }

    /// Number of traces blocked now.
    pub fn len(&self) -> usize {
        self.blocked.len()
    }

    /// True when no trace is blocked.
    pub fn is_empty(&self) -> bool {
        self.blocked.is_empty()
    }

    fn expire(&mut self, now: Instant) {
        while let Some((t, _)) = self.order.front() {
            if now.duration_since(*t) < self.ttl {
                break;
            }
            let (_, id) = self.order.pop_front().expect("front exists");
            self.blocked.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_expiring() {
        let mut f = TraceFilter::new(2, Duration::from_secs(60));
        f.block("a");
        f.block("b");
        f.block("c");
        assert_eq!(f.len(), 2);
        assert!(!f.is_blocked("a"));
        assert!(f.is_blocked("c"));
        let mut f = TraceFilter::new(10, Duration::ZERO);
        f.block("a");
        assert!(!f.is_blocked("a"));
    }
}
