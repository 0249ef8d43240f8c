//! Look-up indexes over the loaded spans.
//!
//! Each index is one vector of span numbers grouped by key (built with a parallel sort, so a
//! bucket is a contiguous slice) and a hash table from key to its bucket. A recording of 100k
//! spans has indexes of several megabytes: a bisection over them costs ~17 cache misses per
//! look-up (microseconds), a hash table one or two. Keys are digests, uniformly distributed,
//! so the cheap Fx hash is enough. Spans are numbered oldest first (timestamp, then span id),
//! so every bucket lists its spans in the order the matcher prefers them.

use std::hash::Hash;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::hashing::Digest;
use super::span::RecordedSpan;

/// A multimap from `K` to span numbers.
#[derive(Debug, Default)]
pub(crate) struct Multimap<K> {
    /// Span numbers, bucket after bucket.
    spans: Vec<u32>,
    /// Key → (start, length) of its bucket in `spans`.
    buckets: FxHashMap<K, (u32, u32)>,
}

impl<K: Ord + Hash + Copy + Send + Sync> Multimap<K> {
    fn build(spans: &[RecordedSpan], key: impl Fn(&RecordedSpan) -> K + Sync + Send) -> Self {
        let mut entries: Vec<(K, u32)> = spans
            .par_iter()
            .enumerate()
            .map(|(i, s)| (key(s), i as u32))
            .collect();
        entries.par_sort_unstable();
        Self::from_sorted(&entries)
    }

    /// From `(key, span)` pairs sorted by key, then span.
    fn from_sorted(entries: &[(K, u32)]) -> Self {
        let mut buckets = FxHashMap::default();
        buckets.reserve(entries.len());
        let mut start = 0;
        for run in entries.chunk_by(|a, b| a.0 == b.0) {
            buckets.insert(run[0].0, (start, run.len() as u32));
            start += run.len() as u32;
        }
        buckets.shrink_to_fit();
        Multimap {
            spans: entries.iter().map(|&(_, i)| i).collect(),
            buckets,
        }
    }

    /// The spans under `key`, oldest first.
    pub fn get(&self, key: &K) -> impl ExactSizeIterator<Item = u32> + Clone + '_ {
        let (start, len) = self.buckets.get(key).copied().unwrap_or((0, 0));
        self.spans[start as usize..(start + len) as usize]
            .iter()
            .copied()
    }
}

/// Trace-level keys carry the trace number; schema keys also the package number, so a
/// schema bucket is already limited to the request's package.
#[derive(Debug, Default)]
pub(crate) struct Indexes {
    pub trace_value: Multimap<(u32, Digest)>,
    pub trace_reduced_value: Multimap<(u32, Digest)>,
    pub trace_schema: Multimap<(u32, u32, Digest)>,
    pub trace_reduced_schema: Multimap<(u32, u32, Digest)>,
    pub suite_value: Multimap<Digest>,
    pub suite_reduced_value: Multimap<Digest>,
    pub suite_schema: Multimap<(u32, Digest)>,
    pub suite_reduced_schema: Multimap<(u32, Digest)>,
}

impl Indexes {
    /// Builds every index; `spans` must already be in matcher order.
    pub fn build(spans: &[RecordedSpan]) -> Indexes {
        let ((trace_value, trace_reduced_value), (trace_schema, trace_reduced_schema)) =
            rayon::join(
                || {
                    rayon::join(
                        || Multimap::build(spans, |s| (s.trace_no, s.hashes.value)),
                        || Multimap::build(spans, |s| (s.trace_no, s.hashes.reduced_value)),
                    )
                },
                || {
                    rayon::join(
                        || Multimap::build(spans, |s| (s.trace_no, s.package_no, s.hashes.schema)),
                        || {
                            Multimap::build(spans, |s| {
                                (s.trace_no, s.package_no, s.hashes.reduced_schema)
                            })
                        },
                    )
                },
            );
        let ((suite_value, suite_reduced_value), (suite_schema, suite_reduced_schema)) =
            rayon::join(
                || {
                    rayon::join(
                        || Multimap::build(spans, |s| s.hashes.value),
                        || Multimap::build(spans, |s| s.hashes.reduced_value),
                    )
                },
                || {
                    rayon::join(
                        || Multimap::build(spans, |s| (s.package_no, s.hashes.schema)),
                        || Multimap::build(spans, |s| (s.package_no, s.hashes.reduced_schema)),
                    )
                },
            );
        Indexes {
            trace_value,
            trace_reduced_value,
            trace_schema,
            trace_reduced_schema,
            suite_value,
            suite_reduced_value,
            suite_schema,
            suite_reduced_schema,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_ordered() {
        let mut v = vec![(3u8, 4u32), (1, 2), (3, 1), (2, 0), (3, 0)];
        v.sort_unstable();
        let m = Multimap::from_sorted(&v);
        assert_eq!(m.get(&3).collect::<Vec<_>>(), vec![0, 1, 4]);
        assert_eq!(m.get(&1).collect::<Vec<_>>(), vec![2]);
        assert_eq!(m.get(&9).count(), 0);
        assert_eq!(m.get(&0).count(), 0);
    }
}
