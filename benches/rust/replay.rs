//! criterion benches of the replay engine's synchronous path: the request hashing (the
//! exporter's code) and `find_mock` per hash level, on a recording of 20k small pg spans in
//! Tusk JSONL form (one file per 100-span trace), the shape `benches/replay.js` measures from
//! Node. The Node figure adds the N-API crossing and the JS result object to these.
//!
//!   cargo bench -p offloop-bench --bench replay
//!   cargo bench -p offloop-bench --bench replay -- --quick

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::Criterion;
use offloop::replay::hashing;
use offloop::replay::{Levels, LoadOptions, MockRequest, Recording};
use offloop::HashAlgorithm;

const TRACES: usize = 200;
const PER_TRACE: usize = 100;
const MERGES: &str = r#"{"values":{"matchImportance":0}}"#;

fn trace_id(t: usize) -> String {
    format!("{t:032x}")
}

fn input(t: usize, i: usize) -> String {
    format!(
        r#"{{"text":"SELECT id, name FROM t{} WHERE acct = $1 AND n = $2","values":[{t},{i}],"clientType":"pool"}}"#,
        i % 40
    )
}

/// Writes the recording: Tusk JSONL lines whose input schema carries the `values` merge.
fn write_recording(dir: &Path) {
    for t in 0..TRACES {
        let mut file = String::new();
        for i in 0..PER_TRACE {
            writeln!(
                file,
                r#"{{"traceId":"{}","spanId":"{:016x}","name":"pg.query","packageName":"pg","inputValue":{},"outputValue":{{"command":"SELECT","rowCount":1,"rows":[{{"id":{},"name":"row {i}"}}]}},"inputSchema":{{"type":6,"properties":{{"text":{{"type":2}},"values":{{"type":7,"matchImportance":0}},"clientType":{{"type":2}}}}}},"timestamp":{{"seconds":{},"nanos":0}}}}"#,
                trace_id(t),
                t * PER_TRACE + i,
                input(t, i),
                t * 1000 + i,
                1_700_000_000 + t * PER_TRACE + i
            )
            .unwrap();
        }
        std::fs::write(
            dir.join(format!("{t:04}_trace_{}.jsonl", trace_id(t))),
            file,
        )
        .unwrap();
    }
}

fn request(trace: Option<usize>, value: String) -> MockRequest {
    MockRequest {
        trace_id: trace.map(trace_id),
        name: "pg.query".into(),
        package_name: "pg".into(),
        input_value: value,
        input_schema_merges: Some(MERGES.into()),
        ..MockRequest::default()
    }
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let tmp = tempfile::tempdir().expect("temp dir");
    write_recording(tmp.path());
    let rec = Recording::open(tmp.path(), &LoadOptions::default()).expect("recording loads");
    assert_eq!(rec.spans().len(), TRACES * PER_TRACE);
    let merges = hashing::parse_merges(MERGES.as_bytes()).unwrap();

    let mut g = c.benchmark_group("replay");
    let value = input(3, 7);
    g.bench_function("hashes_all_four", |b| {
        b.iter(|| {
            hashing::hashes(
                black_box(value.as_bytes()),
                Some(&merges),
                HashAlgorithm::Blake3,
            )
        })
    });
    g.bench_function("texts", |b| {
        b.iter(|| hashing::texts(black_box(value.as_bytes()), Some(&merges)))
    });
    // The span is consumed by the first call, so the level measured is "used" (P2): the
    // same look-ups as P1 plus the fall-back to the first used span.
    let p2 = request(Some(3), input(3, 7));
    g.bench_function("find_mock_trace_value", |b| {
        b.iter(|| rec.find_mock(black_box(&p2), Levels::ValueHashes).unwrap())
    });
    // Other `values` (matchImportance 0): found by the reduced value hash.
    let p3 = request(Some(4), input(4, 9).replace("[4,9]", "[-1,-1]"));
    g.bench_function("find_mock_trace_reduced", |b| {
        b.iter(|| rec.find_mock(black_box(&p3), Levels::ValueHashes).unwrap())
    });
    let p12 = request(None, input(5, 11));
    g.bench_function("find_mock_suite_value", |b| {
        b.iter(|| rec.find_mock(black_box(&p12), Levels::ValueHashes).unwrap())
    });
    // Every call a different span of a different trace, as in an app's replay: look-ups and
    // the span's fields come from cold memory (the figure above reuses one hot span).
    let cold: Vec<MockRequest> = (0..TRACES * PER_TRACE)
        .map(|k| {
            let (t, i) = (k % TRACES, (k / TRACES) % PER_TRACE);
            request(Some(t), input(t, i))
        })
        .collect();
    let mut next = 0;
    g.bench_function("find_mock_trace_value_cold", |b| {
        b.iter(|| {
            next = (next + 7919) % cold.len();
            rec.find_mock(black_box(&cold[next]), Levels::ValueHashes)
                .unwrap()
        })
    });
    let miss = request(Some(6), r#"{"text":"SELECT 1","values":[]}"#.into());
    g.bench_function("find_mock_miss", |b| {
        b.iter(|| {
            rec.find_mock(black_box(&miss), Levels::ValueHashes)
                .unwrap()
        })
    });
    g.finish();
    c.final_summary();
}
