//! Node.js binding for `offloop`: converts types, schedules work on tokio's blocking pool and
//! settles promises / calls the `onBatch` threadsafe function. Nothing else lives here.
#![deny(clippy::all)]

mod replay;
mod text;

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeCallContext, ThreadsafeFunction};
use napi_derive::napi;

use offloop::dispatch::{default_workers, Dispatcher, Spawn};
use offloop::exporter::{BatchResult, Exporter, ExporterConfig, Rejected, Ticket};
use offloop::processor::{Processor, ProcessorConfig};
use offloop::sink::request::RequestHeader;
use offloop::{Format, HashAlgorithm};

/// `onBatch` as seen from Rust: called with the encoded `ExportSpansRequest`; the JS shim
/// wraps the user's function so it always returns a promise. Weak: it never keeps the process
/// alive by itself.
type OnBatch = ThreadsafeFunction<Vec<u8>, Promise<()>, Buffer, Status, false, true>;

/// Processor mode: receives the report of every batch the processor forms (the user's
/// `onReport`, or the shim's fallback that turns span errors into warnings). Without it a bad
/// span in processor mode would only ever be a number in `stats()`. Weak and called without
/// waiting: it never keeps the process alive or holds a batch back.
type OnReport = ThreadsafeFunction<BatchReport, (), BatchReport, Status, false, true>;

/// Options shared by the exporter and the processor (camelCase in JS).
#[napi(object)]
pub struct NativeOptions {
    /// Recordings directory; omitted: no file sink.
    pub directory: Option<String>,
    /// `"blake3"` (default) or `"sha256"`.
    pub hash_algorithm: Option<String>,
    /// Written as `environment` into every span.
    pub environment: Option<String>,
    /// `"jsonl"` (default) or `"proto"`.
    pub format: Option<String>,
    /// Spans whose payloads exceed this (bytes, with 50 kB overhead) block their trace.
    pub max_span_bytes: Option<f64>,
    /// Bytes accepted but not yet written before new spans are dropped.
    pub max_queue_bytes: Option<f64>,
    /// Batches processed at once (default: cores − 1, at least 1).
    pub workers: Option<u32>,
    /// Threads sharing the spans of one batch, at background priority (default: all cores).
    pub threads: Option<u32>,
    /// `ExportSpansRequest.observable_service_id` for `onBatch`.
    pub service_id: Option<String>,
    /// `ExportSpansRequest.sdk_version` for `onBatch`.
    pub sdk_version: Option<String>,
    /// `ExportSpansRequest.sdk_instance_id` for `onBatch`.
    pub sdk_instance_id: Option<String>,
    /// Processor mode: batch spans natively (spans are handed over with `enqueue`).
    pub processor: Option<bool>,
    /// Processor: longest wait before a batch is formed (ms, default 1000).
    pub scheduled_delay_millis: Option<f64>,
    /// Processor: most spans per batch (default 512).
    pub max_export_batch_size: Option<u32>,
    /// Longest wait for `onBatch` to settle before its batch fails (ms, default 30000), so
    /// flush and shutdown cannot hang on a callback that never settles.
    pub export_timeout_millis: Option<f64>,
}

/// One span that was not written.
#[napi(object)]
pub struct SpanErrorReport {
    pub index: u32,
    pub trace_id: String,
    pub span_id: String,
    pub stage: String,
    pub message: String,
    pub dropped: bool,
}

/// What happened to one batch.
#[napi(object)]
pub struct BatchReport {
    pub spans: u32,
    pub written: u32,
    pub dropped: u32,
    pub failed: u32,
    pub duration_ms: f64,
    pub errors: Vec<SpanErrorReport>,
    /// Set when the whole batch was refused (queue full, shut down).
    pub rejected: Option<String>,
}

/// Counters; `spansReceived === spansWritten + spansDropped + spansFailed + spansInFlight`.
#[napi(object)]
pub struct Stats {
    pub spans_received: f64,
    pub spans_written: f64,
    pub spans_dropped: f64,
    pub spans_failed: f64,
    pub spans_in_flight: f64,
    pub batches: f64,
    pub bytes_queued: f64,
    pub last_batch_ms: f64,
    pub workers: u32,
}

struct Shared {
    exporter: Arc<Exporter>,
    dispatcher: Arc<Dispatcher>,
    on_batch: Option<Arc<OnBatch>>,
    on_report: Option<OnReport>,
    export_timeout: Duration,
}

/// The native half of `OffloopExporter` / `OffloopSpanProcessor`.
#[napi]
pub struct NativeExporter {
    shared: Arc<Shared>,
    processor: Option<Processor>,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, msg.into())
}

fn positive(name: &str, v: Option<f64>, default: usize) -> Result<usize> {
    match v {
        None => Ok(default),
        Some(x) if x.is_finite() && x >= 1.0 => Ok(x as usize),
        Some(x) => Err(invalid(format!(
            "{name} must be a positive number, got {x}"
        ))),
    }
}

/// Batches run on threads of their own at background priority (tokio's blocking pool is
/// shared with recording loads and `findMockAsync`, which must keep their priority); tokio's
/// pool is the fallback if a thread cannot be started.
fn batch_threads() -> Spawn {
    offloop::dispatch::background_threads(Arc::new(|job| {
        napi::bindgen_prelude::spawn_blocking(job);
    }))
}

#[napi]
impl NativeExporter {
    #[napi(constructor, catch_unwind)]
    pub fn new(
        options: NativeOptions,
        on_batch: Option<Function<Buffer, Promise<()>>>,
        on_report: Option<Function<BatchReport, ()>>,
    ) -> Result<Self> {
        let hash = match &options.hash_algorithm {
            None => HashAlgorithm::Blake3,
            Some(s) => s.parse().map_err(invalid)?,
        };
        let format = match &options.format {
            None => Format::Jsonl,
            Some(s) => s.parse().map_err(invalid)?,
        };
        let on_batch = match on_batch {
            None => None,
            Some(f) => Some(Arc::new(
                f.build_threadsafe_function::<Vec<u8>>()
                    .weak::<true>()
                    .callee_handled::<false>()
                    .build_callback(|ctx: ThreadsafeCallContext<Vec<u8>>| {
                        Ok(Buffer::from(ctx.value))
                    })?,
            )),
        };
        let config = ExporterConfig {
            directory: options.directory.map(Into::into),
            format,
            hash,
            environment: options.environment.clone(),
            max_span_bytes: positive(
                "maxSpanBytes",
                options.max_span_bytes,
                offloop::exporter::DEFAULT_MAX_SPAN_BYTES,
            )?,
            max_queue_bytes: positive(
                "maxQueueBytes",
                options.max_queue_bytes,
                offloop::exporter::DEFAULT_MAX_QUEUE_BYTES,
            )?,
            threads: options
                .threads
                .map_or_else(offloop::dispatch::cores, |t| t.max(1) as usize),
            request: on_batch.as_ref().map(|_| RequestHeader {
                observable_service_id: options.service_id.unwrap_or_default(),
                environment: options.environment.unwrap_or_default(),
                sdk_version: options
                    .sdk_version
                    .unwrap_or_else(|| format!("offloop/{}", env!("CARGO_PKG_VERSION"))),
                sdk_instance_id: options.sdk_instance_id.unwrap_or_default(),
            }),
        };
        let workers = options
            .workers
            .map(|w| w.max(1) as usize)
            .unwrap_or_else(default_workers);
        let exporter =
            Arc::new(Exporter::new(config).map_err(|e| Error::from_reason(e.to_string()))?);
        let on_report = match on_report {
            Some(f) if options.processor.unwrap_or(false) => Some(
                f.build_threadsafe_function::<BatchReport>()
                    .weak::<true>()
                    .callee_handled::<false>()
                    .build()?,
            ),
            _ => None,
        };
        let export_timeout = Duration::from_millis(positive(
            "exportTimeoutMillis",
            options.export_timeout_millis,
            30_000,
        )? as u64);
        let shared = Arc::new(Shared {
            exporter,
            dispatcher: Dispatcher::new(workers, batch_threads()),
            on_batch,
            on_report,
            export_timeout,
        });
        let processor = if options.processor.unwrap_or(false) {
            let config = ProcessorConfig {
                scheduled_delay: Duration::from_millis(positive(
                    "scheduledDelayMillis",
                    options.scheduled_delay_millis,
                    1000,
                )? as u64),
                max_export_batch_size: options
                    .max_export_batch_size
                    .map(|n| n.max(1) as usize)
                    .unwrap_or(512),
            };
            let s = Arc::clone(&shared);
            Some(Processor::new(
                Arc::clone(&shared.exporter),
                config,
                Arc::clone(&shared.dispatcher),
                Arc::new(move |ticket, frames| {
                    run_batch(Arc::clone(&s), ticket, Batch::Spans(frames), None)
                }),
            ))
        } else {
            None
        };
        Ok(NativeExporter { shared, processor })
    }

    /// Processes one batch, framed as one or more segments, on the blocking pool. The batch is
    /// accepted (counted, and covered by later flushes) before this returns. The segments are
    /// read in place: the caller must not touch them until the promise settles.
    #[napi(ts_return_type = "Promise<BatchReport>", catch_unwind)]
    pub fn export<'env>(
        &self,
        env: &'env Env,
        segments: Vec<Buffer>,
    ) -> Result<PromiseRaw<'env, BatchReport>> {
        let spans = segments
            .iter()
            .map(|s| offloop::frame::peek_count(s).unwrap_or(1))
            .fold(0u32, u32::saturating_add);
        let bytes = segments.iter().map(|s| s.len()).sum();
        self.submit(env, spans, bytes, Batch::Segments(segments))
    }

    /// Refuses a batch of `spans` spans up front when the queue is already full: returns its
    /// report (the spans are counted dropped), or nothing when there is room. Called before
    /// framing, so a batch that would be dropped costs the JS thread nothing.
    #[napi(catch_unwind)]
    pub fn refuse_if_full(&self, spans: u32) -> Option<BatchReport> {
        self.shared
            .exporter
            .refuse_if_full(spans)
            .err()
            .map(|rejected| rejected_report(spans, &rejected))
    }

    /// Processor mode: queues one span frame (copied). Returns false when it was refused
    /// (queue full: dropped; shut down: failed); `stats()` counts it either way.
    #[napi(catch_unwind)]
    pub fn enqueue(&self, frame: &[u8]) -> Result<bool> {
        let processor = self
            .processor
            .as_ref()
            .ok_or_else(|| invalid("enqueue() needs processor mode"))?;
        Ok(processor.enqueue(frame).is_ok())
    }

    /// Waits until everything accepted before the call is written. Resolves false on timeout.
    #[napi(ts_return_type = "Promise<boolean>", catch_unwind)]
    pub fn flush<'env>(
        &self,
        env: &'env Env,
        timeout_millis: Option<f64>,
    ) -> Result<PromiseRaw<'env, bool>> {
        self.wait(env, timeout_millis, false)
    }

    /// Refuses new spans, then flushes. Idempotent. Resolves false on timeout.
    #[napi(ts_return_type = "Promise<boolean>", catch_unwind)]
    pub fn shutdown<'env>(
        &self,
        env: &'env Env,
        timeout_millis: Option<f64>,
    ) -> Result<PromiseRaw<'env, bool>> {
        self.wait(env, timeout_millis, true)
    }

    /// Current counters.
    #[napi(catch_unwind)]
    pub fn stats(&self) -> Stats {
        let s = self.shared.exporter.stats();
        Stats {
            spans_received: s.spans_received as f64,
            spans_written: s.spans_written as f64,
            spans_dropped: s.spans_dropped as f64,
            spans_failed: s.spans_failed as f64,
            spans_in_flight: s.spans_in_flight as f64,
            batches: s.batches as f64,
            bytes_queued: s.bytes_queued as f64,
            last_batch_ms: s.last_batch_ms,
            workers: self.shared.dispatcher.workers() as u32,
        }
    }
}

impl NativeExporter {
    fn wait<'env>(
        &self,
        env: &'env Env,
        timeout_millis: Option<f64>,
        shutdown: bool,
    ) -> Result<PromiseRaw<'env, bool>> {
        let timeout = timeout_millis
            .filter(|t| t.is_finite() && *t >= 0.0)
            .map(|t| Duration::from_micros((t * 1000.0) as u64));
        let exporter = Arc::clone(&self.shared.exporter);
        // Processor flushes run on the processor (it must batch its queue first).
        let processor = self.processor.as_ref().map(ProcessorHandle::new);
        // Refuse new spans now, on the JS thread: the wait below starts on the blocking pool
        // whenever a thread is free, and a span ended after shutdown() must not slip in before
        // it (it would be written, unlike an export() after shutdown()).
        if shutdown {
            match &processor {
                Some(p) => p.0.close(),
                None => exporter.close(),
            }
        }
        env.spawn_future(async move {
            let done = napi::bindgen_prelude::spawn_blocking(move || match (processor, shutdown) {
                (Some(p), true) => p.shutdown(timeout),
                (Some(p), false) => p.flush(timeout),
                (None, _) => exporter.flush(timeout),
            })
            .await
            .map_err(|e| Error::from_reason(format!("offloop: flush failed: {e}")))?;
            Ok(done)
        })
    }
}

/// A `Send` handle to the processor for blocking waits.
struct ProcessorHandle(offloop::processor::ProcessorRef);

impl ProcessorHandle {
    fn new(p: &Processor) -> Self {
        ProcessorHandle(p.handle())
    }
    fn flush(&self, timeout: Option<Duration>) -> bool {
        self.0.flush(timeout)
    }
    fn shutdown(&self, timeout: Option<Duration>) -> bool {
        self.0.shutdown(timeout)
    }
}

/// A batch as it reaches a worker.
impl NativeExporter {
    /// Accepts a batch of `spans` spans and `bytes` bytes and schedules it; the promise
    /// resolves with its report.
    fn submit<'env>(
        &self,
        env: &'env Env,
        spans: u32,
        bytes: usize,
        batch: Batch,
    ) -> Result<PromiseRaw<'env, BatchReport>> {
        let ticket = match self.shared.exporter.accept(spans, bytes) {
            Ok(t) => t,
            Err(rejected) => {
                let report = rejected_report(spans, &rejected);
                return env.spawn_future(async move { Ok(report) });
            }
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let shared = Arc::clone(&self.shared);
        self.shared
            .dispatcher
            .submit(Box::new(move || run_batch(shared, ticket, batch, Some(tx))));
        env.spawn_future(async move {
            let result = rx.await.map_err(|_| {
                Error::from_reason("offloop: the batch was abandoned (runtime shutting down)")
            })?;
            Ok(report(&result))
        })
    }
}

enum Batch {
    /// From `export()`: segments framed by the JS shim.
    Segments(Vec<Buffer>),
    /// From the processor queue: span frame bodies.
    Spans(Vec<Vec<u8>>),
}

/// Runs one accepted batch (on a dispatcher worker), delivers it to `onBatch` if set, and
/// settles it. Never panics: the pipeline catches panics and reports them per batch.
fn run_batch(
    shared: Arc<Shared>,
    ticket: Ticket,
    batch: Batch,
    done: Option<tokio::sync::oneshot::Sender<BatchResult>>,
) {
    let mut result = match &batch {
        Batch::Segments(segments) => shared.exporter.process_segments(segments),
        Batch::Spans(frames) => shared.exporter.process_spans(frames),
    };
    drop(batch);
    let request = result.request.take();
    match (shared.on_batch.clone(), request) {
        (Some(on_batch), Some(bytes)) if result.written > 0 => {
            napi::bindgen_prelude::spawn(async move {
                let delivery = async {
                    match on_batch.call_async_catch(bytes).await {
                        Ok(promise) => promise.await,
                        Err(e) => Err(e),
                    }
                };
                match tokio::time::timeout(shared.export_timeout, delivery).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => result.fail_delivery(&format!("onBatch failed: {}", e.reason)),
                    Err(_) => result.fail_delivery(&format!(
                        "onBatch did not settle within exportTimeoutMillis ({} ms)",
                        shared.export_timeout.as_millis()
                    )),
                }
                settle(&shared, ticket, result, done);
            });
        }
        _ => settle(&shared, ticket, result, done),
    }
}

/// Counts a finished batch and hands its result to whoever waits for it: the `export()`
/// promise, or (processor batches) the report callback.
fn settle(
    shared: &Shared,
    ticket: Ticket,
    result: BatchResult,
    done: Option<tokio::sync::oneshot::Sender<BatchResult>>,
) {
    shared.exporter.complete(ticket, &result);
    match (done, &shared.on_report) {
        (Some(tx), _) => {
            let _ = tx.send(result);
        }
        (None, Some(on_report)) => {
            on_report.call(
                report(&result),
                napi::threadsafe_function::ThreadsafeFunctionCallMode::NonBlocking,
            );
        }
        (None, None) => {}
    }
}

fn report(r: &BatchResult) -> BatchReport {
    BatchReport {
        spans: r.spans,
        written: r.written,
        dropped: r.dropped,
        failed: r.failed,
        duration_ms: r.duration.as_secs_f64() * 1000.0,
        errors: r
            .errors
            .iter()
            .map(|e| SpanErrorReport {
                index: e.index,
                trace_id: e.trace_id.clone(),
                span_id: e.span_id.clone(),
                stage: e.stage.name().to_string(),
                message: e.message.clone(),
                dropped: e.dropped,
            })
            .collect(),
        rejected: None,
    }
}

fn rejected_report(spans: u32, rejected: &Rejected) -> BatchReport {
    let dropped = matches!(rejected, Rejected::QueueFull { .. });
    BatchReport {
        spans,
        written: 0,
        dropped: if dropped { spans } else { 0 },
        failed: if dropped { 0 } else { spans },
        duration_ms: 0.0,
        errors: Vec::new(),
        rejected: Some(rejected.to_string()),
    }
}

/// Options of `hashPayload`.
#[napi(object)]
pub struct HashOptions {
    /// `"blake3"` (default) or `"sha256"`.
    pub hash_algorithm: Option<String>,
    /// The merge map as JSON text (the shim stringifies objects).
    pub schema_merges: Option<String>,
}

/// Result of `hashPayload` (schema and decoded value as JSON text; the shim parses them).
#[napi(object)]
pub struct HashResult {
    pub value_hash: String,
    pub schema_hash: String,
    pub schema_json: String,
    pub decoded_value_json: String,
}

/// Hashes one payload with exactly the exporter's code. Synchronous: it runs on the calling
/// thread (microseconds for request-sized payloads).
#[napi(catch_unwind)]
pub fn hash_payload(
    json: Either<String, Buffer>,
    options: Option<HashOptions>,
) -> Result<HashResult> {
    let (algo, merges) = match options {
        None => (HashAlgorithm::Blake3, None),
        Some(o) => (
            match o.hash_algorithm {
                None => HashAlgorithm::Blake3,
                Some(s) => s.parse().map_err(invalid)?,
            },
            o.schema_merges,
        ),
    };
    let bytes: &[u8] = match &json {
        Either::A(s) => s.as_bytes(),
        Either::B(b) => b,
    };
    let p = offloop::hash_payload(bytes, merges.as_deref().map(str::as_bytes), algo)
        .map_err(invalid)?;
    Ok(HashResult {
        value_hash: p.value_hash,
        schema_hash: p.schema_hash,
        schema_json: p.schema.to_canonical_json(),
        decoded_value_json: String::from_utf8(p.canonical)
            .map_err(|e| Error::from_reason(e.to_string()))?,
    })
}

/// Panics on purpose, so tests can check that a Rust panic surfaces as a JS error (`"sync"`:
/// in a synchronous call) or as per-batch error data (`"pool"`: inside a batch on the worker
/// pool) and never aborts the process. Not part of the public API.
#[napi(catch_unwind, js_name = "__panicForTesting")]
pub fn panic_for_testing(site: String) -> Result<BatchReport> {
    match site.as_str() {
        "sync" => panic!("offloop test panic (sync)"),
        "pool" => {
            let exporter = Exporter::new(ExporterConfig::default())
                .map_err(|e| Error::from_reason(e.to_string()))?;
            Ok(report(&exporter.process_with_panic_for_testing()))
        }
        other => Err(invalid(format!("unknown panic site {other:?}"))),
    }
}
