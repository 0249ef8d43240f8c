//! End-to-end: frames in, files and protobuf out, through the public API only.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use serde_json::{json, Value};
use tusk_drift_schemas::tusk::drift::backend::v1::ExportSpansRequest;
use tusk_drift_schemas::tusk::drift::core::v1::Span;

use offloop::dispatch::{std_threads, Dispatcher};
use offloop::frame::{AttrValue, BatchWriter, SpanFrame};
use offloop::sink::request::RequestHeader;
use offloop::{Exporter, ExporterConfig, Format, HashAlgorithm, Processor, ProcessorConfig, Stage};

fn trace_id(n: usize) -> String {
    format!("{:032x}", n + 1)
}
fn span_id(n: usize) -> String {
    format!("{:016x}", n + 1)
}

struct Owned {
    trace: String,
    span: String,
    input: String,
    output: String,
    kind: u8,
    status: u8,
}

fn pg_span(i: usize, rows: usize) -> Owned {
    let rows: Vec<Value> = (0..rows)
        .map(|r| json!({"id": r, "name": format!("user-{r}"), "score": r as f64 / 3.0, "active": r % 2 == 0, "tags": ["a", "b"], "note": null}))
        .collect();
    Owned {
        trace: trace_id(i / 20),
        span: span_id(i),
        input: json!({"text": "SELECT * FROM users WHERE id > $1", "values": [i]}).to_string(),
        output: json!({"rowCount": rows.len(), "rows": rows}).to_string(),
        kind: 2,
        status: 1,
    }
}

fn frame(o: &Owned) -> SpanFrame<'_> {
    SpanFrame {
        trace_id: &o.trace,
        span_id: &o.span,
        parent_span_id: "",
        kind: o.kind,
        status_code: o.status,
        start: (1_700_000_000.0, 123),
        duration: (0.0, 5_000_000),
        name: "pg.query",
        status_message: "",
        scope_name: "tusk-drift-sdk",
        attrs: vec![
            ("td.inputValue", AttrValue::Str(o.input.as_bytes())),
            ("td.outputValue", AttrValue::Str(o.output.as_bytes())),
            (
                "td.inputSchemaMerges",
                AttrValue::Str(br#"{"values":{"matchImportance":0}}"#),
            ),
            ("td.packageName", AttrValue::Str(b"pg")),
            ("td.packageType", AttrValue::Num(4.0)),
            ("td.submodule", AttrValue::Str(b"query")),
            ("td.metadata", AttrValue::Str(br#"{"pool":"main"}"#)),
        ],
    }
}

fn batch(spans: &[Owned]) -> Vec<u8> {
    let mut w = BatchWriter::new();
    spans.iter().for_each(|s| w.push(&frame(s)));
    w.finish()
}

fn exporter(dir: &Path, format: Format, hash: HashAlgorithm) -> Exporter {
    Exporter::new(ExporterConfig {
        directory: Some(dir.to_path_buf()),
        format,
        hash,
        environment: Some("test".into()),
        request: Some(RequestHeader {
            observable_service_id: "svc".into(),
            ..Default::default()
        }),
        ..ExporterConfig::default()
    })
    .unwrap()
}

fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn jsonl_lines(dir: &Path) -> Vec<Value> {
    files(dir)
        .iter()
        .flat_map(|p| {
            fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn proto_spans(dir: &Path) -> Vec<Span> {
    let mut out = Vec::new();
    for p in files(dir) {
        let bytes = fs::read(p).unwrap();
        let mut buf = &bytes[..];
        while !buf.is_empty() {
            out.push(Span::decode_length_delimited(&mut buf).unwrap());
        }
    }
    out
}

fn struct_to_json(s: &prost_types::Struct) -> Value {
    Value::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), value_to_json(v)))
            .collect(),
    )
}

fn value_to_json(v: &prost_types::Value) -> Value {
    use prost_types::value::Kind;
    match v.kind.as_ref().unwrap() {
        Kind::NullValue(_) => Value::Null,
        Kind::NumberValue(n) => json!(n),
        Kind::StringValue(s) => json!(s),
        Kind::BoolValue(b) => json!(b),
        Kind::StructValue(s) => struct_to_json(s),
        Kind::ListValue(l) => Value::Array(l.values.iter().map(value_to_json).collect()),
    }
}

/// Integers become f64 in a Struct; compare numbers as f64.
fn normalize_numbers(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.iter().map(normalize_numbers).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), normalize_numbers(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[test]
fn records_512_spans_as_jsonl_and_proto() {
    let spans: Vec<Owned> = (0..512).map(|i| pg_span(i, 20)).collect();
    let bytes = batch(&spans);

    let jdir = tempfile::tempdir().unwrap();
    let e = exporter(jdir.path(), Format::Jsonl, HashAlgorithm::Blake3);
    let r = e.export(&bytes).unwrap();
    assert_eq!(
        (r.spans, r.written, r.failed, r.dropped),
        (512, 512, 0, 0),
        "{:?}",
        r.errors
    );
    let lines = jsonl_lines(jdir.path());
    assert_eq!(lines.len(), 512);
    assert_eq!(files(jdir.path()).len(), 512_usize.div_ceil(20));
    for f in files(jdir.path()) {
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            name.contains("_trace_") && name.ends_with(".jsonl"),
            "{name}"
        );
    }
    let first = &lines[0];
    assert_eq!(first["spanId"], json!(span_id(0)));
    assert_eq!(first["kind"], json!(3), "proto kind is OTel kind + 1");
    assert_eq!(first["packageType"], json!(4));
    assert_eq!(first["environment"], json!("test"));
    assert_eq!(
        first["inputValue"],
        serde_json::from_str::<Value>(&spans[0].input).unwrap()
    );
    assert_eq!(
        first["inputSchema"]["properties"]["values"]["matchImportance"],
        json!(0)
    );
    assert_eq!(first["metadata"], json!({"pool": "main"}));

    // Proto: decoded by prost's generated decoder, not by our encoder.
    let pdir = tempfile::tempdir().unwrap();
    let e2 = exporter(pdir.path(), Format::Proto, HashAlgorithm::Blake3);
    let r2 = e2.export(&bytes).unwrap();
    assert_eq!(r2.written, 512);
    let decoded = proto_spans(pdir.path());
    assert_eq!(decoded.len(), 512);
    for (span, line) in decoded.iter().zip(lines.iter()) {
        assert_eq!(span.span_id, line["spanId"].as_str().unwrap());
        assert_eq!(
            span.input_value_hash,
            line["inputValueHash"].as_str().unwrap()
        );
        assert_eq!(
            span.output_schema_hash,
            line["outputSchemaHash"].as_str().unwrap()
        );
        assert_eq!(span.kind, 3);
        assert_eq!(
            struct_to_json(span.input_value.as_ref().unwrap()),
            normalize_numbers(&line["inputValue"])
        );
        assert_eq!(
            struct_to_json(span.output_value.as_ref().unwrap()),
            normalize_numbers(&line["outputValue"])
        );
        assert_eq!(
            span.input_schema.as_ref().unwrap().properties["values"].match_importance,
            Some(0.0)
        );
    }

    // The ExportSpansRequest decodes too.
    let req = ExportSpansRequest::decode(r2.request.as_deref().unwrap()).unwrap();
    assert_eq!(req.observable_service_id, "svc");
    assert_eq!(req.spans.len(), 512);
    assert_eq!(req.spans[7], decoded[7]);

    let s = e.stats();
    assert_eq!(s.spans_received, 512);
    assert_eq!(s.spans_written, 512);
    assert_eq!(s.spans_in_flight, 0);
}

#[test]
fn hashes_are_stable_across_runs() {
    let spans: Vec<Owned> = (0..40).map(|i| pg_span(i, 5)).collect();
    let bytes = batch(&spans);
    let mut runs = Vec::new();
    for hash in [
        HashAlgorithm::Blake3,
        HashAlgorithm::Blake3,
        HashAlgorithm::Sha256,
        HashAlgorithm::Sha256,
    ] {
        let dir = tempfile::tempdir().unwrap();
        exporter(dir.path(), Format::Jsonl, hash)
            .export(&bytes)
            .unwrap();
        let hashes: Vec<String> = jsonl_lines(dir.path())
            .iter()
            .map(|l| {
                format!(
                    "{}{}{}{}",
                    l["inputValueHash"],
                    l["inputSchemaHash"],
                    l["outputValueHash"],
                    l["outputSchemaHash"]
                )
            })
            .collect();
        runs.push(hashes);
    }
    assert_eq!(runs[0], runs[1]);
    assert_eq!(runs[2], runs[3]);
    assert_ne!(runs[0], runs[2]);
}

#[test]
fn bad_spans_fail_alone_with_named_errors() {
    let mut spans: Vec<Owned> = (0..10).map(|i| pg_span(i, 2)).collect();
    // One trace per span: the oversized span blocks only its own trace.
    spans
        .iter_mut()
        .enumerate()
        .for_each(|(i, s)| s.trace = trace_id(i));
    spans[1].input = "{\"a\":".into();
    spans[2].output = "[1,2".into();
    spans[3].trace = "../../../../etc/passwd-000000000".into();
    spans[4].span = "zz".into();
    spans[5].kind = 9;
    spans[6].output = "x".repeat(2 * 1024 * 1024);
    let mut w = BatchWriter::new();
    for (i, s) in spans.iter().enumerate() {
        let mut f = frame(s);
        if i == 7 {
            f.attrs[0] = ("td.inputValue", AttrValue::Str(b"{\"a\":\"\xff\"}"));
        }
        if i == 8 {
            f.attrs[2] = (
                "td.inputSchemaMerges",
                AttrValue::Str(br#"{"values":"oops"}"#),
            );
        }
        w.push(&f);
    }
    w.push_raw(b"\x01\x02");
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), Format::Jsonl, HashAlgorithm::Blake3);
    let r = e.export(&w.finish()).unwrap();
    assert_eq!(r.spans, 11);
    assert_eq!(r.written, 2, "{:#?}", r.errors);
    let by_index = |i: u32| {
        r.errors
            .iter()
            .find(|e| e.index == i)
            .unwrap_or_else(|| panic!("no error for {i}"))
    };
    assert!(
        by_index(1)
            .message
            .starts_with("td.inputValue: invalid JSON"),
        "{}",
        by_index(1).message
    );
    assert_eq!(by_index(1).stage, Stage::Input);
    assert!(by_index(2)
        .message
        .starts_with("td.outputValue: invalid JSON"));
    assert!(
        by_index(3)
            .message
            .starts_with("traceId: expected 32 lower-case hex"),
        "{}",
        by_index(3).message
    );
    assert!(by_index(4).message.starts_with("spanId"));
    assert!(by_index(5).message.starts_with("kind: 9"));
    assert!(by_index(6).dropped && by_index(6).stage == Stage::Filter);
    assert!(by_index(6).message.contains("maxSpanBytes"));
    assert!(
        by_index(7).message.contains("UTF-8"),
        "{}",
        by_index(7).message
    );
    assert!(
        by_index(8)
            .message
            .starts_with("td.inputSchemaMerges: values: expected an object"),
        "{}",
        by_index(8).message
    );
    assert_eq!(by_index(10).stage, Stage::Frame);
    assert_eq!(jsonl_lines(dir.path()).len(), 2);
    // Nothing was written outside the directory.
    assert!(files(dir.path())
        .iter()
        .all(|p| p.parent() == Some(dir.path())));
    let s = e.stats();
    assert_eq!(
        s.spans_received,
        s.spans_written + s.spans_dropped + s.spans_failed
    );
    assert_eq!((s.spans_dropped, s.spans_failed), (1, 8));
}

#[test]
fn errored_server_span_blocks_its_trace() {
    let mut spans: Vec<Owned> = (0..3).map(|i| pg_span(i, 1)).collect();
    spans[0].kind = 1;
    spans[0].status = 2;
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), Format::Jsonl, HashAlgorithm::Blake3);
    let r = e.export(&batch(&spans)).unwrap();
    assert_eq!((r.written, r.dropped), (0, 3), "same trace: all dropped");
    assert!(r.errors[0]
        .message
        .contains("SERVER span with ERROR status"));
    assert!(r.errors[1].message.contains("trace is blocked"));
    // A later batch of the same trace is dropped too; another trace is not.
    let mut later = vec![pg_span(5, 1), pg_span(40, 1)];
    later[0].trace = spans[0].trace.clone();
    let r = e.export(&batch(&later)).unwrap();
    assert_eq!((r.written, r.dropped), (1, 1));
}

#[test]
fn sink_errors_fail_spans_without_panicking() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("rec");
    let e = exporter(&dir, Format::Jsonl, HashAlgorithm::Blake3);
    fs::remove_dir(&dir).unwrap();
    fs::write(&dir, b"not a directory").unwrap();
    let r = e.export(&batch(&[pg_span(0, 1), pg_span(1, 1)])).unwrap();
    assert_eq!((r.written, r.failed), (0, 2));
    assert!(r
        .errors
        .iter()
        .all(|e| e.stage == Stage::Sink && e.message.contains("cannot open")));
    let s = e.stats();
    assert_eq!(s.spans_failed, 2);
}

#[test]
fn flush_waits_for_accepted_batches_and_queue_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let e = Exporter::new(ExporterConfig {
        directory: Some(dir.path().into()),
        max_queue_bytes: 1000,
        ..ExporterConfig::default()
    })
    .unwrap();
    let t1 = e.accept(3, 800).unwrap();
    let refused = e.accept(2, 800).unwrap_err();
    assert!(refused.to_string().contains("queue full"));
    assert!(
        !e.flush(Some(Duration::from_millis(20))),
        "t1 is not complete"
    );
    let s = e.stats();
    assert_eq!(
        (
            s.spans_received,
            s.spans_dropped,
            s.spans_in_flight,
            s.bytes_queued
        ),
        (5, 2, 3, 800)
    );
    let r = e.process(&batch(&[pg_span(0, 1), pg_span(1, 1), pg_span(2, 1)]));
    e.complete(t1, &r);
    assert!(e.flush(Some(Duration::from_secs(1))));
    e.close();
    assert_eq!(e.accept(1, 10).unwrap_err(), offloop::Rejected::Shutdown);
    let s = e.stats();
    assert_eq!(
        s.spans_received,
        s.spans_written + s.spans_dropped + s.spans_failed + s.spans_in_flight
    );
    assert_eq!((s.spans_written, s.spans_failed), (3, 1));
}

#[test]
fn processor_batches_natively_and_flushes_everything() {
    let dir = tempfile::tempdir().unwrap();
    let e = Arc::new(exporter(dir.path(), Format::Jsonl, HashAlgorithm::Blake3));
    let handler_exporter = Arc::clone(&e);
    let p = Processor::new(
        Arc::clone(&e),
        ProcessorConfig {
            scheduled_delay: Duration::from_secs(3600),
            max_export_batch_size: 256,
        },
        Dispatcher::new(2, std_threads()),
        Arc::new(move |ticket, frames: Vec<Vec<u8>>| {
            let r = handler_exporter.process_spans(&frames);
            handler_exporter.complete(ticket, &r);
        }),
    );
    let spans: Vec<Owned> = (0..1000).map(|i| pg_span(i, 1)).collect();
    for s in &spans {
        let mut w = BatchWriter::new();
        w.push(&frame(s));
        let b = w.finish();
        // The body after "OFL1", count and the length prefix.
        p.enqueue(&b[12..]).unwrap();
    }
    assert!(p.flush(Some(Duration::from_secs(30))));
    let s = e.stats();
    assert_eq!(
        (s.spans_received, s.spans_written, s.spans_in_flight),
        (1000, 1000, 0)
    );
    assert_eq!(s.batches, 4, "3 full batches of 256 + the flushed rest");
    assert!(p.shutdown(Some(Duration::from_secs(5))));
    assert!(p.enqueue(b"x").is_err());
    assert_eq!(e.stats().spans_failed, 1);
    assert_eq!(jsonl_lines(dir.path()).len(), 1000);
}

#[test]
fn segments_keep_order_and_bogus_counts_are_bounded() {
    let spans: Vec<Owned> = (0..5).map(|i| pg_span(i, 1)).collect();
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(dir.path(), Format::Jsonl, HashAlgorithm::Blake3);
    let r = e.process_segments(&[batch(&spans[..3]), batch(&spans[3..])]);
    assert_eq!((r.spans, r.written), (5, 5));
    let ids: Vec<String> = jsonl_lines(dir.path())
        .iter()
        .map(|l| l["spanId"].as_str().unwrap().to_string())
        .collect();
    let mut expected: Vec<String> = (0..5).map(span_id).collect();
    expected.sort();
    let mut got = ids.clone();
    got.sort();
    assert_eq!(got, expected);

    // A header claiming u32::MAX spans with one real frame: one error entry, counts saturate.
    let mut bogus = batch(&spans[..1]);
    bogus[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    let r = e.process_segments(&[bogus, batch(&spans[1..2])]);
    assert_eq!(r.spans, u32::MAX);
    assert!(r.errors.len() <= 2, "{:?}", r.errors);
    assert!(r.errors.iter().any(|e| e.message.contains("cut short")));
    // Garbage that is not a batch at all.
    let r = e.process(b"garbage");
    assert_eq!((r.spans, r.failed), (1, 1));
    assert!(r.errors[0].message.contains("not an offloop batch"));
}

/// The spans of a batch are spread over a thread pool: files, order, errors and counters must
/// be exactly those of a single thread. (Protobuf output is compared decoded: prost encodes
/// the schema's `properties` map in hash order, which differs between any two encodings.)
#[test]
fn thread_count_changes_nothing_but_speed() {
    let mut spans: Vec<Owned> = (0..300).map(|i| pg_span(i, 3 + i % 7)).collect();
    spans[17].input = "{\"a\":".into();
    spans[101].kind = 9;
    spans[250].output = "[1,2".into();
    let input = batch(&spans);
    let run = |threads: usize, format: Format| {
        let dir = tempfile::tempdir().unwrap();
        let e = Exporter::new(ExporterConfig {
            directory: Some(dir.path().to_path_buf()),
            format,
            request: Some(RequestHeader::default()),
            threads,
            ..ExporterConfig::default()
        })
        .unwrap();
        let r = e.export(&input).unwrap();
        let errors: Vec<(u32, String)> = r
            .errors
            .iter()
            .map(|e| (e.index, e.message.clone()))
            .collect();
        let request = ExportSpansRequest::decode(r.request.as_deref().unwrap()).unwrap();
        // File names start with their creation time: key them by what follows it.
        let mut jsonl: Vec<(String, Vec<u8>)> = Vec::new();
        if format == Format::Jsonl {
            for p in files(dir.path()) {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                jsonl.push((
                    name[name.find("_trace_").unwrap()..].into(),
                    fs::read(p).unwrap(),
                ));
            }
            jsonl.sort();
        }
        let mut proto = if format == Format::Proto {
            proto_spans(dir.path())
        } else {
            Vec::new()
        };
        proto.sort_by(|a, b| (&a.trace_id, &a.span_id).cmp(&(&b.trace_id, &b.span_id)));
        (
            r.written, r.failed, errors, r.recorded, request, jsonl, proto,
        )
    };
    for format in [Format::Jsonl, Format::Proto] {
        let one = run(1, format);
        assert_eq!(one.0, 297);
        let failed: Vec<u32> = one.2.iter().map(|e| e.0).collect();
        assert_eq!(failed, vec![17, 101, 250]);
        assert_eq!(one.4.spans.len(), 297);
        assert!(format == Format::Proto || one.5.iter().map(|f| f.1.len()).sum::<usize>() > 0);
        assert!(format == Format::Jsonl || one.6.len() == 297);
        for threads in [2, 4] {
            assert!(run(threads, format) == one, "{threads} threads, {format:?}");
        }
    }
}
