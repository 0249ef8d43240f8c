//! Replay end to end: recordings written by the real exporter (or by hand in the Tusk layout),
//! loaded, and every level of the matching cascade exercised through the public API.

use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use offloop::frame::{AttrValue, BatchWriter, SpanFrame};
use offloop::replay::{Levels, LoadOptions, MatchScope, MatchType, MockRequest, Recording};
use offloop::{hash_payload, Exporter, ExporterConfig, Format, HashAlgorithm};

const ALGOS: [HashAlgorithm; 2] = [HashAlgorithm::Blake3, HashAlgorithm::Sha256];

/// One recorded call: its td.* attributes.
struct Call {
    trace: String,
    span: String,
    package: &'static str,
    name: String,
    input: String,
    merges: Option<&'static str>,
    output: String,
    pre_app_start: bool,
}

fn trace_id(n: usize) -> String {
    format!("{:032x}", 0xabc000 + n)
}

fn span_id(n: usize) -> String {
    format!("{:016x}", 0x5000 + n)
}

const PG_MERGES: &str = r#"{"values":{"matchImportance":0}}"#;
const HTTP_MERGES: &str =
    r#"{"body":{"encoding":1,"decodedType":1},"headers":{"matchImportance":0}}"#;

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A mix of pg queries, HTTP calls with base64 JSON bodies and odd generic payloads.
fn calls(n: usize) -> Vec<Call> {
    (0..n)
        .map(|i| {
            let (package, input, merges) = match i % 3 {
                0 => (
                    "pg",
                    json!({"text": format!("SELECT * FROM t{} WHERE id = $1", i % 7), "values": [i, "x"], "clientType": "pool"})
                        .to_string(),
                    Some(PG_MERGES),
                ),
                1 => (
                    "http",
                    json!({
                        "method": "POST",
                        "url": format!("http://api.test/v1/items/{i}?q=1"),
                        "headers": {"content-type": "application/json", "x-req": i},
                        "body": b64(&json!({"n": i, "name": "ünï 名前", "deep": [[{"z": null}]]}).to_string()),
                    })
                    .to_string(),
                    Some(HTTP_MERGES),
                ),
                _ => (
                    "custom",
                    json!({"10": i, "9": [0.000001, 1e21, -0.0, 2e19_f64], "s": "\u{2028}\u{1F600}\"", "__proto__": 1})
                        .to_string(),
                    None,
                ),
            };
            Call {
                trace: trace_id(i / 10),
                span: span_id(i),
                package,
                name: format!("{package} call {i}"),
                input,
                merges,
                // Not sorted: the proto path must keep the recorded key order.
                output: format!(r#"{{"rows":[{{"b":{i},"a":"first"}}],"i":{i}}}"#),
                pre_app_start: i % 10 == 9,
            }
        })
        .collect()
}

fn record(dir: &Path, calls: &[Call], format: Format, hash: HashAlgorithm) {
    let e = Exporter::new(ExporterConfig {
        directory: Some(dir.to_path_buf()),
        format,
        hash,
        ..ExporterConfig::default()
    })
    .unwrap();
    let mut w = BatchWriter::new();
    for (i, c) in calls.iter().enumerate() {
        let mut attrs = vec![
            ("td.inputValue", AttrValue::Str(c.input.as_bytes())),
            ("td.outputValue", AttrValue::Str(c.output.as_bytes())),
            ("td.packageName", AttrValue::Str(c.package.as_bytes())),
            ("td.name", AttrValue::Str(c.name.as_bytes())),
            ("td.metadata", AttrValue::Str(br#"{"z":1,"a":2}"#)),
            ("td.isPreAppStart", AttrValue::Bool(c.pre_app_start)),
        ];
        if let Some(m) = c.merges {
            attrs.push(("td.inputSchemaMerges", AttrValue::Str(m.as_bytes())));
        }
        w.push(&SpanFrame {
            trace_id: &c.trace,
            span_id: &c.span,
            parent_span_id: "",
            kind: 2,
            status_code: 1,
            start: (1_700_000_000.0 + i as f64, 7),
            duration: (0.0, 1000),
            name: "n",
            status_message: "",
            scope_name: "tusk-drift-sdk",
            attrs,
        });
    }
    let r = e.export(&w.finish()).unwrap();
    assert_eq!(r.written as usize, calls.len(), "{:?}", r.errors);
}

fn request(c: &Call) -> MockRequest {
    MockRequest {
        trace_id: Some(c.trace.clone()),
        name: c.name.clone(),
        package_name: c.package.into(),
        input_value: c.input.clone(),
        input_schema_merges: c.merges.map(Into::into),
        is_pre_app_start: c.pre_app_start,
        ..MockRequest::default()
    }
}

fn open(dir: &Path, hash: HashAlgorithm) -> Recording {
    Recording::open(
        dir,
        &LoadOptions {
            hash,
            ..LoadOptions::default()
        },
    )
    .unwrap()
}

/// The request's schema hash as the exporter computes it.
fn schema_hash(rec: &Recording, r: &MockRequest, merges: &str) -> String {
    hash_payload(
        r.input_value.as_bytes(),
        Some(merges.as_bytes()),
        rec.hash_algorithm(),
    )
    .unwrap()
    .schema_hash
}

fn parse(s: &str) -> Value {
    serde_json::from_str(s).unwrap()
}

#[test]
fn record_then_replay_matches_every_call_by_value_hash() {
    let calls = calls(60);
    for format in [Format::Jsonl, Format::Proto] {
        for rec_hash in ALGOS {
            let dir = tempfile::tempdir().unwrap();
            record(dir.path(), &calls, format, rec_hash);
            // Replay with either digest: hashes are recomputed at load.
            for replay_hash in ALGOS {
                let rec = open(dir.path(), replay_hash);
                let st = rec.stats();
                assert_eq!((st.spans, st.skipped_lines, st.traces), (60, 0, 6));
                for c in &calls {
                    let out = rec.find_mock(&request(c), Levels::ValueHashes).unwrap();
                    let m = out.found.unwrap_or_else(|| panic!("{}", out.reason));
                    assert_eq!(
                        (m.priority, m.match_type, m.scope),
                        (1, MatchType::InputValueHash, MatchScope::Trace)
                    );
                    assert_eq!(m.span.span_id(), c.span);
                    assert_eq!(parse(m.span.output_value()), parse(&c.output), "{format:?}");
                    assert_eq!(parse(m.span.metadata().unwrap()), json!({"z":1,"a":2}));
                    if format == Format::Proto {
                        // Key order survives the protobuf Struct.
                        assert!(
                            m.span.output_value().starts_with(r#"{"rows":[{"b":"#),
                            "{}",
                            m.span.output_value()
                        );
                    }
                    if rec_hash == replay_hash {
                        assert_eq!(m.span.value_hash_hex(), m.span.stored_value_hash());
                        assert_eq!(m.span.schema_hash_hex(), m.span.stored_schema_hash());
                        assert_eq!(out.request.value, m.span.stored_value_hash());
                        // A value-level match does not walk the request's schema.
                        assert_eq!(out.request.schema, None);
                    }
                }
                let st = rec.stats();
                assert_eq!(st.matches_by_priority[1], 60);
                assert_eq!(st.matches_by_type[0], (MatchType::InputValueHash, 60));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hand-made Tusk-layout recordings for the cascade

struct Rec<'a> {
    trace: usize,
    span: usize,
    ts: i64,
    package: &'a str,
    input: Value,
    merges: Option<&'a str>,
    pre: bool,
}

fn tusk_line(r: &Rec<'_>) -> String {
    let input = r.input.to_string();
    let p = hash_payload(
        input.as_bytes(),
        r.merges.map(str::as_bytes),
        HashAlgorithm::Sha256,
    )
    .unwrap();
    json!({
        "traceId": trace_id(r.trace),
        "spanId": span_id(r.span),
        "parentSpanId": "",
        "name": format!("{} op", r.package),
        "packageName": r.package,
        "instrumentationName": "X",
        "submoduleName": "",
        "inputValue": r.input,
        "outputValue": {"answer": r.span},
        "inputSchema": parse(&p.schema.to_canonical_json()),
        "outputSchema": {"type": 6, "properties": {}},
        "inputSchemaHash": p.schema_hash,
        "outputSchemaHash": "",
        "inputValueHash": p.value_hash,
        "outputValueHash": "",
        "kind": 2,
        "status": {"code": 1, "message": ""},
        "isPreAppStart": r.pre,
        "timestamp": {"seconds": r.ts, "nanos": 0},
        "duration": {"seconds": 0, "nanos": 5},
        "isRootSpan": false,
    })
    .to_string()
}

fn write_tusk(dir: &Path, recs: &[Rec<'_>]) {
    for r in recs {
        let path = dir.join(format!(
            "2026-01-01T00-00-00-000Z_trace_{}.jsonl",
            trace_id(r.trace)
        ));
        let mut text = fs::read_to_string(&path).unwrap_or_default();
        text.push_str(&tusk_line(r));
        text.push('\n');
        fs::write(path, text).unwrap();
    }
}

fn req(
    trace: Option<usize>,
    package: &str,
    input: Value,
    merges: Option<&str>,
    pre: bool,
) -> MockRequest {
    MockRequest {
        trace_id: trace.map(trace_id),
        name: format!("{package} op"),
        package_name: package.into(),
        input_value: input.to_string(),
        input_schema_merges: merges.map(Into::into),
        is_pre_app_start: pre,
        ..MockRequest::default()
    }
}

fn pg(text: &str, values: Value) -> Value {
    json!({"text": text, "values": values})
}

fn http(method: &str, url: &str, headers: Value, body: &str) -> Value {
    json!({"method": method, "url": url, "headers": headers, "body": b64(body)})
}

/// Matches `r` and returns (priority, span number, reused).
fn hit(rec: &Recording, r: &MockRequest, levels: Levels) -> (u8, usize, bool) {
    let out = rec.find_mock(r, levels).unwrap();
    let m = out
        .found
        .unwrap_or_else(|| panic!("no match: {}", out.reason));
    (
        m.priority,
        usize::from_str_radix(m.span.span_id(), 16).unwrap() - 0x5000,
        m.reused,
    )
}

fn miss(rec: &Recording, r: &MockRequest, levels: Levels) -> String {
    let out = rec.find_mock(r, levels).unwrap();
    assert!(
        out.found.is_none(),
        "unexpected match: {:?}",
        out.found.map(|m| m.description)
    );
    out.reason
}

fn cascade_recording() -> (tempfile::TempDir, Recording) {
    let dir = tempfile::tempdir().unwrap();
    let h = |n: u32| json!({"content-type": "application/json", "x-n": n});
    write_tusk(
        dir.path(),
        &[
            // trace 1
            Rec {
                trace: 1,
                span: 1,
                ts: 10,
                package: "pg",
                input: pg("SELECT 1", json!([1])),
                merges: Some(PG_MERGES),
                pre: false,
            },
            Rec {
                trace: 1,
                span: 2,
                ts: 11,
                package: "pg",
                input: pg("SELECT 2", json!([1])),
                merges: Some(PG_MERGES),
                pre: false,
            },
            Rec {
                trace: 1,
                span: 3,
                ts: 12,
                package: "http",
                input: http(
                    "POST",
                    "http://a.test/users?id=1",
                    h(1),
                    r#"{"name":"ann","age":30}"#,
                ),
                merges: Some(HTTP_MERGES),
                pre: false,
            },
            Rec {
                trace: 1,
                span: 4,
                ts: 13,
                package: "http",
                input: http(
                    "POST",
                    "http://a.test/users?id=2",
                    h(1),
                    r#"{"name":"bob","age":41}"#,
                ),
                merges: Some(HTTP_MERGES),
                pre: false,
            },
            Rec {
                trace: 1,
                span: 5,
                ts: 14,
                package: "http",
                input: http(
                    "POST",
                    "http://a.test/orders?id=3",
                    h(1),
                    r#"{"name":"cid","age":52}"#,
                ),
                merges: Some(HTTP_MERGES),
                pre: false,
            },
            // trace 2
            Rec {
                trace: 2,
                span: 20,
                ts: 20,
                package: "pg",
                input: pg("SELECT 20", json!([2])),
                merges: Some(PG_MERGES),
                pre: false,
            },
            Rec {
                trace: 2,
                span: 21,
                ts: 21,
                package: "redis",
                input: json!({"command": "GET", "args": ["k"]}),
                merges: None,
                pre: true,
            },
            Rec {
                trace: 2,
                span: 22,
                ts: 22,
                package: "pg",
                input: pg("SELECT version()", json!([])),
                merges: Some(PG_MERGES),
                pre: true,
            },
            Rec {
                trace: 2,
                span: 23,
                ts: 23,
                package: "http",
                input: http("GET", "http://cfg.test/config?env=x", h(2), r#"{"v":1}"#),
                merges: Some(HTTP_MERGES),
                pre: true,
            },
        ],
    );
    let rec = open(dir.path(), HashAlgorithm::Blake3);
    assert_eq!(rec.stats().spans, 9);
    (dir, rec)
}

#[test]
fn p1_p2_value_hash_in_trace_unused_then_used() {
    let (_d, rec) = cascade_recording();
    let r = req(
        Some(1),
        "pg",
        pg("SELECT 1", json!([1])),
        Some(PG_MERGES),
        false,
    );
    assert_eq!(hit(&rec, &r, Levels::ValueHashes), (1, 1, false));
    assert_eq!(hit(&rec, &r, Levels::ValueHashes), (2, 1, true));
    // Merge keys in Rust spelling hash the same.
    let snake = req(
        Some(1),
        "pg",
        pg("SELECT 1", json!([1])),
        Some(r#"{"values":{"match_importance":0.0}}"#),
        false,
    );
    assert_eq!(hit(&rec, &snake, Levels::ValueHashes).0, 2);
}

#[test]
fn p3_p4_reduced_value_hash_ignores_match_importance_zero_fields() {
    let (_d, rec) = cascade_recording();
    let r = req(
        Some(1),
        "pg",
        pg("SELECT 2", json!([99, "other"])),
        Some(PG_MERGES),
        false,
    );
    assert_eq!(hit(&rec, &r, Levels::ValueHashes), (3, 2, false));
    assert_eq!(hit(&rec, &r, Levels::ValueHashes), (4, 2, true));
    let out = rec.find_mock(&r, Levels::ValueHashes).unwrap();
    assert!(out.request.reduced_value.is_some());
    assert_eq!(
        out.found.unwrap().match_type,
        MatchType::InputValueHashReducedSchema
    );
}

#[test]
fn p5_p6_suite_value_hashes_respect_pre_app_start() {
    let (_d, rec) = cascade_recording();
    // Recorded in trace 2, requested from trace 1.
    let r = req(
        Some(1),
        "pg",
        pg("SELECT 20", json!([2])),
        Some(PG_MERGES),
        false,
    );
    let out = rec.find_mock(&r, Levels::ValueHashes).unwrap();
    let m = out.found.unwrap();
    assert_eq!(
        (m.priority, m.scope, m.span.span_id()),
        (5, MatchScope::Global, span_id(20).as_str())
    );
    assert!(
        m.description.starts_with("Suite unused span"),
        "{}",
        m.description
    );
    let r = req(
        Some(1),
        "pg",
        pg("SELECT 20", json!([7])),
        Some(PG_MERGES),
        false,
    );
    assert_eq!(hit(&rec, &r, Levels::ValueHashes), (6, 20, true));
    // The pre-app-start filter: span 22 is pre-app-start, this request is not.
    let r = req(
        Some(1),
        "pg",
        pg("SELECT version()", json!([])),
        Some(PG_MERGES),
        false,
    );
    assert!(miss(&rec, &r, Levels::ValueHashes).contains("suite value hash (isPreAppStart=false)"));
}

#[test]
fn p7_p8_schema_hash_ranks_by_similarity_and_checks_the_http_shape() {
    let (_d, rec) = cascade_recording();
    let h = json!({"content-type": "application/json", "x-n": 1});
    // Same schema as spans 3, 4 (and 5, which has another path): closest body is span 4.
    let r = req(
        Some(1),
        "http",
        http(
            "POST",
            "http://a.test/users?id=9",
            h.clone(),
            r#"{"name":"bob","age":40}"#,
        ),
        Some(HTTP_MERGES),
        false,
    );
    let reason = miss(&rec, &r, Levels::ValueHashes);
    assert!(reason.contains("findMockAsync"), "{reason}");
    let out = rec.find_mock(&r, Levels::All).unwrap();
    // The schema level walked the request's schema: its hash is reported, as the exporter
    // computes it.
    assert_eq!(out.request.schema, Some(schema_hash(&rec, &r, HTTP_MERGES)));
    let m = out.found.unwrap();
    assert_eq!((m.priority, m.match_type), (7, MatchType::InputSchemaHash));
    assert_eq!(m.span.span_id(), span_id(4));
    assert!(m.similarity.unwrap() > 0.8);
    let runners: Vec<&str> = m.top_candidates.iter().map(|c| c.span.span_id()).collect();
    assert_eq!(
        runners,
        vec![span_id(3).as_str()],
        "span 5 fails the path check"
    );
    assert!(m.description.contains("similarity"), "{}", m.description);
    assert_eq!(hit(&rec, &r, Levels::All), (7, 3, false));
    // Both used: the most similar used one.
    assert_eq!(hit(&rec, &r, Levels::All), (8, 4, true));
    // Another method or query-key set: no schema-level candidate.
    let r = req(
        Some(1),
        "http",
        http(
            "PUT",
            "http://a.test/users?id=9",
            h.clone(),
            r#"{"name":"x","age":1}"#,
        ),
        Some(HTTP_MERGES),
        false,
    );
    miss(&rec, &r, Levels::All);
    let r = req(
        Some(1),
        "http",
        http(
            "POST",
            "http://a.test/users?page=9",
            h,
            r#"{"name":"x","age":1}"#,
        ),
        Some(HTTP_MERGES),
        false,
    );
    miss(&rec, &r, Levels::All);
}

#[test]
fn p9_p10_reduced_schema_hash() {
    let (_d, rec) = cascade_recording();
    // Headers of another shape (matchImportance 0): the full schema differs, the reduced one not.
    let h = json!({"accept": "*/*"});
    let r = req(
        Some(1),
        "http",
        http(
            "POST",
            "http://a.test/orders?id=4",
            h,
            r#"{"name":"cid","age":50}"#,
        ),
        Some(HTTP_MERGES),
        false,
    );
    let out = rec.find_mock(&r, Levels::All).unwrap();
    let m = out.found.unwrap();
    assert_eq!(
        (m.priority, m.match_type, m.span.span_id()),
        (
            9,
            MatchType::InputSchemaHashReducedSchema,
            span_id(5).as_str()
        )
    );
    assert_eq!(m.similarity, None, "a single candidate is not ranked");
    assert_eq!(hit(&rec, &r, Levels::All), (10, 5, true));
}

#[test]
fn p12_p13_across_traces_without_a_trace_id() {
    let (_d, rec) = cascade_recording();
    let r = req(
        None,
        "pg",
        pg("SELECT 2", json!([1])),
        Some(PG_MERGES),
        false,
    );
    let out = rec.find_mock(&r, Levels::All).unwrap();
    let m = out.found.unwrap();
    assert_eq!(
        (m.priority, m.scope, m.span.span_id()),
        (12, MatchScope::Global, span_id(2).as_str())
    );
    let r = req(
        None,
        "pg",
        pg("SELECT 1", json!([5])),
        Some(PG_MERGES),
        false,
    );
    assert_eq!(hit(&rec, &r, Levels::ValueHashes), (13, 1, false));
    // Not pre-app-start: no schema levels across traces.
    let r = req(
        None,
        "pg",
        pg("SELECT 77", json!([5])),
        Some(PG_MERGES),
        false,
    );
    miss(&rec, &r, Levels::All);
}

#[test]
fn p14_p15_pre_app_start_schema_levels_across_traces() {
    let (_d, rec) = cascade_recording();
    // Unknown trace, pre-app-start, same schema as the pre-app-start redis span 21.
    let r = req(
        Some(99),
        "redis",
        json!({"command": "GET", "args": ["other"]}),
        None,
        true,
    );
    let reason = miss(&rec, &r, Levels::ValueHashes);
    assert!(reason.contains("not in the recording"), "{reason}");
    assert_eq!(hit(&rec, &r, Levels::All), (14, 21, false));
    let h = json!({"x": "other shape"});
    let r = req(
        None,
        "http",
        http("GET", "http://cfg.test/config?env=y", h, r#"{"v":2}"#),
        Some(HTTP_MERGES),
        true,
    );
    assert_eq!(hit(&rec, &r, Levels::All), (15, 23, false));
}

#[test]
fn no_match_says_why_and_is_counted() {
    let (_d, rec) = cascade_recording();
    let r = req(Some(1), "mysql", json!({"sql": "SELECT 1"}), None, false);
    let reason = miss(&rec, &r, Levels::All);
    assert!(
        reason.contains("no recorded span matches mysql"),
        "{reason}"
    );
    assert!(reason.contains("no \"mysql\" spans"), "{reason}");
    let r = req(
        Some(42),
        "pg",
        pg("SELECT 1", json!([1])),
        Some(PG_MERGES),
        false,
    );
    assert!(miss(&rec, &r, Levels::All).contains("is not in the recording"));
    // A miss reports the request's schema hash (no schema level ran for an unknown trace).
    let out = rec.find_mock(&r, Levels::ValueHashes).unwrap();
    assert_eq!(out.request.schema, Some(schema_hash(&rec, &r, PG_MERGES)));
    assert_eq!(rec.stats().misses, 3);
    // A request that cannot be hashed is an error, not a miss.
    let mut bad = req(Some(1), "pg", json!({}), None, false);
    bad.input_value = "{not json".into();
    assert!(rec
        .find_mock(&bad, Levels::All)
        .unwrap_err()
        .starts_with("inputValue: invalid JSON"));
}

#[test]
fn consume_once_under_concurrent_callers() {
    const K: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<Rec<'_>> = (0..K)
        .map(|i| Rec {
            trace: 7,
            span: 100 + i,
            ts: i as i64,
            package: "pg",
            input: pg("SELECT now()", json!([])),
            merges: Some(PG_MERGES),
            pre: false,
        })
        .collect();
    write_tusk(dir.path(), &recs);
    let rec = Arc::new(open(dir.path(), HashAlgorithm::Blake3));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let rec = Arc::clone(&rec);
            std::thread::spawn(move || {
                let r = req(
                    Some(7),
                    "pg",
                    pg("SELECT now()", json!([])),
                    Some(PG_MERGES),
                    false,
                );
                let mut got = Vec::new();
                loop {
                    let out = rec.find_mock(&r, Levels::ValueHashes).unwrap();
                    let m = out.found.unwrap();
                    if m.reused {
                        return got;
                    }
                    got.push(m.span.span_id().to_string());
                }
            })
        })
        .collect();
    let all: Vec<String> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let distinct: HashSet<&String> = all.iter().collect();
    assert_eq!((all.len(), distinct.len()), (K, K));
    assert!(rec.spans().iter().all(|s| rec.is_used(s)));
}

#[test]
fn corrupt_files_are_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let good = |span: usize| {
        tusk_line(&Rec {
            trace: 3,
            span,
            ts: span as i64,
            package: "pg",
            input: pg("SELECT 1", json!([span])),
            merges: Some(PG_MERGES),
            pre: false,
        })
    };
    let jsonl = |name: &str| {
        dir.path()
            .join(format!("2026-01-01T00-00-00-000Z_trace_{name}.jsonl"))
    };
    // Garbage in the middle, a torn last line.
    let torn = good(2);
    fs::write(
        jsonl("a"),
        format!(
            "{}\nnot json at all\n{{\"traceId\":\"x\"}}\n\n{}",
            good(1),
            &torn[..torn.len() / 2]
        ),
    )
    .unwrap();
    fs::write(jsonl("b"), "").unwrap();
    fs::write(jsonl("c"), format!("{}\n", good(3))).unwrap();
    // Protobuf: a valid file cut mid-record, and random bytes.
    let pdir = tempfile::tempdir().unwrap();
    record(pdir.path(), &calls(3), Format::Proto, HashAlgorithm::Blake3);
    let pb = fs::read_dir(pdir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = fs::read(pb).unwrap();
    fs::write(
        dir.path().join("x_trace_cut.pb"),
        &bytes[..bytes.len() - 10],
    )
    .unwrap();
    fs::write(
        dir.path().join("x_trace_junk.pb"),
        [0x04, 0xff, 0xff, 0xff, 0xff, 0x02, 0x08],
    )
    .unwrap();
    fs::write(dir.path().join("notes.txt"), "ignored").unwrap();

    let rec = open(dir.path(), HashAlgorithm::Blake3);
    let st = rec.stats();
    assert_eq!(st.files, 5);
    assert_eq!(
        st.spans,
        2 + 2,
        "lines 1 of a, 1 of c, two whole records of the cut pb"
    );
    let reasons: Vec<String> = st
        .skipped
        .iter()
        .map(|s| format!("{}:{}: {}", s.file, s.line, s.reason))
        .collect();
    let find = |needle: &str| reasons.iter().any(|r| r.contains(needle));
    assert!(find("_trace_a.jsonl:2: not a span"), "{reasons:#?}");
    assert!(find("_trace_a.jsonl:3: missing"), "{reasons:#?}");
    assert!(find("_trace_a.jsonl:5: torn last line"), "{reasons:#?}");
    assert!(find("x_trace_cut.pb:3: record at byte"), "{reasons:#?}");
    assert!(
        find("x_trace_junk.pb:1: not a tusk.drift.core.v1.Span"),
        "{reasons:#?}"
    );
    assert_eq!(st.skipped_lines as usize, reasons.len());
    let r = req(
        Some(3),
        "pg",
        pg("SELECT 1", json!([1])),
        Some(PG_MERGES),
        false,
    );
    assert_eq!(hit(&rec, &r, Levels::ValueHashes), (1, 1, false));
}

#[test]
fn duplicate_spans_are_loaded_once() {
    let dir = tempfile::tempdir().unwrap();
    let r = Rec {
        trace: 4,
        span: 1,
        ts: 1,
        package: "pg",
        input: pg("SELECT 1", json!([])),
        merges: None,
        pre: false,
    };
    write_tusk(dir.path(), &[r]);
    let line = fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    fs::copy(&line, dir.path().join("again_trace_x.jsonl")).unwrap();
    let rec = open(dir.path(), HashAlgorithm::Sha256);
    assert_eq!((rec.stats().spans, rec.stats().duplicate_spans), (1, 1));
    assert!(Recording::open(dir.path().join("missing"), &LoadOptions::default()).is_err());
}
