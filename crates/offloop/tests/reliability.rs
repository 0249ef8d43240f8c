//! Reliability (issue 3), through the public API: exact accounting at every snapshot under
//! concurrency, a corpus of malformed frames that only a Rust caller (or a corrupted buffer)
//! can produce, the file sink's path guard, whole lines under concurrent appends, and a
//! processor shut down at random points losing nothing it accepted.
//!
//! The JS-reachable corpus (bad JSON, wrong attribute types, bogus ids from real spans) is in
//! `__test__/reliability-corpus.test.js`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use offloop::dispatch::{std_threads, Dispatcher};
use offloop::frame::{AttrValue, BatchWriter, SpanFrame};
use offloop::record::SpanRecord;
use offloop::sink::fs::FsSink;
use offloop::{Exporter, ExporterConfig, Format, Processor, ProcessorConfig, Stage};

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const INPUT: &[u8] = br#"{"text":"SELECT 1","values":[1]}"#;

fn span_id(n: usize) -> String {
    format!("{:016x}", n + 1)
}

fn trace_id(n: usize) -> String {
    format!("{:032x}", n + 1)
}

/// A good span with the given ids and the usual Tusk attributes.
fn good<'a>(trace: &'a str, span: &'a str) -> SpanFrame<'a> {
    SpanFrame {
        trace_id: trace,
        span_id: span,
        parent_span_id: "",
        kind: 2,
        status_code: 1,
        start: (1_700_000_000.0, 5),
        duration: (0.0, 1_000),
        name: "pg.query",
        status_message: "",
        scope_name: "tusk-drift-sdk",
        attrs: vec![
            ("td.inputValue", AttrValue::Str(INPUT)),
            ("td.outputValue", AttrValue::Str(br#"{"rows":[]}"#)),
            ("td.packageName", AttrValue::Str(b"pg")),
        ],
    }
}

/// The body (no length prefix) of one encoded span.
fn body(span: &SpanFrame<'_>) -> Vec<u8> {
    let mut w = BatchWriter::new();
    w.push(span);
    w.finish()[12..].to_vec()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Every line of every file in `dir`, parsed; panics on a line that is not JSON.
fn lines(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for p in files_under(dir) {
        let text = fs::read_to_string(&p).unwrap();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "{p:?} ends mid-line"
        );
        for (i, l) in text.lines().enumerate() {
            out.push(serde_json::from_str(l).unwrap_or_else(|e| panic!("{p:?}:{}: {e}", i + 1)));
        }
    }
    out
}

/// A small deterministic PRNG (xorshift64*), seeded from the clock; the seed is printed so a
/// failing run can be repeated with `OFFLOOP_SEED`.
struct Rng(u64);

impl Rng {
    fn from_env(test: &str) -> Rng {
        let seed = std::env::var("OFFLOOP_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("{test}: OFFLOOP_SEED={seed}");
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

// ---------------------------------------------------------------------------------------------
// Accounting

/// `received == written + dropped + failed + in_flight` and `bytes_queued <= maxQueueBytes` in
/// every snapshot taken while two threads accept, process and complete batches (some refused
/// because the queue is full, some with bad spans).
#[test]
fn accounting_is_exact_at_every_snapshot_under_concurrency() {
    let ids: Vec<String> = (0..8).map(span_id).collect();
    let mut w = BatchWriter::new();
    for (i, id) in ids.iter().enumerate() {
        let mut s = good(TRACE, id);
        if i == 3 {
            s.attrs[0] = ("td.inputValue", AttrValue::Str(b"{"));
        }
        w.push(&s);
    }
    let batch = Arc::new(w.finish());
    // Room for 5 batches; the producers hold up to 14 between them.
    let limit = 5 * batch.len();
    let e = Arc::new(
        Exporter::new(ExporterConfig {
            directory: None,
            max_queue_bytes: limit,
            ..ExporterConfig::default()
        })
        .unwrap(),
    );

    let stop = Arc::new(AtomicBool::new(false));
    let snapshots = Arc::new(AtomicU64::new(0));
    let observer = {
        let (e, stop, snapshots) = (e.clone(), stop.clone(), snapshots.clone());
        std::thread::spawn(move || {
            let mut bad = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let s = e.stats();
                snapshots.fetch_add(1, Ordering::Relaxed);
                let sum = s.spans_written + s.spans_dropped + s.spans_failed + s.spans_in_flight;
                if s.spans_received != sum || s.bytes_queued as usize > limit {
                    bad.push(s);
                }
            }
            bad
        })
    };
    let producers: Vec<_> = (0..2)
        .map(|_| {
            let (e, batch) = (e.clone(), batch.clone());
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for i in 0..4000 {
                    // Hold a few tickets at a time so the queue fills up and refuses batches.
                    if let Ok(t) = e.accept(8, batch.len()) {
                        held.push(t);
                    }
                    if i % 3 == 0 || held.len() > 6 {
                        for t in held.drain(..) {
                            let r = e.process(&batch);
                            e.complete(t, &r);
                        }
                    }
                }
                for t in held {
                    let r = e.process(&batch);
                    e.complete(t, &r);
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let bad = observer.join().unwrap();
    let s = e.stats();
    assert!(
        bad.is_empty(),
        "{} of {} snapshots broke the invariant, first: {:?}",
        bad.len(),
        snapshots.load(Ordering::Relaxed),
        bad[0]
    );
    assert_eq!(s.spans_received, 2 * 4000 * 8);
    assert_eq!(s.spans_in_flight, 0);
    assert_eq!(s.bytes_queued, 0);
    assert!(s.spans_dropped > 0, "the queue filled up at least once");
    assert_eq!(
        s.spans_received,
        s.spans_written + s.spans_dropped + s.spans_failed
    );
    assert_eq!(s.spans_failed, (s.spans_written + s.spans_failed) / 8);
}

// ---------------------------------------------------------------------------------------------
// Bad frames only a Rust caller (or corrupted bytes) can produce

type Mutate = fn(&mut Vec<u8>);

/// Byte-level corruptions of a good span body: (name, mutation, stage, message must contain).
fn byte_cases() -> Vec<(&'static str, Mutate, Stage, &'static str)> {
    // A body starts with the trace id: u32 length (32) then its bytes.
    vec![
        (
            "traceId with invalid UTF-8",
            |b| b[4] = 0xff,
            Stage::Frame,
            "traceId: invalid UTF-8",
        ),
        (
            "spanId with invalid UTF-8",
            |b| b[4 + 32 + 4] = 0xc3,
            Stage::Frame,
            "spanId: invalid UTF-8",
        ),
        (
            "span frame cut short",
            |b| b.truncate(b.len() - 3),
            Stage::Frame,
            "truncated frame",
        ),
        (
            "trailing bytes after the attributes",
            |b| b.extend_from_slice(b"xx"),
            Stage::Frame,
            "2 trailing bytes in span frame",
        ),
        (
            "attribute count larger than the frame",
            |b| {
                // The attribute count follows the scope name; find it from the end: three
                // attributes precede the end, so patch the count by re-encoding.
                let pos = attr_count_offset(b);
                b[pos..pos + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            },
            Stage::Frame,
            "attribute count: count 4294967295 exceeds the frame",
        ),
        (
            "unknown attribute value type",
            |b| {
                let pos = attr_count_offset(b) + 4; // first attribute: key str, then type
                let key_len = u32::from_le_bytes(b[pos..pos + 4].try_into().unwrap()) as usize;
                b[pos + 4 + key_len] = 42;
            },
            Stage::Frame,
            "attribute \"td.inputValue\": unknown value type 42",
        ),
    ]
}

/// Offset of the attribute count in a body made by [`body`] from [`good`].
fn attr_count_offset(b: &[u8]) -> usize {
    let mut pos = 0;
    let str_at = |pos: &mut usize| {
        let n = u32::from_le_bytes(b[*pos..*pos + 4].try_into().unwrap()) as usize;
        *pos += 4 + n;
    };
    for _ in 0..3 {
        str_at(&mut pos); // trace, span, parent
    }
    pos += 2 + 12 + 12; // kind, status, start, duration
    for _ in 0..3 {
        str_at(&mut pos); // name, status message, scope
    }
    pos
}

/// Span-level cases: (name, the bad span, stage, the message starts with).
fn frame_cases() -> Vec<(&'static str, SpanFrame<'static>, Stage, &'static str)> {
    let t = TRACE;
    let s = "b7ad6b7169203331";
    fn with(f: impl FnOnce(&mut SpanFrame<'static>)) -> SpanFrame<'static> {
        let mut span = good(TRACE, "b7ad6b7169203331");
        f(&mut span);
        span
    }
    let deep: &'static [u8] =
        Box::leak(format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_boxed_str())
            .as_bytes();
    let deep_obj: &'static [u8] = Box::leak(
        format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(100_000)).into_boxed_str(),
    )
    .as_bytes();
    let merges_deep: &'static [u8] = Box::leak(
        format!(r#"{{"a":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000)).into_boxed_str(),
    )
    .as_bytes();
    let mut v: Vec<(&'static str, SpanFrame<'static>, Stage, &'static str)> = vec![
        (
            "td.inputValue invalid UTF-8",
            with(|f| f.attrs[0].1 = AttrValue::Str(b"{\"a\":\"\xff\xfe\"}")),
            Stage::Input,
            "td.inputValue: invalid UTF-8",
        ),
        (
            "td.outputValue invalid UTF-8 (overlong encoding)",
            with(|f| f.attrs[1].1 = AttrValue::Str(b"[\"\xc0\xaf\"]")),
            Stage::Output,
            "td.outputValue: invalid UTF-8",
        ),
        (
            "td.metadata invalid UTF-8",
            with(|f| {
                f.attrs
                    .push(("td.metadata", AttrValue::Str(b"{\"a\":\"\xed\xa0\x80\"}")))
            }),
            Stage::Attributes,
            "td.metadata: invalid UTF-8",
        ),
        (
            "td.inputSchemaMerges invalid UTF-8",
            with(|f| {
                f.attrs
                    .push(("td.inputSchemaMerges", AttrValue::Str(b"{\"\xff\":{}}")))
            }),
            Stage::Input,
            "td.inputSchemaMerges: invalid JSON",
        ),
        (
            "td.inputValue 100k-deep arrays",
            with(|f| f.attrs[0].1 = AttrValue::Str(deep)),
            Stage::Input,
            "td.inputValue: nested deeper than 128 levels",
        ),
        (
            "td.outputValue 100k-deep objects",
            with(|f| f.attrs[1].1 = AttrValue::Str(deep_obj)),
            Stage::Output,
            "td.outputValue: nested deeper than 128 levels",
        ),
        (
            "td.metadata 100k-deep",
            with(|f| f.attrs.push(("td.metadata", AttrValue::Str(deep)))),
            Stage::Attributes,
            "td.metadata: nested deeper than 128 levels",
        ),
        (
            "td.inputSchemaMerges 100k-deep",
            with(|f| {
                f.attrs
                    .push(("td.inputSchemaMerges", AttrValue::Str(merges_deep)))
            }),
            Stage::Input,
            "td.inputSchemaMerges: invalid JSON: recursion limit exceeded",
        ),
        (
            "td.inputValue given as JSON-typed (type 7)",
            with(|f| f.attrs[0].1 = AttrValue::Json(b"[1]")),
            Stage::Input,
            "td.inputValue: expected a JSON string attribute, got an array",
        ),
        (
            "td.inputValue ill-formed UTF-16 (type 8)",
            with(|f| f.attrs[0].1 = AttrValue::IllFormed("{\"a\":\"\u{fffd}\"}".as_bytes())),
            Stage::Input,
            "td.inputValue: string is not well-formed UTF-16",
        ),
        (
            "kind 5",
            with(|f| f.kind = 5),
            Stage::Validate,
            "kind: 5 is not an OpenTelemetry SpanKind",
        ),
        (
            "status 3",
            with(|f| f.status_code = 3),
            Stage::Validate,
            "status.code: 3 is not an OpenTelemetry status code",
        ),
        (
            "startTime NaN",
            with(|f| f.start.0 = f64::NAN),
            Stage::Validate,
            "startTime: [NaN, 5] is not a valid",
        ),
        (
            "startTime -1 s",
            with(|f| f.start.0 = -1.0),
            Stage::Validate,
            "startTime: [-1, 5]",
        ),
        (
            "startTime 1.5 s",
            with(|f| f.start.0 = 1.5),
            Stage::Validate,
            "startTime: [1.5, 5]",
        ),
        (
            "duration infinite",
            with(|f| f.duration.0 = f64::INFINITY),
            Stage::Validate,
            "duration: [inf, 1000]",
        ),
        (
            "duration nanos ≥ 1e9",
            with(|f| f.duration.1 = 1_000_000_000),
            Stage::Validate,
            "duration: [0, 1000000000]",
        ),
        (
            "td.packageType 1.5",
            with(|f| f.attrs.push(("td.packageType", AttrValue::Num(1.5)))),
            Stage::Attributes,
            "td.packageType: expected a PackageType enum number, got 1.5",
        ),
        (
            "td.packageType NaN",
            with(|f| f.attrs.push(("td.packageType", AttrValue::Num(f64::NAN)))),
            Stage::Attributes,
            "td.packageType: expected a PackageType enum number, got NaN",
        ),
        (
            "td.submodule a boolean array",
            with(|f| {
                f.attrs
                    .push(("td.submodule", AttrValue::BoolArray(vec![true])))
            }),
            Stage::Attributes,
            "td.submodule: expected a string, got an array",
        ),
    ];
    // Ids: non-hex, wrong length, path-like, upper-case, all-zero.
    let bad_traces: [&'static str; 9] = [
        "../../../../../../../../etc/pwd0",
        "/tmp/0af7651916cd43dd8448eb211c8",
        "..\\..\\0af7651916cd43dd8448eb211c",
        "0af7651916cd43dd\08448eb211c80319",
        "0AF7651916CD43DD8448EB211C80319C",
        "0af7651916cd43dd8448eb211c80319",
        "0af7651916cd43dd8448eb211c80319c0",
        "g0f7651916cd43dd8448eb211c80319c",
        "00000000000000000000000000000000",
    ];
    for id in bad_traces {
        v.push((
            "bad traceId",
            good(id, s),
            Stage::Validate,
            "traceId: expected 32 lower-case hex characters",
        ));
    }
    for id in [
        "B7AD6B7169203331",
        "b7ad6b716920333",
        "0000000000000000",
        "b7ad6b71692033310000",
    ] {
        v.push((
            "bad spanId",
            good(t, id),
            Stage::Validate,
            "spanId: expected 16 lower-case hex characters",
        ));
    }
    v.push((
        "bad parentSpanId",
        with(|f| f.parent_span_id = "../x"),
        Stage::Validate,
        "parentSpanId: expected empty or 16 lower-case hex characters",
    ));
    let long: &'static str = Box::leak("a".repeat(100_000).into_boxed_str());
    v.push((
        "100 kB traceId",
        good(long, s),
        Stage::Validate,
        "traceId: expected 32 lower-case hex characters, got \"aaaa",
    ));
    v
}

/// Each bad span in one batch with good spans around it fails alone, with an error naming the
/// field; every good span is written; nothing is written outside the directory.
#[test]
fn corpus_of_bad_frames_each_fails_alone_naming_the_field() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("rec");
    let e = Exporter::new(ExporterConfig {
        directory: Some(dir.clone()),
        ..ExporterConfig::default()
    })
    .unwrap();

    let good_ids: Vec<String> = (0..200).map(span_id).collect();
    let good_traces: Vec<String> = (0..200).map(trace_id).collect();
    let cases = frame_cases();
    let bytes = byte_cases();
    let mut w = BatchWriter::new();
    let mut expected = Vec::new(); // (batch index, name, stage, message prefix)
    let mut g = 0;
    let mut push_good = |w: &mut BatchWriter| {
        w.push(&good(&good_traces[g], &good_ids[g]));
        g += 1;
    };
    for (name, span, stage, msg) in &cases {
        push_good(&mut w);
        expected.push((w.len(), *name, *stage, *msg));
        w.push(span);
    }
    let base = body(&good(TRACE, "b7ad6b7169203331"));
    for (name, mutate, stage, msg) in &bytes {
        push_good(&mut w);
        let mut b = base.clone();
        mutate(&mut b);
        expected.push((w.len(), *name, *stage, *msg));
        w.push_raw(&b);
    }
    push_good(&mut w);
    let goods = g;
    let r = e.export(&w.finish()).unwrap();

    let mut problems = Vec::new();
    for (index, name, stage, msg) in &expected {
        let errs: Vec<_> = r.errors.iter().filter(|x| x.index == *index).collect();
        match errs.as_slice() {
            [err] if err.stage == *stage && err.message.contains(msg) && !err.dropped => {}
            other => problems.push(format!(
                "{name}: expected [{}] containing {msg:?}, got {other:?}",
                stage.name()
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(
        r.errors.len(),
        expected.len(),
        "only the bad spans have errors"
    );
    assert_eq!(r.written as usize, goods, "every good span is written");
    assert_eq!(lines(&dir).len(), goods);
    // Nothing outside the recordings directory, and only trace files inside it.
    for p in files_under(root.path()) {
        if p == dir {
            continue;
        }
        assert_eq!(p.parent(), Some(dir.as_path()), "{p:?}");
        let name = p.file_name().unwrap().to_str().unwrap();
        assert!(
            name.contains("_trace_") && name.ends_with(".jsonl"),
            "{name}"
        );
    }
    let s = e.stats();
    assert_eq!(
        s.spans_received,
        s.spans_written + s.spans_failed + s.spans_dropped
    );
}

/// Strings that are not JSON are taken as they are; invalid UTF-8 in them (only possible from
/// Rust) becomes U+FFFD, like `Buffer.toString()` in JS, instead of failing the span.
#[test]
fn invalid_utf8_in_plain_string_attributes_is_replaced_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let e = Exporter::new(ExporterConfig {
        directory: Some(dir.path().into()),
        ..ExporterConfig::default()
    })
    .unwrap();
    let mut span = good(TRACE, "b7ad6b7169203331");
    span.attrs.push(("td.name", AttrValue::Str(b"q\xffx")));
    let mut w = BatchWriter::new();
    w.push(&span);
    let r = e.export(&w.finish()).unwrap();
    assert_eq!(r.written, 1, "{:?}", r.errors);
    assert_eq!(lines(dir.path())[0]["name"], "q\u{fffd}x");
}

// ---------------------------------------------------------------------------------------------
// Files

/// The sink re-checks the trace id itself (defence in depth behind `validate`): a record whose
/// trace id would form a path is refused and nothing is created anywhere.
#[test]
fn the_file_sink_refuses_trace_ids_that_would_form_a_path() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("rec");
    let sink = FsSink::new(&dir, Format::Jsonl).unwrap();
    let long = "0".repeat(10_000);
    let hostile = [
        "../escaped",
        "../../../../../../../../../../tmp/x",
        "/etc/offloop-x",
        "..\\..\\x",
        "a\0b",
        "0af7651916cd43dd8448eb211c80319c/../../x",
        "../0af7651916cd43dd8448eb211c8031",
        long.as_str(),
        "",
    ];
    let records: Vec<SpanRecord> = hostile
        .iter()
        .map(|t| SpanRecord {
            trace_id: t.to_string(),
            span_id: "b7ad6b7169203331".into(),
            proto: Vec::new(),
            jsonl: b"{}".to_vec(),
        })
        .collect();
    let refs: Vec<&SpanRecord> = records.iter().collect();
    let failed = sink.write(&refs);
    assert_eq!(failed.len(), hostile.len(), "{failed:?}");
    assert!(failed
        .iter()
        .all(|(_, m)| m.starts_with("refusing trace id")));
    assert_eq!(files_under(root.path()), vec![dir.clone()]);
}

/// Many workers appending batches of the same trace to one file at once: every line is whole.
#[test]
fn concurrent_appends_to_one_trace_file_keep_every_line_whole() {
    let dir = tempfile::tempdir().unwrap();
    let e = Arc::new(
        Exporter::new(ExporterConfig {
            directory: Some(dir.path().into()),
            ..ExporterConfig::default()
        })
        .unwrap(),
    );
    // ~60 kB lines, so one append is many pages.
    let big = format!(r#"{{"rows":["{}"]}}"#, "x".repeat(60_000));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (e, big) = (e.clone(), big.clone());
            std::thread::spawn(move || {
                for b in 0..10 {
                    let ids: Vec<String> =
                        (0..10).map(|i| span_id(t * 1000 + b * 10 + i)).collect();
                    let mut w = BatchWriter::new();
                    for id in &ids {
                        let mut s = good(TRACE, id);
                        s.attrs[1].1 = AttrValue::Str(big.as_bytes());
                        w.push(&s);
                    }
                    let r = e.export(&w.finish()).unwrap();
                    assert_eq!(r.written, 10, "{:?}", r.errors);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let all = lines(dir.path());
    assert_eq!(all.len(), 400);
    assert_eq!(files_under(dir.path()).len(), 1, "one file for the trace");
    let mut ids: Vec<&str> = all.iter().map(|l| l["spanId"].as_str().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 400, "each span exactly once");
}

// ---------------------------------------------------------------------------------------------
// Shutdown

/// A processor fed from another thread and shut down at a random moment: every span whose
/// `enqueue` returned Ok is in the files exactly once, every refused span is absent, and the
/// counters balance with nothing in flight. Repeated with random timings.
#[test]
fn processor_shutdown_at_random_points_loses_nothing_it_accepted() {
    let mut rng = Rng::from_env("processor_shutdown_at_random_points");
    let runs = 100;
    let mut total_accepted = 0;
    for run in 0..runs {
        let dir = tempfile::tempdir().unwrap();
        let e = Arc::new(
            Exporter::new(ExporterConfig {
                directory: Some(dir.path().into()),
                ..ExporterConfig::default()
            })
            .unwrap(),
        );
        let he = e.clone();
        let p = Processor::new(
            e.clone(),
            ProcessorConfig {
                scheduled_delay: Duration::from_micros(200 + rng.below(3000)),
                max_export_batch_size: 1 + rng.below(64) as usize,
            },
            Dispatcher::new(1 + rng.below(2) as usize, std_threads()),
            Arc::new(move |ticket, frames: Vec<Vec<u8>>| {
                let r = he.process_spans(&frames);
                he.complete(ticket, &r);
            }),
        );
        let handle = p.handle();
        let outcome: Arc<Mutex<HashMap<String, bool>>> = Arc::default();
        let producer = {
            let (handle, outcome) = (handle.clone(), outcome.clone());
            let traces = 1 + rng.below(8) as usize;
            std::thread::spawn(move || {
                for i in 0..1_500 {
                    let id = span_id(run * 100_000 + i);
                    let trace = trace_id(run * 100 + i % traces);
                    let ok = handle.enqueue(&body(&good(&trace, &id))).is_ok();
                    outcome.lock().unwrap().insert(id, ok);
                    if !ok {
                        break;
                    }
                    if i % 50 == 0 {
                        std::thread::yield_now();
                    }
                }
            })
        };
        std::thread::sleep(Duration::from_micros(rng.below(4000)));
        if rng.below(3) == 0 {
            assert!(p.flush(Some(Duration::from_secs(30))));
        }
        assert!(p.shutdown(Some(Duration::from_secs(30))), "run {run}");
        producer.join().unwrap();

        let outcome = outcome.lock().unwrap();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for l in lines(dir.path()) {
            *seen
                .entry(l["spanId"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        for (id, ok) in outcome.iter() {
            let n = seen.get(id).copied().unwrap_or(0);
            assert_eq!(
                n, *ok as usize,
                "run {run}: span {id} accepted={ok} written {n}×"
            );
        }
        assert_eq!(seen.len(), outcome.values().filter(|ok| **ok).count());
        total_accepted += seen.len();
        let s = e.stats();
        assert_eq!(s.spans_in_flight, 0, "run {run}");
        assert_eq!(s.spans_received as usize, outcome.len());
        assert_eq!(s.spans_written as usize, seen.len());
        assert_eq!(
            s.spans_received,
            s.spans_written + s.spans_failed + s.spans_dropped
        );
    }
    eprintln!("{runs} runs, {total_accepted} spans accepted, 0 lost");
}
