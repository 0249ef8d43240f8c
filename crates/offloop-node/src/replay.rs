//! `NativeRecording`: the replay engine for JS. Loading runs on tokio's blocking pool; the
//! hash levels of `findMock` run on the calling thread (microseconds); `findMockAsync` runs
//! the whole cascade, similarity ranking included, on the blocking pool.
//!
//! Worker threads: every recording is registered in a process-wide table under a small
//! number (`handle()`); `fromHandle(n)` in another worker returns a second JS object for the
//! same native recording, so consume-once holds across workers. The table holds weak
//! references: a recording lives while any JS object for it does, and leaves the table when
//! the last one is collected.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use napi::bindgen_prelude::*;
use napi_derive::napi;

use offloop::json::escape::write_json_str;
use offloop::json::number::write_js_number;
use offloop::replay::{self, Level, Levels, LoadOptions, MockRequest, Outcome, Recording};
use offloop::HashAlgorithm;

use crate::text::{OptText, Text};

/// A recording and its registry number.
struct Registered {
    id: u32,
    recording: std::mem::ManuallyDrop<Recording>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
        // The last JS object was collected, on a JS thread: freeing 100k spans there would
        // stall its event loop for a good fraction of a second, so it happens on the pool.
        // A plain thread, not the runtime's pool: this may run while a worker's environment
        // (and runtime) is being torn down. If no thread can be started, it is freed here.
        // SAFETY: taken once, here, and never used again.
        let recording = unsafe { std::mem::ManuallyDrop::take(&mut self.recording) };
        if recording.spans().len() >= 10_000 {
            let _ = std::thread::Builder::new()
                .name("offloop-free".into())
                .spawn(move || drop(recording));
        }
    }
}

fn registry() -> &'static Mutex<HashMap<u32, Weak<Registered>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<u32, Weak<Registered>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

fn register(recording: Recording) -> Arc<Registered> {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let shared = Arc::new(Registered {
        id,
        recording: std::mem::ManuallyDrop::new(recording),
    });
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, Arc::downgrade(&shared));
    shared
}

/// Options of `Recording.open`.
#[napi(object)]
pub struct RecordingOptions {
    /// `"blake3"` (default) or `"sha256"`: the digest hashes are recomputed with.
    pub hash_algorithm: Option<String>,
    /// How many skipped lines `stats()` describes (all are counted). Default 10.
    pub max_skipped_reasons: Option<u32>,
}

/// A request as the JS shim passes it: positional, values and merges already JSON text
/// (reading a handful of arguments is cheaper than an object's properties).
#[allow(clippy::too_many_arguments)]
fn request(
    trace_id: OptText,
    package_name: OptText,
    name: OptText,
    submodule_name: OptText,
    input_value: Text,
    input_schema_merges: OptText,
    is_pre_app_start: bool,
) -> MockRequest {
    MockRequest {
        trace_id: trace_id.0,
        name: name.0.unwrap_or_default(),
        package_name: package_name.0.unwrap_or_default(),
        submodule_name: submodule_name.0.unwrap_or_default(),
        input_value: input_value.0,
        input_schema_merges: input_schema_merges.0,
        is_pre_app_start,
        ..MockRequest::default()
    }
}

/// The answer as one JSON text: a positional array (see `lib/replay.js`, `fromNative`), so
/// the shim's single `JSON.parse` reads values without a key each and its object literal
/// builds the result; the recorded values are JSON already and go in as they are. Far cheaper
/// than setting a score of properties through N-API one by one, and than an object's keys.
///
/// Found: `[1, outputValue, [metadata]|null, seconds|null, nanos|null, traceId, spanId, name,
/// packageName, priority, reused, description|null, similarityScore|null, topCandidates,
/// valueHash, schemaHash|null]`. The level's names (match type, scope, wording) are not sent:
/// the shim has them from [`NativeRecording::match_levels`] by priority and `reused`;
/// `description` is sent only when it is not the level's own (a ranked match adds its scores).
/// Not found: `[0, reason, valueHash, schemaHash]`.
fn result_json(o: &Outcome<'_>) -> String {
    let mut out = Vec::with_capacity(
        256 + o.found.as_ref().map_or(o.reason.len(), |m| {
            m.span.output_value().len() + m.span.metadata().map_or(0, str::len)
        }),
    );
    let string = |out: &mut Vec<u8>, v: &str| {
        write_json_str(out, v);
        out.push(b',');
    };
    let int = |out: &mut Vec<u8>, n: i64| {
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        out.push(b',');
    };
    match &o.found {
        None => {
            out.extend_from_slice(b"[0,");
            string(&mut out, &o.reason);
        }
        Some(m) => {
            let s = m.span;
            out.extend_from_slice(b"[1,");
            out.extend_from_slice(s.output_value().as_bytes());
            out.push(b',');
            // Wrapped, so recorded `null` metadata stays apart from no metadata.
            match s.metadata() {
                Some(meta) => {
                    out.push(b'[');
                    out.extend_from_slice(meta.as_bytes());
                    out.push(b']');
                }
                None => out.extend_from_slice(b"null"),
            }
            out.push(b',');
            match s.timestamp {
                Some((sec, nanos)) => {
                    int(&mut out, sec);
                    int(&mut out, nanos.into());
                }
                None => out.extend_from_slice(b"null,null,"),
            }
            string(&mut out, s.trace_id());
            string(&mut out, s.span_id());
            string(&mut out, s.name());
            string(&mut out, s.package_name());
            int(&mut out, m.priority.into());
            out.extend_from_slice(if m.reused { b"true," } else { b"false," });
            match Level::of(m.priority, m.reused) {
                Some(level) if level.description == m.description => {
                    out.extend_from_slice(b"null,")
                }
                _ => string(&mut out, &m.description),
            }
            match m.similarity {
                Some(score) => write_js_number(&mut out, score),
                None => out.extend_from_slice(b"null"),
            }
            out.extend_from_slice(b",[");
            for (i, c) in m.top_candidates.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"spanId\":");
                write_json_str(&mut out, c.span.span_id());
                out.extend_from_slice(b",\"score\":");
                write_js_number(&mut out, c.score);
                out.push(b'}');
            }
            out.extend_from_slice(b"],");
        }
    }
    string(&mut out, &o.request.value);
    match &o.request.schema {
        Some(schema) => write_json_str(&mut out, schema),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b']');
    String::from_utf8(out).expect("recorded values are UTF-8 JSON")
}

/// A level of the cascade, by priority and whether the span was used before.
#[napi(object)]
pub struct NativeMatchLevel {
    pub priority: u32,
    pub reused: bool,
    pub match_type: String,
    pub match_type_code: u32,
    pub match_scope: String,
    pub description: String,
}

#[napi(object)]
pub struct NativeSkipped {
    pub file: String,
    pub line: f64,
    pub reason: String,
}

#[napi(object)]
pub struct NativeMatchCount {
    pub match_type: String,
    pub count: f64,
}

#[napi(object)]
pub struct NativeReplayStats {
    pub files: u32,
    pub traces: u32,
    pub spans: u32,
    pub skipped_lines: f64,
    pub skipped: Vec<NativeSkipped>,
    pub duplicate_spans: f64,
    pub load_ms: f64,
    pub hash_algorithm: String,
    pub matches: f64,
    pub matches_by_type: Vec<NativeMatchCount>,
    /// Index = cascade priority (1–15).
    pub matches_by_priority: Vec<f64>,
    pub misses: f64,
}

/// A recorded span's details, for debugging and tests.
#[napi(object)]
pub struct NativeSpanInfo {
    pub trace_id: String,
    pub span_id: String,
    pub name: String,
    pub package_name: String,
    pub is_pre_app_start: bool,
    pub used: bool,
    pub file: String,
    pub line: f64,
    /// Recomputed at load with the recording's digest.
    pub input_value_hash: String,
    pub input_schema_hash: String,
    pub reduced_input_value_hash: String,
    pub reduced_input_schema_hash: String,
    /// As stored in the file.
    pub stored_input_value_hash: String,
    pub stored_input_schema_hash: String,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, msg.into())
}

/// The native half of `Recording`.
#[napi]
pub struct NativeRecording {
    inner: Arc<Registered>,
}

#[napi]
impl NativeRecording {
    /// Loads `directory` on the blocking pool.
    #[napi(ts_return_type = "Promise<NativeRecording>")]
    pub fn open(
        env: &Env,
        directory: String,
        options: Option<RecordingOptions>,
    ) -> Result<PromiseRaw<'_, NativeRecording>> {
        let mut opts = LoadOptions::default();
        if let Some(o) = options {
            if let Some(h) = o.hash_algorithm {
                opts.hash = h.parse::<HashAlgorithm>().map_err(invalid)?;
            }
            if let Some(n) = o.max_skipped_reasons {
                opts.max_reasons = n as usize;
            }
        }
        env.spawn_future(async move {
            let recording = spawn_blocking(move || Recording::open(&directory, &opts))
                .await
                .map_err(|e| Error::from_reason(format!("offloop: loading failed: {e}")))?
                .map_err(|e| Error::from_reason(format!("offloop: {e}")))?;
            Ok(NativeRecording {
                inner: register(recording),
            })
        })
    }

    /// Another handle to a recording opened in this process (any worker thread).
    #[napi(factory, catch_unwind)]
    pub fn from_handle(handle: u32) -> Result<Self> {
        let weak = registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&handle)
            .cloned();
        let inner = weak.and_then(|w| w.upgrade()).ok_or_else(|| {
            invalid(format!(
                "offloop: no open recording with handle {handle} (it was never opened in this process, or every Recording object for it was garbage-collected)"
            ))
        })?;
        Ok(NativeRecording { inner })
    }

    /// Every level of the cascade, for the shim to name a match by its priority and `reused`.
    #[napi(catch_unwind)]
    pub fn match_levels() -> Vec<NativeMatchLevel> {
        Level::all()
            .map(|l| NativeMatchLevel {
                priority: l.priority.into(),
                reused: l.reused,
                match_type: l.match_type.name().to_string(),
                match_type_code: l.match_type.code(),
                match_scope: l.scope.name().to_string(),
                description: l.description.to_string(),
            })
            .collect()
    }

    /// The process-wide number of this recording, for `fromHandle` in other workers.
    #[napi(catch_unwind)]
    pub fn handle(&self) -> u32 {
        self.inner.id
    }

    /// The hash levels of the cascade, on the calling thread. Returns the result as JSON.
    #[napi(
        catch_unwind,
        ts_args_type = "traceId: string | undefined | null, packageName: string | undefined | null, name: string | undefined | null, submoduleName: string | undefined | null, inputValue: string, inputSchemaMerges: string | undefined | null, isPreAppStart: boolean"
    )]
    #[allow(clippy::too_many_arguments)]
    pub fn find_mock(
        &self,
        trace_id: OptText,
        package_name: OptText,
        name: OptText,
        submodule_name: OptText,
        input_value: Text,
        input_schema_merges: OptText,
        is_pre_app_start: bool,
    ) -> Result<String> {
        let req = request(
            trace_id,
            package_name,
            name,
            submodule_name,
            input_value,
            input_schema_merges,
            is_pre_app_start,
        );
        let outcome = self
            .inner
            .recording
            .find_mock(&req, Levels::ValueHashes)
            .map_err(|e| invalid(format!("offloop: {e}")))?;
        Ok(result_json(&outcome))
    }

    /// The whole cascade (similarity ranking included) on the blocking pool; resolves to the
    /// result as JSON.
    #[napi(
        ts_return_type = "Promise<string>",
        catch_unwind,
        ts_args_type = "traceId: string | undefined | null, packageName: string | undefined | null, name: string | undefined | null, submoduleName: string | undefined | null, inputValue: string, inputSchemaMerges: string | undefined | null, isPreAppStart: boolean"
    )]
    #[allow(clippy::too_many_arguments)]
    pub fn find_mock_async<'env>(
        &self,
        env: &'env Env,
        trace_id: OptText,
        package_name: OptText,
        name: OptText,
        submodule_name: OptText,
        input_value: Text,
        input_schema_merges: OptText,
        is_pre_app_start: bool,
    ) -> Result<PromiseRaw<'env, String>> {
        let req = request(
            trace_id,
            package_name,
            name,
            submodule_name,
            input_value,
            input_schema_merges,
            is_pre_app_start,
        );
        let inner = Arc::clone(&self.inner);
        env.spawn_future(async move {
            spawn_blocking(move || {
                inner
                    .recording
                    .find_mock(&req, Levels::All)
                    .map(|o| result_json(&o))
                    .map_err(|e| invalid(format!("offloop: {e}")))
            })
            .await
            .map_err(|e| Error::from_reason(format!("offloop: findMockAsync failed: {e}")))?
        })
    }

    /// Load and match counters.
    #[napi(catch_unwind)]
    pub fn stats(&self) -> NativeReplayStats {
        let s = self.inner.recording.stats();
        let matches: u64 = s.matches_by_type.iter().map(|(_, n)| n).sum();
        NativeReplayStats {
            files: s.files as u32,
            traces: s.traces as u32,
            spans: s.spans as u32,
            skipped_lines: s.skipped_lines as f64,
            skipped: s
                .skipped
                .into_iter()
                .map(|k| NativeSkipped {
                    file: k.file,
                    line: k.line as f64,
                    reason: k.reason,
                })
                .collect(),
            duplicate_spans: s.duplicate_spans as f64,
            load_ms: s.load_time.as_secs_f64() * 1000.0,
            hash_algorithm: s.hash.name().to_string(),
            matches: matches as f64,
            matches_by_type: s
                .matches_by_type
                .iter()
                .map(|(t, n)| NativeMatchCount {
                    match_type: t.name().to_string(),
                    count: *n as f64,
                })
                .collect(),
            matches_by_priority: s.matches_by_priority.iter().map(|&n| n as f64).collect(),
            misses: s.misses as f64,
        }
    }

    /// A recorded span's hashes and origin; `null` when there is no such span.
    #[napi(catch_unwind)]
    pub fn describe_span(&self, trace_id: String, span_id: String) -> Option<NativeSpanInfo> {
        let s = self.inner.recording.span(&trace_id, &span_id)?;
        let hex = replay::hashing::to_hex;
        Some(NativeSpanInfo {
            trace_id: s.trace_id().to_string(),
            span_id: s.span_id().to_string(),
            name: s.name().to_string(),
            package_name: s.package_name().to_string(),
            is_pre_app_start: s.is_pre_app_start,
            used: self.inner.recording.is_used(s),
            file: s.source.file.to_string(),
            line: s.source.line as f64,
            input_value_hash: hex(&s.hashes.value),
            input_schema_hash: hex(&s.hashes.schema),
            reduced_input_value_hash: hex(&s.hashes.reduced_value),
            reduced_input_schema_hash: hex(&s.hashes.reduced_schema),
            stored_input_value_hash: s.stored_value_hash().to_string(),
            stored_input_schema_hash: s.stored_schema_hash().to_string(),
        })
    }
}
