//! Replay: answers an app's outbound calls from a recording.
//!
//! [`Recording::open`] loads a recordings directory (`loader.rs`): every span's input hashes
//! are recomputed with [`crate::payload`], the code the exporter records with, so requests
//! and recordings are hashed by one code path whatever recorder wrote the files. Spans are
//! indexed per trace and suite-wide (`index.rs`). [`Recording::find_mock`] runs the matching
//! cascade of the Tusk Drift CLI (`matcher.rs`): value hash, reduced value hash, suite value
//! hashes, then schema hashes with an HTTP shape guard and similarity ranking. A match
//! consumes its span atomically, so concurrent callers (threads, worker threads sharing the
//! recording) never both get the same span while another is unused.
//!
//! ```no_run
//! use offloop::replay::{Levels, LoadOptions, MockRequest, Recording};
//!
//! let rec = Recording::open("./recordings", &LoadOptions::default()).unwrap();
//! let req = MockRequest {
//!     trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
//!     package_name: "pg".into(),
//!     input_value: r#"{"text":"SELECT 1","values":[]}"#.into(),
//!     input_schema_merges: Some(r#"{"values":{"matchImportance":0}}"#.into()),
//!     ..MockRequest::default()
//! };
//! let outcome = rec.find_mock(&req, Levels::All).unwrap();
//! if let Some(m) = &outcome.found {
//!     println!("{} at {}: {}", m.span.span_id(), m.match_type.name(), m.span.output_value());
//! }
//! ```

pub mod hashing;
mod index;
mod loader;
mod matcher;
mod shape;
pub mod similarity;
mod span;
pub mod struct_json;

use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use rustc_hash::FxHashMap;

pub use loader::{LoadOptions, Skipped};
pub use matcher::{Candidate, Level, Levels, MockMatch, MockRequest, Outcome, RequestHashes};
pub use span::{RecordedSpan, Source, SpanHashes, Time};

use crate::hash::HashAlgorithm;
use index::Indexes;

/// `tusk.drift.backend.v1.MatchType`: how a mock was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatchType {
    /// Same input value hash.
    InputValueHash = 1,
    /// Same input value hash once `matchImportance: 0` fields are removed.
    InputValueHashReducedSchema = 2,
    /// Same input schema hash (ranked by similarity).
    InputSchemaHash = 3,
    /// Same reduced input schema hash (ranked by similarity).
    InputSchemaHashReducedSchema = 4,
}

impl MatchType {
    /// All match types, in enum order.
    pub const ALL: [MatchType; 4] = [
        MatchType::InputValueHash,
        MatchType::InputValueHashReducedSchema,
        MatchType::InputSchemaHash,
        MatchType::InputSchemaHashReducedSchema,
    ];

    /// The proto enum name without its `MATCH_TYPE_` prefix.
    pub fn name(self) -> &'static str {
        match self {
            MatchType::InputValueHash => "INPUT_VALUE_HASH",
            MatchType::InputValueHashReducedSchema => "INPUT_VALUE_HASH_REDUCED_SCHEMA",
            MatchType::InputSchemaHash => "INPUT_SCHEMA_HASH",
            MatchType::InputSchemaHashReducedSchema => "INPUT_SCHEMA_HASH_REDUCED_SCHEMA",
        }
    }

    /// The proto enum number.
    pub fn code(self) -> u32 {
        self as u32
    }
}

/// `tusk.drift.backend.v1.MatchScope`: where the matched span came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatchScope {
    /// The request's own trace (test).
    Trace = 1,
    /// Any trace of the recording (the suite).
    Global = 2,
}

impl MatchScope {
    /// The proto enum name without its `MATCH_SCOPE_` prefix.
    pub fn name(self) -> &'static str {
        match self {
            MatchScope::Trace => "TRACE",
            MatchScope::Global => "GLOBAL",
        }
    }

    /// The proto enum number.
    pub fn code(self) -> u32 {
        self as u32
    }
}

/// Span flag: handed out by a match.
const USED: u8 = 1;
/// Span flag: recorded before the app was ready.
const PRE_APP_START: u8 = 2;

/// A loaded, indexed recording. `Send + Sync`: share it behind an `Arc`.
#[derive(Debug)]
pub struct Recording {
    spans: Vec<RecordedSpan>,
    /// Per span, by number: [`USED`] and [`PRE_APP_START`]. Kept apart from the spans (several
    /// hundred bytes each) so the matcher's claims and filters touch one small, hot array
    /// instead of a cold cache line per candidate.
    flags: Box<[AtomicU8]>,
    /// Trace and package numbers (Fx: short keys, looked up on every request).
    traces: FxHashMap<String, u32>,
    packages: FxHashMap<String, u32>,
    index: Indexes,
    algo: HashAlgorithm,
    files: usize,
    skipped: u64,
    reasons: Vec<Skipped>,
    duplicates: u64,
    load_time: Duration,
    by_priority: [AtomicU64; 16],
    misses: AtomicU64,
}

/// Counters of a recording (see [`Recording::stats`]).
#[derive(Clone, Debug)]
pub struct Stats {
    /// Recording files read.
    pub files: usize,
    /// Distinct traces.
    pub traces: usize,
    /// Spans loaded (after dropping duplicates).
    pub spans: usize,
    /// Lines or records skipped.
    pub skipped_lines: u64,
    /// The first few skipped lines, with file, line and reason.
    pub skipped: Vec<Skipped>,
    /// Spans seen again with the same trace and span id (the first one is kept).
    pub duplicate_spans: u64,
    /// Time taken by [`Recording::open`].
    pub load_time: Duration,
    /// The digest of the recomputed hashes.
    pub hash: HashAlgorithm,
    /// Matches per match type.
    pub matches_by_type: Vec<(MatchType, u64)>,
    /// Matches per cascade priority (index = priority, 1–15).
    pub matches_by_priority: [u64; 16],
    /// Requests that found nothing.
    pub misses: u64,
}

impl Recording {
    /// Loads every recording file in `dir` (see [`loader`](self#)); lines that cannot be used
    /// are skipped and reported in [`Recording::stats`]. Fails only when `dir` cannot be read.
    pub fn open(dir: impl AsRef<Path>, opts: &LoadOptions) -> io::Result<Recording> {
        let t0 = Instant::now();
        let loaded = loader::load(dir.as_ref(), opts)?;
        let mut rec = Recording::build(loaded, opts.hash);
        rec.load_time = t0.elapsed();
        Ok(rec)
    }

    fn build(loaded: loader::Loaded, algo: HashAlgorithm) -> Recording {
        let mut spans = loaded.spans;
        let before = spans.len();
        let keep: Vec<bool> = {
            let mut seen = HashSet::with_capacity(spans.len());
            spans
                .iter()
                .map(|s| seen.insert((s.trace_id(), s.span_id())))
                .collect()
        };
        let mut keep = keep.into_iter();
        spans.retain(|_| keep.next().unwrap_or(false));
        let duplicates = (before - spans.len()) as u64;
        // Matcher order: oldest first (no timestamp first), then span id, then file and line
        // order. Sorted as indices: a span is a few hundred bytes, so each moves only once.
        let mut order: Vec<u32> = (0..spans.len() as u32).collect();
        order.par_sort_unstable_by(|&a, &b| {
            let (x, y) = (&spans[a as usize], &spans[b as usize]);
            x.timestamp
                .cmp(&y.timestamp)
                .then_with(|| x.span_id().cmp(y.span_id()))
                .then(a.cmp(&b))
        });
        let mut slots: Vec<Option<RecordedSpan>> = spans.into_iter().map(Some).collect();
        let mut spans: Vec<RecordedSpan> = order
            .iter()
            .map(|&i| slots[i as usize].take().expect("a permutation"))
            .collect();
        let mut traces = FxHashMap::default();
        let mut packages = FxHashMap::default();
        let number = |map: &mut FxHashMap<String, u32>, key: &str| match map.get(key) {
            Some(&n) => n,
            None => {
                let n = map.len() as u32;
                map.insert(key.to_string(), n);
                n
            }
        };
        for (no, s) in spans.iter_mut().enumerate() {
            s.no = no as u32;
            s.trace_no = number(&mut traces, s.trace_id());
            s.package_no = number(&mut packages, s.package_name());
        }
        let flags = spans
            .iter()
            .map(|s| AtomicU8::new(if s.is_pre_app_start { PRE_APP_START } else { 0 }))
            .collect();
        let index = Indexes::build(&spans);
        Recording {
            spans,
            flags,
            traces,
            packages,
            index,
            algo,
            files: loaded.files,
            skipped: loaded.skipped,
            reasons: loaded.reasons,
            duplicates,
            load_time: Duration::ZERO,
            by_priority: Default::default(),
            misses: AtomicU64::new(0),
        }
    }

    /// The loaded spans, oldest first.
    pub fn spans(&self) -> &[RecordedSpan] {
        &self.spans
    }

    /// The span with this trace and span id.
    pub fn span(&self, trace_id: &str, span_id: &str) -> Option<&RecordedSpan> {
        let t = *self.traces.get(trace_id)?;
        self.spans
            .iter()
            .find(|s| s.trace_no == t && s.span_id() == span_id)
    }

    /// Whether a match has already handed `span` out (false for a span of another recording).
    pub fn is_used(&self, span: &RecordedSpan) -> bool {
        let mine = self
            .spans
            .get(span.no as usize)
            .is_some_and(|s| std::ptr::eq(s, span));
        mine && self.used(span.no)
    }

    pub(crate) fn used(&self, no: u32) -> bool {
        self.flags[no as usize].load(Ordering::Acquire) & USED != 0
    }

    pub(crate) fn pre_app_start(&self, no: u32) -> bool {
        self.flags[no as usize].load(Ordering::Relaxed) & PRE_APP_START != 0
    }

    /// Starts loading span `no` into the cache. A look-up that claims a span reads it right
    /// after its flag; on a large recording both are cache (and TLB) misses, and this lets
    /// them overlap instead of following one another.
    #[inline]
    pub(crate) fn prefetch(&self, no: u32) {
        #[cfg(target_arch = "x86_64")]
        if let Some(span) = self.spans.get(no as usize) {
            // SAFETY: a prefetch is a hint; it never faults and reads nothing back.
            // The fields an answer reads (the struct is several cache lines).
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>((&raw const span.text).cast());
                _mm_prefetch::<_MM_HINT_T0>((&raw const span.timestamp).cast());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = no;
    }

    /// Marks span `no` used; true only for the one caller that flipped it. This is what makes
    /// look-up and marking one atomic step under concurrent callers.
    pub(crate) fn claim(&self, no: u32) -> bool {
        self.flags[no as usize].fetch_or(USED, Ordering::AcqRel) & USED == 0
    }

    /// The digest requests are hashed with.
    pub fn hash_algorithm(&self) -> HashAlgorithm {
        self.algo
    }

    /// Counts of what was loaded and matched.
    pub fn stats(&self) -> Stats {
        let by_priority: [u64; 16] =
            std::array::from_fn(|p| self.by_priority[p].load(Ordering::Relaxed));
        let matches_by_type = MatchType::ALL
            .iter()
            .map(|&t| {
                let n = (1..16)
                    .filter(|&p| matcher::priority_type(p as u8) == Some(t))
                    .map(|p| by_priority[p])
                    .sum();
                (t, n)
            })
            .collect();
        Stats {
            files: self.files,
            traces: self.traces.len(),
            spans: self.spans.len(),
            skipped_lines: self.skipped,
            skipped: self.reasons.clone(),
            duplicate_spans: self.duplicates,
            load_time: self.load_time,
            hash: self.algo,
            matches_by_type,
            matches_by_priority: by_priority,
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
}
