//! The batch pipeline: decode frames → validate → filter (in batch order) → record → sink,
//! with exact accounting and a flush that waits for everything accepted before it.
//!
//! The exporter is synchronous and thread-safe; callers choose the threads. The Node binding
//! runs [`Exporter::process`] on tokio's blocking pool; a Rust program can call
//! [`Exporter::export`] from any thread.

use std::collections::BTreeSet;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::error::{display_id, SpanError, Stage};
use crate::filter::{TraceFilter, SPAN_OVERHEAD_BYTES};
use crate::frame::{decode_span, split_batch, SpanFrame, SpanSlice};
use crate::hash::HashAlgorithm;
use crate::record::{self, RecordOptions, SpanRecord, OTEL_KIND_SERVER, OTEL_STATUS_ERROR};
use crate::sink::fs::{Format, FsSink};
use crate::sink::request::{self, RequestHeader};

/// Default `max_span_bytes`: 1 MiB, like the reference.
pub const DEFAULT_MAX_SPAN_BYTES: usize = 1024 * 1024;
/// Default `max_queue_bytes`: 64 MiB of span frames accepted but not yet written.
pub const DEFAULT_MAX_QUEUE_BYTES: usize = 64 * 1024 * 1024;

/// Exporter settings.
#[derive(Clone, Debug)]
pub struct ExporterConfig {
    /// Write recordings here (created if missing). `None`: no file sink.
    pub directory: Option<PathBuf>,
    /// File format.
    pub format: Format,
    /// Digest for value and schema hashes.
    pub hash: HashAlgorithm,
    /// `environment` written into every span.
    pub environment: Option<String>,
    /// A span whose `td.inputValue` + `td.outputValue` + 50 kB exceed this blocks its trace.
    pub max_span_bytes: usize,
    /// Frames accepted but not yet processed may not exceed this; further batches are dropped.
    pub max_queue_bytes: usize,
    /// When set, every batch also yields an encoded `ExportSpansRequest`.
    pub request: Option<RequestHeader>,
    /// Threads that share the spans of one batch ([`crate::dispatch::span_pool`]: shared by
    /// exporters of the same size, at background priority); 1 processes a batch on the
    /// calling thread. Default: every core.
    pub threads: usize,
}

impl Default for ExporterConfig {
    fn default() -> Self {
        ExporterConfig {
            directory: None,
            format: Format::Jsonl,
            hash: HashAlgorithm::Blake3,
            environment: None,
            max_span_bytes: DEFAULT_MAX_SPAN_BYTES,
            max_queue_bytes: DEFAULT_MAX_QUEUE_BYTES,
            request: None,
            threads: crate::dispatch::cores(),
        }
    }
}

/// Counters. `spans_received == spans_written + spans_dropped + spans_failed + spans_in_flight`
/// holds at every snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Spans handed to the exporter.
    pub spans_received: u64,
    /// Spans every sink accepted.
    pub spans_written: u64,
    /// Spans dropped by policy (full queue, filters).
    pub spans_dropped: u64,
    /// Spans that failed (bad input, sink errors, after shutdown).
    pub spans_failed: u64,
    /// Spans accepted and not yet finished.
    pub spans_in_flight: u64,
    /// Batches finished.
    pub batches: u64,
    /// Frame bytes accepted and not yet finished.
    pub bytes_queued: u64,
    /// Wall time of the last batch, in milliseconds.
    pub last_batch_ms: f64,
}

/// Proof that a batch was accepted; hand it back to [`Exporter::complete`].
#[derive(Debug)]
#[must_use = "an accepted batch must be completed, or flush() waits for it forever"]
pub struct Ticket {
    id: u64,
    spans: u32,
    bytes: usize,
}

impl Ticket {
    /// Spans in the batch.
    pub fn spans(&self) -> u32 {
        self.spans
    }
}

/// Why a batch was not accepted. The spans are counted (dropped or failed) already.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// Accepting it would exceed `max_queue_bytes`; its spans were dropped.
    QueueFull {
        /// Bytes queued when it arrived.
        queued: usize,
        /// The limit.
        limit: usize,
    },
    /// The exporter is shut down; its spans failed.
    Shutdown,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejected::QueueFull { queued, limit } => {
                write!(
                    f,
                    "queue full: {queued} bytes queued, maxQueueBytes is {limit}; batch dropped"
                )
            }
            Rejected::Shutdown => {
                f.write_str("exporter is shut down; export after shutdown() is refused")
            }
        }
    }
}

impl std::error::Error for Rejected {}

/// What happened to one batch.
#[derive(Clone, Debug, Default)]
pub struct BatchResult {
    /// Spans in the batch (as declared by its header).
    pub spans: u32,
    /// Spans written by every sink.
    pub written: u32,
    /// Spans dropped by filters.
    pub dropped: u32,
    /// Spans that failed.
    pub failed: u32,
    /// One entry per span not written.
    pub errors: Vec<SpanError>,
    /// The encoded `ExportSpansRequest`, when configured.
    pub request: Option<Vec<u8>>,
    /// `(trace_id, span_id)` of the spans recorded, in batch order.
    pub recorded: Vec<(String, String)>,
    /// Time spent processing.
    pub duration: Duration,
}

impl BatchResult {
    /// Marks every recorded span failed because a later sink (a JS callback) failed.
    pub fn fail_delivery(&mut self, message: &str) {
        for (i, (trace_id, span_id)) in self.recorded.iter().enumerate() {
            self.errors.push(SpanError {
                index: i as u32,
                trace_id: trace_id.clone(),
                span_id: span_id.clone(),
                stage: Stage::Sink,
                message: message.to_string(),
                dropped: false,
            });
        }
        self.failed += self.written;
        self.written = 0;
    }
}

/// Spans a batch declared but whose frames could not be located.
struct Lost {
    first: u32,
    count: u32,
    message: String,
}

/// The record pipeline. See the module docs.
#[derive(Debug)]
pub struct Exporter {
    config: ExporterConfig,
    /// Spreads a batch's spans over `config.threads` threads; `None` for one thread (or if
    /// the threads could not be started: the batch then runs on the calling thread).
    pool: Option<Arc<rayon::ThreadPool>>,
    record_options: RecordOptions,
    sink: Option<FsSink>,
    filter: Mutex<TraceFilter>,
    in_flight: Mutex<InFlight>,
    settled: Condvar,
    closed: AtomicBool,
    received: AtomicU64,
    written: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
    batches: AtomicU64,
    last_batch_us: AtomicU64,
}

#[derive(Debug, Default)]
struct InFlight {
    next_id: u64,
    tickets: BTreeSet<u64>,
    spans: u64,
    bytes: u64,
}

impl Exporter {
    /// Creates the exporter (and its recordings directory).
    pub fn new(config: ExporterConfig) -> io::Result<Exporter> {
        let sink = match &config.directory {
            Some(dir) => Some(FsSink::new(dir, config.format)?),
            None => None,
        };
        let pool = crate::dispatch::span_pool(config.threads);
        Ok(Exporter {
            pool,
            record_options: RecordOptions {
                hash: config.hash,
                environment: config.environment.clone(),
                jsonl: sink.as_ref().is_some_and(|s| s.format() == Format::Jsonl),
                proto: sink.as_ref().is_some_and(|s| s.format() == Format::Proto)
                    || config.request.is_some(),
            },
            config,
            sink,
            filter: Mutex::new(TraceFilter::default()),
            in_flight: Mutex::new(InFlight::default()),
            settled: Condvar::new(),
            closed: AtomicBool::new(false),
            received: AtomicU64::new(0),
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            last_batch_us: AtomicU64::new(0),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ExporterConfig {
        &self.config
    }

    /// Accepts a batch of `spans` spans in `bytes` bytes, or refuses it (queue full, shut down),
    /// counting its spans either way.
    pub fn accept(&self, spans: u32, bytes: usize) -> Result<Ticket, Rejected> {
        let mut f = self.lock_in_flight();
        self.admit_locked(&mut f, spans, bytes)?;
        Ok(Self::ticket_locked(&mut f, spans, bytes))
    }

    /// Counts `spans` spans of `bytes` bytes as received and in flight (for spans queued before
    /// they form a batch), or refuses them like [`Exporter::accept`].
    pub fn admit(&self, spans: u32, bytes: usize) -> Result<(), Rejected> {
        let mut f = self.lock_in_flight();
        self.admit_locked(&mut f, spans, bytes)
    }

    /// A ticket for spans already counted by [`Exporter::admit`].
    pub fn accept_admitted(&self, spans: u32, bytes: usize) -> Ticket {
        let mut f = self.lock_in_flight();
        Self::ticket_locked(&mut f, spans, bytes)
    }

    /// Counts spans refused because their producer was shut down.
    pub fn refuse_closed(&self, spans: u32) -> Rejected {
        let _f = self.lock_in_flight();
        self.received.fetch_add(spans as u64, Relaxed);
        self.failed.fetch_add(spans as u64, Relaxed);
        Rejected::Shutdown
    }

    fn admit_locked(&self, f: &mut InFlight, spans: u32, bytes: usize) -> Result<(), Rejected> {
        self.received.fetch_add(spans as u64, Relaxed);
        if self.closed.load(Relaxed) {
            self.failed.fetch_add(spans as u64, Relaxed);
            return Err(Rejected::Shutdown);
        }
        let queued = f.bytes as usize;
        // Something larger than the whole budget is still taken when nothing is queued, so
        // one big batch cannot be refused forever.
        if queued > 0 && queued + bytes > self.config.max_queue_bytes {
            self.dropped.fetch_add(spans as u64, Relaxed);
            return Err(Rejected::QueueFull {
                queued,
                limit: self.config.max_queue_bytes,
            });
        }
        f.spans += spans as u64;
        f.bytes += bytes as u64;
        Ok(())
    }

    fn ticket_locked(f: &mut InFlight, spans: u32, bytes: usize) -> Ticket {
        let id = f.next_id;
        f.next_id += 1;
        f.tickets.insert(id);
        Ticket { id, spans, bytes }
    }

    /// Runs the pipeline over one batch. Does not touch the counters: pass the result to
    /// [`Exporter::complete`] once every sink (including any JS callback) is done with it.
    pub fn process(&self, batch: &[u8]) -> BatchResult {
        self.process_segments(&[batch])
    }

    /// Runs the pipeline over one batch given as several segments, each a complete batch
    /// buffer (the JS shim starts a new segment instead of growing one buffer, so framing
    /// never copies a whole batch). Spans keep their order across segments.
    pub fn process_segments<B: AsRef<[u8]>>(&self, segments: &[B]) -> BatchResult {
        let mut declared = 0u32;
        let mut bodies: Vec<(u32, SpanSlice<'_>)> = Vec::new();
        let mut lost: Vec<Lost> = Vec::new();
        for (k, segment) in segments.iter().enumerate() {
            let segment = segment.as_ref();
            match split_batch(segment) {
                Ok((count, spans)) => {
                    let located = spans.len() as u32;
                    bodies.extend(
                        (spans.into_iter().enumerate())
                            .map(|(j, s)| (declared.saturating_add(j as u32), s)),
                    );
                    if count > located {
                        lost.push(Lost {
                            first: declared.saturating_add(located),
                            count: count - located,
                            message: format!(
                                "lost: batch segment {k} was cut short before these spans"
                            ),
                        });
                    }
                    declared = declared.saturating_add(count);
                }
                Err(e) => {
                    let count = crate::frame::peek_count(segment).unwrap_or(1).max(1);
                    lost.push(Lost {
                        first: declared,
                        count,
                        message: format!("batch segment {k}: {e}"),
                    });
                    declared = declared.saturating_add(count);
                }
            }
        }
        self.run(declared, bodies, lost)
    }

    /// Runs the pipeline over span frame bodies (no batch header), e.g. from a
    /// [`crate::Processor`] queue.
    pub fn process_spans<B: AsRef<[u8]>>(&self, spans: &[B]) -> BatchResult {
        let bodies = (0..).zip(spans.iter().map(|s| Ok(s.as_ref()))).collect();
        self.run(spans.len() as u32, bodies, Vec::new())
    }

    fn run(
        &self,
        declared: u32,
        bodies: Vec<(u32, SpanSlice<'_>)>,
        lost: Vec<Lost>,
    ) -> BatchResult {
        self.guarded(declared, || self.run_inner(declared, bodies, lost))
    }

    /// Runs `f`, turning a panic into a batch whose `declared` spans all failed with the panic
    /// message: a bug in the pipeline must never take the host process down.
    fn guarded(&self, declared: u32, f: impl FnOnce() -> BatchResult) -> BatchResult {
        let start = Instant::now();
        let mut result = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
            let mut r = BatchResult {
                spans: declared,
                failed: declared,
                ..BatchResult::default()
            };
            r.errors.push(SpanError {
                index: 0,
                trace_id: String::new(),
                span_id: String::new(),
                stage: Stage::Frame,
                message: format!(
                    "internal error while processing the batch: {}",
                    panic_message(&panic)
                ),
                dropped: false,
            });
            r
        });
        result.duration = start.elapsed();
        result
    }

    /// A batch of one span whose processing panics, through the same guard as real batches.
    /// For tests of panic containment (e.g. from JS); not part of the supported API.
    #[doc(hidden)]
    pub fn process_with_panic_for_testing(&self) -> BatchResult {
        self.guarded(1, || panic!("offloop test panic (pool)"))
    }

    fn run_inner(
        &self,
        declared: u32,
        bodies: Vec<(u32, SpanSlice<'_>)>,
        lost: Vec<Lost>,
    ) -> BatchResult {
        let mut result = BatchResult {
            spans: declared,
            ..BatchResult::default()
        };
        let fail = |result: &mut BatchResult,
                    index: u32,
                    frame: Option<&SpanFrame<'_>>,
                    stage: Stage,
                    message: String,
                    dropped: bool| {
            result.errors.push(SpanError {
                index,
                trace_id: frame.map(|f| display_id(f.trace_id)).unwrap_or_default(),
                span_id: frame.map(|f| display_id(f.span_id)).unwrap_or_default(),
                stage,
                message,
                dropped,
            });
            if dropped {
                result.dropped += 1;
            } else {
                result.failed += 1;
            }
        };
        // Spans the framing could not locate: one entry per run (a bogus header may claim
        // billions), all counted.
        for l in lost {
            fail(&mut result, l.first, None, Stage::Frame, l.message, false);
            result.failed = result.failed.saturating_add(l.count - 1);
        }

        // Decode, validate and filter in batch order (the filters are order-dependent).
        let mut kept: Vec<(u32, SpanFrame<'_>)> = Vec::with_capacity(bodies.len());
        {
            let mut filter = self.filter.lock().unwrap_or_else(|p| p.into_inner());
            for (i, body) in &bodies {
                let i = *i;
                let frame = match body
                    .as_ref()
                    .map_err(|e| e.to_string())
                    .and_then(|b| decode_span(b).map_err(|e| e.to_string()))
                {
                    Ok(f) => f,
                    Err(e) => {
                        fail(&mut result, i, None, Stage::Frame, e, false);
                        continue;
                    }
                };
                if let Err((stage, msg)) = record::validate(&frame) {
                    fail(&mut result, i, Some(&frame), stage, msg, false);
                    continue;
                }
                if filter.is_blocked(frame.trace_id) {
                    let msg = "trace is blocked: an earlier span of it was oversized or a SERVER span with ERROR status".to_string();
                    fail(&mut result, i, Some(&frame), Stage::Filter, msg, true);
                    continue;
                }
                let size = record::payload_bytes(&frame) + SPAN_OVERHEAD_BYTES;
                if size > self.config.max_span_bytes {
                    filter.block(frame.trace_id);
                    let msg = format!(
                        "span too large: td.inputValue + td.outputValue + {SPAN_OVERHEAD_BYTES} B overhead = {size} B exceeds maxSpanBytes {}; its trace is blocked",
                        self.config.max_span_bytes
                    );
                    fail(&mut result, i, Some(&frame), Stage::Filter, msg, true);
                    continue;
                }
                if frame.kind == OTEL_KIND_SERVER && frame.status_code == OTEL_STATUS_ERROR {
                    filter.block(frame.trace_id);
                    let msg =
                        "SERVER span with ERROR status: its trace is blocked and not recorded"
                            .to_string();
                    fail(&mut result, i, Some(&frame), Stage::Filter, msg, true);
                    continue;
                }
                kept.push((i, frame));
            }
        }

        // The per-span work is independent: spread it over the pool, keeping batch order.
        let record_one = |frame: &SpanFrame<'_>| {
            catch_unwind(AssertUnwindSafe(|| {
                record::record(frame, &self.record_options)
            }))
            .unwrap_or_else(|panic| {
                Err((
                    Stage::Frame,
                    format!("internal error: {}", panic_message(&panic)),
                ))
            })
        };
        let outcomes: Vec<_> = match &self.pool {
            Some(pool) if kept.len() > 1 => {
                pool.install(|| kept.par_iter().map(|(_, f)| record_one(f)).collect())
            }
            _ => kept.iter().map(|(_, f)| record_one(f)).collect(),
        };
        let mut records: Vec<(u32, SpanRecord)> = Vec::with_capacity(kept.len());
        for ((i, frame), outcome) in kept.iter().zip(outcomes) {
            match outcome {
                Ok(r) => records.push((*i, r)),
                Err((stage, msg)) => fail(&mut result, *i, Some(frame), stage, msg, false),
            }
        }

        if let Some(sink) = &self.sink {
            let refs: Vec<&SpanRecord> = records.iter().map(|(_, r)| r).collect();
            let mut failed = sink.write(&refs);
            failed.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
            for (j, msg) in failed {
                let (i, r) = records.remove(j);
                result.errors.push(SpanError {
                    index: i,
                    trace_id: r.trace_id,
                    span_id: r.span_id,
                    stage: Stage::Sink,
                    message: msg,
                    dropped: false,
                });
                result.failed += 1;
            }
        }
        if let Some(header) = &self.config.request {
            result.request = Some(request::encode(
                header,
                records.iter().map(|(_, r)| r.proto.as_slice()),
            ));
        }
        result.written = records.len() as u32;
        result.recorded = records
            .into_iter()
            .map(|(_, r)| (r.trace_id, r.span_id))
            .collect();
        result.errors.sort_by_key(|e| e.index);
        result
    }

    /// Settles an accepted batch: updates the counters and wakes flushes waiting for it.
    pub fn complete(&self, ticket: Ticket, result: &BatchResult) {
        let accounted = result.written + result.dropped + result.failed;
        // The frame header is the source of truth for the count; never let a disagreement
        // break the invariant.
        let extra_failed = ticket.spans.saturating_sub(accounted);
        // The counters move under the in-flight lock, together with `in_flight`: `stats()`
        // reads under the same lock, so no snapshot can see a batch counted as written and
        // still in flight (received < written + dropped + failed + in flight).
        let mut f = self.lock_in_flight();
        self.written.fetch_add(result.written as u64, Relaxed);
        self.dropped.fetch_add(result.dropped as u64, Relaxed);
        self.failed
            .fetch_add((result.failed + extra_failed) as u64, Relaxed);
        if accounted > ticket.spans {
            self.received
                .fetch_add((accounted - ticket.spans) as u64, Relaxed);
        }
        self.batches.fetch_add(1, Relaxed);
        self.last_batch_us
            .store(result.duration.as_micros() as u64, Relaxed);
        f.tickets.remove(&ticket.id);
        f.spans -= ticket.spans as u64;
        f.bytes -= ticket.bytes as u64;
        drop(f);
        self.settled.notify_all();
    }

    /// Accepts, processes and completes a batch on the calling thread.
    pub fn export(&self, batch: &[u8]) -> Result<BatchResult, Rejected> {
        let spans = crate::frame::peek_count(batch).unwrap_or(0);
        let ticket = self.accept(spans, batch.len())?;
        let result = self.process(batch);
        self.complete(ticket, &result);
        Ok(result)
    }

    /// Waits until every batch accepted before this call is complete. Returns false on
    /// timeout.
    pub fn flush(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut f = self.lock_in_flight();
        let watermark = f.next_id;
        loop {
            match f.tickets.first() {
                Some(&oldest) if oldest < watermark => {}
                _ => return true,
            }
            f = match deadline {
                None => self.settled.wait(f).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    self.settled
                        .wait_timeout(f, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    /// Refuses new batches from now on. Already accepted ones still finish; `flush` waits
    /// for them. Idempotent.
    pub fn close(&self) {
        let _f = self.lock_in_flight();
        self.closed.store(true, Relaxed);
    }

    /// True after [`Exporter::close`].
    pub fn is_closed(&self) -> bool {
        self.closed.load(Relaxed)
    }

    /// A consistent snapshot of the counters.
    pub fn stats(&self) -> StatsSnapshot {
        let f = self.lock_in_flight();
        StatsSnapshot {
            spans_received: self.received.load(Relaxed),
            spans_written: self.written.load(Relaxed),
            spans_dropped: self.dropped.load(Relaxed),
            spans_failed: self.failed.load(Relaxed),
            spans_in_flight: f.spans,
            batches: self.batches.load(Relaxed),
            bytes_queued: f.bytes,
            last_batch_ms: self.last_batch_us.load(Relaxed) as f64 / 1000.0,
        }
    }

    /// Refuses (and counts as dropped) a batch of `spans` spans before its producer spends
    /// anything on it, when the queue is already at `max_queue_bytes`. Lets the JS shim skip
    /// framing batches that would only be dropped, so a flood of exports cannot grow the JS
    /// heap either.
    pub fn refuse_if_full(&self, spans: u32) -> Result<(), Rejected> {
        let f = self.lock_in_flight();
        let queued = f.bytes as usize;
        if queued < self.config.max_queue_bytes {
            return Ok(());
        }
        self.received.fetch_add(spans as u64, Relaxed);
        self.dropped.fetch_add(spans as u64, Relaxed);
        Err(Rejected::QueueFull {
            queued,
            limit: self.config.max_queue_bytes,
        })
    }

    /// Counts spans that never reached a batch (e.g. a processor queue overflow).
    pub fn count_dropped_before_accept(&self, spans: u64) {
        let _f = self.lock_in_flight();
        self.received.fetch_add(spans, Relaxed);
        self.dropped.fetch_add(spans, Relaxed);
    }

    fn lock_in_flight(&self) -> std::sync::MutexGuard<'_, InFlight> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}
