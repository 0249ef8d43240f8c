//! Look-up indexes over the loaded spans.
//!
//! Each index is one vector of span numbers grouped by key (built with a parallel sort, so a
//! bucket is a contiguous slice) and a hash table from key to its bucket. A recording of 100k
//! spans has indexes of several megabytes: a bisection over them costs ~17 cache misses per
//! look-up (microseconds), a hash table one or two. Keys are digests, uniformly distributed,
//! so the cheap Fx hash is enough. Spans are numbered oldest first (timestamp, then span id),
//! so every bucket lists its spans in the order the matcher prefers them. Most keys have a
//! single span: the table holds its number itself, which spares a look-up one more random
//! read (a cache and TLB miss on a large recording: ~0.2 µs of a findMock call).

use std::hash::Hash;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::hashing::Digest;
use super::span::RecordedSpan;

/// A multimap from `K` to span numbers.
#[derive(Debug, Default)]
pub(crate) struct Multimap<K> {
    /// Span numbers of the buckets of two or more, bucket after bucket.
    spans: Vec<u32>,
    /// Key → (span, 1) for a lone span, else (start, length) of its bucket in `spans`.
    buckets: FxHashMap<K, (u32, u32)>,
}

/// The spans under a key, oldest first.
#[derive(Clone, Debug)]
pub(crate) enum Bucket<'a> {
    /// A lone span (taken once iterated).
    One(Option<u32>),
    /// Several, in the shared vector.
    Many(std::iter::Copied<std::slice::Iter<'a, u32>>),
}

impl Iterator for Bucket<'_> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        match self {
            Bucket::One(span) => span.take(),
            Bucket::Many(spans) => spans.next(),
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self {
            Bucket::One(span) => usize::from(span.is_some()),
            Bucket::Many(spans) => spans.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for Bucket<'_> {}

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
        let mut spans = Vec::new();
        for run in entries.chunk_by(|a, b| a.0 == b.0) {
            let slot = match run {
                [(_, span)] => (*span, 1),
                _ => {
                    let start = spans.len() as u32;
                    spans.extend(run.iter().map(|&(_, i)| i));
                    (start, run.len() as u32)
                }
            };
            buckets.insert(run[0].0, slot);
        }
        buckets.shrink_to_fit();
        spans.shrink_to_fit();
        Multimap { spans, buckets }
    }

    /// The spans under `key`, oldest first.
    #[inline]
    pub fn get(&self, key: &K) -> Bucket<'_> {
        match self.buckets.get(key).copied() {
            None => Bucket::One(None),
            Some((span, 1)) => Bucket::One(Some(span)),
            Some((start, len)) => Bucket::Many(
                self.spans[start as usize..(start + len) as usize]
                    .iter()
                    .copied(),
            ),
        }
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
        let mut v = vec![(3u8, 4u32), (1, 2), (3, 1), (2, 0), (3, 0), (5, 7), (5, 6)];
        v.sort_unstable();
        let m = Multimap::from_sorted(&v);
        assert_eq!(m.get(&3).collect::<Vec<_>>(), vec![0, 1, 4]);
        assert_eq!(m.get(&5).collect::<Vec<_>>(), vec![6, 7]);
        assert_eq!(m.get(&1).collect::<Vec<_>>(), vec![2]);
        assert_eq!(m.get(&2).collect::<Vec<_>>(), vec![0]);
        assert_eq!(m.get(&9).count(), 0);
        assert_eq!(m.get(&0).count(), 0);
        // Lone spans live in the table, not in the shared vector.
        assert_eq!(m.spans.len(), 5);
        // Exact sizes, also part-way and for clones.
        let mut b = m.get(&3);
        assert_eq!(b.len(), 3);
        b.next();
        assert_eq!((b.len(), b.clone().count()), (2, 2));
        let mut one = m.get(&1);
        assert_eq!(one.len(), 1);
        assert_eq!((one.next(), one.len(), one.next()), (Some(2), 0, None));
    }
}
