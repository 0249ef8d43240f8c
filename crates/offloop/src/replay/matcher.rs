//! The matching cascade (reference §4.4), first match wins:
//!
//! | priority | look-up | scope |
//! |---|---|---|
//! | 1 / 2 | the trace's spans with the request's input value hash, unused / used | TRACE |
//! | 3 / 4 | the same with the reduced value hash (`matchImportance: 0` fields removed) | TRACE |
//! | 5 / 6 | all spans by value hash / reduced value hash, same `isPreAppStart`, unused → used | GLOBAL |
//! | 7 / 8 | the trace's spans of the package with the request's schema hash, shape-checked, unused / used | TRACE |
//! | 9 / 10 | the same with the reduced schema hash | TRACE |
//! | 12 / 13 | (no trace, or pre-app-start) all spans by value / reduced value hash, same `isPreAppStart` | GLOBAL |
//! | 14 / 15 | (pre-app-start only) pre-app-start spans of the package by schema / reduced schema hash, shape-checked | GLOBAL |
//!
//! Priorities 1–6 and 12–13 are hash look-ups ([`Levels::ValueHashes`]); the schema levels
//! rank several candidates by similarity (the first 50, score descending, then oldest, then
//! span id) and run only with [`Levels::All`]. Priority 11 (the Tusk cloud's global spans)
//! does not apply to local recordings, and the CLI's Python-only guardrail is left out.
//!
//! "Unused → used": the first span nobody has consumed, else the first consumed one (a
//! request repeated more often than recorded reuses its last answer). Consuming is a
//! compare-exchange on the span's flag, so a look-up and its marking are one atomic step:
//! with concurrent callers each unused span is handed out once. Every match marks its span,
//! including suite-level ones.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::hashing::{self, to_hex, Digest, SchemaTexts, ValueTexts};
use super::shape::Shape;
use super::similarity;
use super::span::RecordedSpan;
use super::{MatchScope, MatchType, Recording};
use crate::hash::HashAlgorithm;
use crate::merges::Merges;

/// Candidates scored per similarity ranking.
const MAX_RANKED: usize = 50;
/// Runners-up reported with a ranked match.
const TOP_CANDIDATES: usize = 5;

/// Which levels to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Levels {
    /// Only the hash look-ups (priorities 1–6, 12–13): microseconds, fit for a synchronous call.
    ValueHashes,
    /// The whole cascade, including the schema levels with similarity ranking.
    All,
}

/// An outbound call to answer (the replay side of `MockRequestData`).
#[derive(Clone, Debug, Default)]
pub struct MockRequest {
    /// The test's trace id (`traceId` or `testId`); empty or absent for calls outside a test.
    pub trace_id: Option<String>,
    /// Display name (`pg.query`).
    pub name: String,
    /// `pg`, `http`, …
    pub package_name: String,
    /// `query`, `GET`, …
    pub submodule_name: String,
    /// Instrumentation class name.
    pub instrumentation_name: String,
    /// The input value as JSON text, normalized like a recorded `td.inputValue`.
    pub input_value: String,
    /// Schema merges as JSON text (`{key: {encoding?, decodedType?, matchImportance?}}`).
    pub input_schema_merges: Option<String>,
    /// Made before the app was ready.
    pub is_pre_app_start: bool,
    /// Span kind (informational).
    pub kind: Option<i32>,
    /// Caller stack (informational).
    pub stack_trace: Option<String>,
}

/// A runner-up of a similarity ranking.
#[derive(Clone, Debug)]
pub struct Candidate<'r> {
    /// The candidate span.
    pub span: &'r RecordedSpan,
    /// Its similarity score.
    pub score: f64,
}

/// A recorded span that answers a request.
#[derive(Clone, Debug)]
pub struct MockMatch<'r> {
    /// The span: its `output_value` is the answer.
    pub span: &'r RecordedSpan,
    /// How it was found.
    pub match_type: MatchType,
    /// Where it was found.
    pub scope: MatchScope,
    /// Cascade priority (see the table above).
    pub priority: u8,
    /// The span had been handed out before (no unused candidate was left).
    pub reused: bool,
    /// Human-readable level, as the CLI words it.
    pub description: Cow<'static, str>,
    /// The best score when several candidates were ranked.
    pub similarity: Option<f64>,
    /// Up to 5 runners-up when several candidates were ranked.
    pub top_candidates: Vec<Candidate<'r>>,
}

/// The request's hashes, hex.
#[derive(Clone, Debug, Default)]
pub struct RequestHashes {
    /// Input value hash (as the exporter would record it).
    pub value: String,
    /// Input schema hash, when a schema level needed it or nothing matched (a match at a
    /// value level never walks the request's schema).
    pub schema: Option<String>,
    /// Reduced value hash (`matchImportance: 0` fields left out), when a level needed it.
    pub reduced_value: Option<String>,
    /// Reduced schema hash, when a level needed it.
    pub reduced_schema: Option<String>,
}

/// The answer to a request: a match, or why there is none.
#[derive(Clone, Debug)]
pub struct Outcome<'r> {
    /// The match, if any.
    pub found: Option<MockMatch<'r>>,
    /// Why nothing matched (empty when `found`).
    pub reason: String,
    /// The request's hashes.
    pub request: RequestHashes,
}

/// A level of the cascade as a match reports it: how and where the span was found, and the
/// CLI's wording. A binding can map `(priority, reused)` to these names once instead of
/// carrying them with every match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    /// Cascade priority (see the table above).
    pub priority: u8,
    /// An already used span was handed out again.
    pub reused: bool,
    /// How the span was found.
    pub match_type: MatchType,
    /// Where it was found.
    pub scope: MatchScope,
    /// The level as the CLI words it ("Suite unused span by input value hash"); a ranked
    /// match's [`MockMatch::description`] adds the scores to it.
    pub description: &'static str,
}

impl Level {
    /// The level of cascade `priority` for an unused or a reused span; `None` for a priority
    /// the cascade does not have (0, 11 — Tusk cloud spans, not carried over — and above 15).
    pub fn of(priority: u8, reused: bool) -> Option<Level> {
        let match_type = priority_type(priority)?;
        let scope = match priority {
            1..=4 | 7..=10 => MatchScope::Trace,
            _ => MatchScope::Global,
        };
        Some(Level {
            priority,
            reused,
            match_type,
            scope,
            description: describe(scope, reused, match_type),
        })
    }

    /// Every level: each priority of the cascade, unused then reused.
    pub fn all() -> impl Iterator<Item = Level> {
        (1..=15u8).flat_map(|p| {
            [false, true]
                .into_iter()
                .filter_map(move |r| Level::of(p, r))
        })
    }
}

/// Priority → match type.
pub(crate) fn priority_type(p: u8) -> Option<MatchType> {
    Some(match p {
        1 | 2 | 5 | 12 => MatchType::InputValueHash,
        3 | 4 | 6 | 13 => MatchType::InputValueHashReducedSchema,
        7 | 8 | 14 => MatchType::InputSchemaHash,
        9 | 10 | 15 => MatchType::InputSchemaHashReducedSchema,
        _ => return None,
    })
}

/// The level as the CLI words it ("Suite unused span by input value hash").
fn describe(scope: MatchScope, reused: bool, t: MatchType) -> &'static str {
    use MatchScope::{Global, Trace};
    use MatchType::*;
    match (scope, reused, t) {
        (Trace, false, InputValueHash) => "Unused span by input value hash",
        (Trace, true, InputValueHash) => "Used span by input value hash",
        (Trace, false, InputValueHashReducedSchema) => {
            "Unused span by input value hash with reduced schema"
        }
        (Trace, true, InputValueHashReducedSchema) => {
            "Used span by input value hash with reduced schema"
        }
        (Trace, false, InputSchemaHash) => "Unused span by input schema hash",
        (Trace, true, InputSchemaHash) => "Used span by input schema hash",
        (Trace, false, InputSchemaHashReducedSchema) => "Unused span by reduced input schema hash",
        (Trace, true, InputSchemaHashReducedSchema) => "Used span by reduced input schema hash",
        (Global, false, InputValueHash) => "Suite unused span by input value hash",
        (Global, true, InputValueHash) => "Suite used span by input value hash",
        (Global, false, InputValueHashReducedSchema) => {
            "Suite unused span by input value hash with reduced schema"
        }
        (Global, true, InputValueHashReducedSchema) => {
            "Suite used span by input value hash with reduced schema"
        }
        (Global, false, InputSchemaHash) => "Suite unused span by input schema hash",
        (Global, true, InputSchemaHash) => "Suite used span by input schema hash",
        (Global, false, InputSchemaHashReducedSchema) => "Suite unused span by reduced schema hash",
        (Global, true, InputSchemaHashReducedSchema) => "Suite used span by reduced schema hash",
    }
}

/// A chosen span before it becomes a [`MockMatch`].
struct Pick {
    span: u32,
    reused: bool,
    similarity: Option<f64>,
    runners_up: Vec<(u32, f64)>,
}

impl Pick {
    fn plain(span: u32, reused: bool) -> Pick {
        Pick {
            span,
            reused,
            similarity: None,
            runners_up: Vec::new(),
        }
    }
}

/// Per-request state. Its texts are walked once for the value half; the schema half
/// (a second walk) only when a schema level, or a miss's report, asks for it. Each digest is
/// computed on first use.
struct Query<'a> {
    json: &'a [u8],
    merges: Option<&'a Merges>,
    texts: ValueTexts,
    schema_texts: OnceCell<SchemaTexts>,
    algo: HashAlgorithm,
    value: OnceCell<Digest>,
    schema: OnceCell<Digest>,
    reduced_value: OnceCell<Digest>,
    reduced_schema: OnceCell<Digest>,
    shape: Option<Shape>,
    tree: Option<Value>,
}

impl Query<'_> {
    fn value(&self) -> Digest {
        *self
            .value
            .get_or_init(|| self.algo.digest(&self.texts.canonical))
    }

    fn reduced_value(&self) -> Digest {
        match &self.texts.reduced {
            None => self.value(),
            Some(v) => *self.reduced_value.get_or_init(|| self.algo.digest(v)),
        }
    }

    fn schema_texts(&self) -> Result<&SchemaTexts, String> {
        if let Some(t) = self.schema_texts.get() {
            return Ok(t);
        }
        // The same bytes walked once already: this cannot fail unless that walk did.
        let texts = hashing::texts(self.json, self.merges)
            .map_err(|e| format!("inputValue: {e}"))?
            .schema;
        Ok(self.schema_texts.get_or_init(|| texts))
    }

    fn schema(&self) -> Result<Digest, String> {
        if let Some(d) = self.schema.get() {
            return Ok(*d);
        }
        let d = self.algo.digest_recurring(&self.schema_texts()?.schema);
        Ok(*self.schema.get_or_init(|| d))
    }

    fn reduced_schema(&self) -> Result<Digest, String> {
        if let Some(d) = self.reduced_schema.get() {
            return Ok(*d);
        }
        let d = match &self.schema_texts()?.reduced {
            None => self.schema()?,
            Some(s) => self.algo.digest_recurring(s),
        };
        Ok(*self.reduced_schema.get_or_init(|| d))
    }
}

impl Recording {
    /// Finds the recorded span that answers `req`, consuming it. `Err` only for a request
    /// that cannot be hashed (invalid JSON, bad merges); "no match" is an [`Outcome`].
    pub fn find_mock(&self, req: &MockRequest, levels: Levels) -> Result<Outcome<'_>, String> {
        let merges = match req.input_schema_merges.as_deref().map(str::trim) {
            None | Some("") | Some("null") => None,
            Some(m) => Some(
                hashing::parse_merges(m.as_bytes())
                    .map_err(|e| format!("inputSchemaMerges: {e}"))?,
            ),
        };
        let json = req.input_value.as_bytes();
        let texts = hashing::value_texts(json, merges.as_deref())
            .map_err(|e| format!("inputValue: {e}"))?;
        let mut q = Query {
            json,
            merges: merges.as_deref(),
            texts,
            schema_texts: OnceCell::new(),
            algo: self.algo,
            value: OnceCell::new(),
            schema: OnceCell::new(),
            reduced_value: OnceCell::new(),
            reduced_schema: OnceCell::new(),
            shape: None,
            tree: None,
        };
        let mut tried = Tried::default();
        let found = self.cascade(req, levels, &mut q, &mut tried)?;
        let schema_levels = Tried::TRACE_SCHEMA
            | Tried::TRACE_REDUCED_SCHEMA
            | Tried::SUITE_SCHEMA
            | Tried::SUITE_REDUCED_SCHEMA;
        let schema = if found.is_none() || tried.any(schema_levels) {
            Some(to_hex(&q.schema()?))
        } else {
            None
        };
        let request = RequestHashes {
            value: to_hex(&q.value()),
            schema,
            reduced_value: tried
                .any(Tried::TRACE_REDUCED_VALUE | Tried::SUITE_REDUCED_VALUE)
                .then(|| to_hex(&q.reduced_value())),
            reduced_schema: tried
                .any(Tried::TRACE_REDUCED_SCHEMA | Tried::SUITE_REDUCED_SCHEMA)
                .then(|| q.reduced_schema().map(|d| to_hex(&d)))
                .transpose()?,
        };
        match found {
            Some(m) => {
                self.by_priority[m.priority as usize].fetch_add(1, Ordering::Relaxed);
                Ok(Outcome {
                    found: Some(m),
                    reason: String::new(),
                    request,
                })
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                Ok(Outcome {
                    found: None,
                    reason: self.miss_reason(req, tried),
                    request,
                })
            }
        }
    }

    fn cascade(
        &self,
        req: &MockRequest,
        levels: Levels,
        q: &mut Query,
        tried: &mut Tried,
    ) -> Result<Option<MockMatch<'_>>, String> {
        let trace_id = req.trace_id.as_deref().filter(|t| !t.is_empty());
        let trace = trace_id.and_then(|t| self.traces.get(t).copied());
        let package = self.packages.get(req.package_name.as_str()).copied();
        let pre = req.is_pre_app_start;
        let all = levels == Levels::All;

        if let Some(t) = trace {
            tried.add(Tried::TRACE_VALUE);
            let b = self.index.trace_value.get(&(t, q.value()));
            if let Some((i, reused)) = self.claim_first(b, None) {
                return Ok(Some(
                    self.found(Pick::plain(i, reused), if reused { 2 } else { 1 }),
                ));
            }
            tried.add(Tried::TRACE_REDUCED_VALUE);
            let b = self.index.trace_reduced_value.get(&(t, q.reduced_value()));
            if let Some((i, reused)) = self.claim_first(b, None) {
                return Ok(Some(
                    self.found(Pick::plain(i, reused), if reused { 4 } else { 3 }),
                ));
            }
            if let Some(m) = self.suite_value_levels(q, pre, 5, tried)? {
                return Ok(Some(m));
            }
            if !all && package.is_some() {
                tried.add(Tried::SCHEMA_SKIPPED);
            }
            if all {
                if let Some(p) = package {
                    tried.add(Tried::TRACE_SCHEMA);
                    let b = self.index.trace_schema.get(&(t, p, q.schema()?));
                    if let Some(pick) = self.pick_by_schema(q, b, false) {
                        let prio = if pick.reused { 8 } else { 7 };
                        return Ok(Some(self.found(pick, prio)));
                    }
                    tried.add(Tried::TRACE_REDUCED_SCHEMA);
                    let b = self
                        .index
                        .trace_reduced_schema
                        .get(&(t, p, q.reduced_schema()?));
                    if let Some(pick) = self.pick_by_schema(q, b, false) {
                        let prio = if pick.reused { 10 } else { 9 };
                        return Ok(Some(self.found(pick, prio)));
                    }
                }
            }
        }

        // Across traces: for calls outside any test, and for pre-app-start calls.
        if trace_id.is_some() && !pre {
            return Ok(None);
        }
        if trace.is_none() {
            if let Some(m) = self.suite_value_levels(q, pre, 12, tried)? {
                return Ok(Some(m));
            }
        }
        if !pre {
            return Ok(None);
        }
        let Some(p) = package else { return Ok(None) };
        if !all {
            tried.add(Tried::SCHEMA_SKIPPED);
            return Ok(None);
        }
        tried.add(Tried::SUITE_SCHEMA);
        let b = self.index.suite_schema.get(&(p, q.schema()?));
        if let Some(pick) = self.pick_by_schema(q, b, true) {
            return Ok(Some(self.found(pick, 14)));
        }
        tried.add(Tried::SUITE_REDUCED_SCHEMA);
        let b = self
            .index
            .suite_reduced_schema
            .get(&(p, q.reduced_schema()?));
        Ok(self
            .pick_by_schema(q, b, true)
            .map(|pick| self.found(pick, 15)))
    }

    /// Suite value hash then suite reduced value hash, limited to spans with the request's
    /// `isPreAppStart`; priorities `first` and `first + 1`.
    fn suite_value_levels(
        &self,
        q: &mut Query,
        pre: bool,
        first: u8,
        tried: &mut Tried,
    ) -> Result<Option<MockMatch<'_>>, String> {
        tried.add(Tried::SUITE_VALUE);
        let b = self.index.suite_value.get(&q.value());
        if let Some((i, reused)) = self.claim_first(b, Some(pre)) {
            return Ok(Some(self.found(Pick::plain(i, reused), first)));
        }
        tried.add(Tried::SUITE_REDUCED_VALUE);
        let b = self.index.suite_reduced_value.get(&q.reduced_value());
        Ok(self
            .claim_first(b, Some(pre))
            .map(|(i, reused)| self.found(Pick::plain(i, reused), first + 1)))
    }

    /// First unused span of the bucket (claimed), else the first used one.
    fn claim_first(
        &self,
        bucket: impl Iterator<Item = u32> + Clone,
        pre_app_start: Option<bool>,
    ) -> Option<(u32, bool)> {
        let eligible = |i: &u32| pre_app_start.is_none_or(|p| self.pre_app_start(*i) == p);
        let claim = |&i: &u32| {
            self.prefetch(i);
            self.claim(i)
        };
        if let Some(i) = bucket.clone().filter(eligible).find(claim) {
            return Some((i, false));
        }
        let mut bucket = bucket;
        bucket.find(eligible).map(|i| (i, true))
    }

    /// A schema bucket: shape-checked candidates, unused (claimed) → used, several ranked by
    /// similarity.
    fn pick_by_schema(
        &self,
        q: &mut Query,
        bucket: impl Iterator<Item = u32>,
        pre_app_start_only: bool,
    ) -> Option<Pick> {
        let req_shape = q.shape.get_or_insert_with(|| Shape::of(&q.texts.canonical));
        let candidates: Vec<u32> = bucket
            .filter(|&i| {
                let s = &self.spans[i as usize];
                (!pre_app_start_only || self.pre_app_start(i))
                    && req_shape.admits(s.shape(), s.package_name())
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        loop {
            let unused: Vec<u32> = candidates
                .iter()
                .copied()
                .filter(|&i| !self.used(i))
                .collect();
            match unused.len() {
                0 => break,
                1 if self.claim(unused[0]) => return Some(Pick::plain(unused[0], false)),
                1 => continue,
                _ => {}
            }
            let ranked = self.rank(q, &unused);
            if let Some(pos) = ranked.iter().position(|&(i, _)| self.claim(i)) {
                return Some(ranked_pick(ranked, pos, false));
            }
            // Every ranked candidate was taken meanwhile: look again.
        }
        let used: Vec<u32> = candidates.into_iter().filter(|&i| self.used(i)).collect();
        match used.len() {
            0 => None,
            1 => Some(Pick::plain(used[0], true)),
            _ => Some(ranked_pick(self.rank(q, &used), 0, true)),
        }
    }

    /// The first [`MAX_RANKED`] candidates by similarity: score descending, then oldest, then
    /// span id (the candidates' order).
    fn rank(&self, q: &mut Query, candidates: &[u32]) -> Vec<(u32, f64)> {
        let req = q.tree.get_or_insert_with(|| {
            serde_json::from_slice(&q.texts.canonical).unwrap_or(Value::Null)
        });
        let mut scored: Vec<(u32, f64)> = candidates
            .iter()
            .take(MAX_RANKED)
            .map(|&i| {
                let span = &self.spans[i as usize];
                let value: Value =
                    serde_json::from_slice(&span.input_canonical).unwrap_or(Value::Null);
                (i, similarity::score(req, &value))
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
    }

    fn found(&self, pick: Pick, priority: u8) -> MockMatch<'_> {
        let level = Level::of(priority, pick.reused).expect("cascade priorities have a level");
        let description = match pick.similarity {
            None => Cow::Borrowed(level.description),
            Some(s) => {
                let mut d = level.description.to_string();
                d.push_str(&format!(" (similarity: {s:.2}"));
                if let Some((_, next)) = pick.runners_up.first() {
                    d.push_str(&format!(", next best: {next:.2}"));
                }
                d.push(')');
                Cow::Owned(d)
            }
        };
        MockMatch {
            span: &self.spans[pick.span as usize],
            match_type: level.match_type,
            scope: level.scope,
            priority,
            reused: pick.reused,
            description,
            similarity: pick.similarity,
            top_candidates: pick
                .runners_up
                .into_iter()
                .map(|(i, score)| Candidate {
                    span: &self.spans[i as usize],
                    score,
                })
                .collect(),
        }
    }

    fn miss_reason(&self, req: &MockRequest, tried: Tried) -> String {
        let what = format!(
            "{} {:?}",
            if req.package_name.is_empty() {
                "request"
            } else {
                &req.package_name
            },
            if req.name.is_empty() {
                &req.submodule_name
            } else {
                &req.name
            },
        );
        let trace = req.trace_id.as_deref().filter(|t| !t.is_empty());
        let mut reason = format!("no recorded span matches {what}");
        match trace {
            Some(t) if !self.traces.contains_key(t) => {
                reason.push_str(&format!(": trace {t} is not in the recording"));
                if !req.is_pre_app_start {
                    reason.push_str(
                        " (only pre-app-start calls and calls without a trace are matched across traces)",
                    );
                }
            }
            Some(t) => reason.push_str(&format!(" in trace {t}")),
            None => reason.push_str(" (no trace id: matched across traces)"),
        }
        if tried.0 != 0 {
            reason.push_str(&format!(
                "; tried: {}",
                tried.describe(req.is_pre_app_start)
            ));
        }
        if tried.0 & Tried::SCHEMA_SKIPPED != 0 {
            reason.push_str("; schema-hash levels not tried (findMockAsync runs them)");
        }
        if !self.packages.contains_key(req.package_name.as_str()) {
            reason.push_str(&format!(
                "; the recording has no {:?} spans",
                req.package_name
            ));
        }
        reason
    }
}

/// The levels a request went through, for the reason of a miss (a bit set: nothing is
/// allocated on the path of a match).
#[derive(Clone, Copy, Debug, Default)]
struct Tried(u16);

impl Tried {
    const TRACE_VALUE: u16 = 1;
    const TRACE_REDUCED_VALUE: u16 = 2;
    const SUITE_VALUE: u16 = 4;
    const SUITE_REDUCED_VALUE: u16 = 8;
    const TRACE_SCHEMA: u16 = 16;
    const TRACE_REDUCED_SCHEMA: u16 = 32;
    const SUITE_SCHEMA: u16 = 64;
    const SUITE_REDUCED_SCHEMA: u16 = 128;
    /// Schema levels applied but were left to [`Levels::All`].
    const SCHEMA_SKIPPED: u16 = 256;

    fn add(&mut self, level: u16) {
        self.0 |= level;
    }

    /// True when any of `levels` was tried.
    fn any(self, levels: u16) -> bool {
        self.0 & levels != 0
    }

    fn describe(self, pre_app_start: bool) -> String {
        [
            (Self::TRACE_VALUE, "trace value hash".to_string()),
            (
                Self::TRACE_REDUCED_VALUE,
                "trace reduced value hash".to_string(),
            ),
            (
                Self::SUITE_VALUE,
                format!("suite value hash (isPreAppStart={pre_app_start})"),
            ),
            (
                Self::SUITE_REDUCED_VALUE,
                format!("suite reduced value hash (isPreAppStart={pre_app_start})"),
            ),
            (Self::TRACE_SCHEMA, "trace schema hash".to_string()),
            (
                Self::TRACE_REDUCED_SCHEMA,
                "trace reduced schema hash".to_string(),
            ),
            (
                Self::SUITE_SCHEMA,
                "suite schema hash (pre-app-start spans)".to_string(),
            ),
            (
                Self::SUITE_REDUCED_SCHEMA,
                "suite reduced schema hash (pre-app-start spans)".to_string(),
            ),
        ]
        .into_iter()
        .filter(|(bit, _)| self.0 & bit != 0)
        .map(|(_, name)| name)
        .collect::<Vec<_>>()
        .join(", ")
    }
}

fn ranked_pick(mut ranked: Vec<(u32, f64)>, pos: usize, reused: bool) -> Pick {
    let (span, score) = ranked.remove(pos);
    ranked.truncate(TOP_CANDIDATES);
    Pick {
        span,
        reused,
        similarity: Some(score),
        runners_up: ranked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn levels_follow_the_cascade_table() {
        use MatchScope::{Global, Trace};
        use MatchType::*;
        // The module docs' table, written out independently of `priority_type`.
        let table = [
            (1, InputValueHash, Trace),
            (2, InputValueHash, Trace),
            (3, InputValueHashReducedSchema, Trace),
            (4, InputValueHashReducedSchema, Trace),
            (5, InputValueHash, Global),
            (6, InputValueHashReducedSchema, Global),
            (7, InputSchemaHash, Trace),
            (8, InputSchemaHash, Trace),
            (9, InputSchemaHashReducedSchema, Trace),
            (10, InputSchemaHashReducedSchema, Trace),
            (12, InputValueHash, Global),
            (13, InputValueHashReducedSchema, Global),
            (14, InputSchemaHash, Global),
            (15, InputSchemaHashReducedSchema, Global),
        ];
        let all: Vec<Level> = Level::all().collect();
        assert_eq!(
            all.len(),
            2 * table.len(),
            "each priority, unused and reused"
        );
        for p in [0, 11, 16] {
            assert!(Level::of(p, false).is_none() && Level::of(p, true).is_none());
        }
        let mut wordings = HashMap::new();
        for (p, match_type, scope) in table {
            for reused in [false, true] {
                let l = Level::of(p, reused).unwrap();
                assert_eq!((l.priority, l.reused), (p, reused));
                assert_eq!((l.match_type, l.scope), (match_type, scope), "priority {p}");
                let d = l.description;
                let lead = match (scope, reused) {
                    (Trace, false) => "Unused span by ",
                    (Trace, true) => "Used span by ",
                    (Global, false) => "Suite unused span by ",
                    (Global, true) => "Suite used span by ",
                };
                assert!(d.starts_with(lead), "priority {p}, reused {reused}: {d}");
                let schema = matches!(match_type, InputSchemaHash | InputSchemaHashReducedSchema);
                assert_eq!(d.contains("schema hash"), schema, "{d}");
                let reduced = matches!(
                    match_type,
                    InputValueHashReducedSchema | InputSchemaHashReducedSchema
                );
                assert_eq!(d.contains("reduced"), reduced, "{d}");
                wordings
                    .entry(d)
                    .or_insert_with(Vec::new)
                    .push((scope, reused, match_type));
            }
        }
        // Levels share a wording only when they have the same scope, reuse and type (P1/P12).
        for (d, levels) in wordings {
            assert!(levels.windows(2).all(|w| w[0] == w[1]), "{d}: {levels:?}");
        }
    }
}
