//! Look-up indexes over the loaded spans.
//!
//! Each index is one sorted vector of `(key, span)` pairs, searched by bisection: a single
//! allocation per index (100k spans need eight of them), built with a parallel sort, and a
//! bucket is a contiguous slice. Spans are numbered oldest first (timestamp, then span id),
//! so every bucket lists its spans in the order the matcher prefers them.

use rayon::prelude::*;

use super::hashing::Digest;
use super::span::RecordedSpan;

/// A sorted multimap from `K` to span numbers.
#[derive(Debug, Default)]
pub(crate) struct Multimap<K> {
    entries: Vec<(K, u32)>,
}

impl<K: Ord + Copy + Send + Sync> Multimap<K> {
    fn build(spans: &[RecordedSpan], key: impl Fn(&RecordedSpan) -> K + Sync + Send) -> Self {
        let mut entries: Vec<(K, u32)> = spans
            .par_iter()
            .enumerate()
            .map(|(i, s)| (key(s), i as u32))
            .collect();
        entries.par_sort_unstable();
        Multimap { entries }
    }

    /// The spans under `key`, oldest first.
    pub fn get(&self, key: &K) -> impl ExactSizeIterator<Item = u32> + Clone + '_ {
        let lo = self.entries.partition_point(|(k, _)| k < key);
        let len = self.entries[lo..].partition_point(|(k, _)| k == key);
        self.entries[lo..lo + len].iter().map(|&(_, i)| i)
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
        let m = Multimap {
            entries: {
                let mut v = vec![(3u8, 4u32), (1, 2), (3, 1), (2, 0), (3, 0)];
                v.sort_unstable();
                v
            },
        };
        assert_eq!(m.get(&3).collect::<Vec<_>>(), vec![0, 1, 4]);
        assert_eq!(m.get(&1).collect::<Vec<_>>(), vec![2]);
        assert_eq!(m.get(&9).count(), 0);
        assert_eq!(m.get(&0).count(), 0);
    }
}
