//! criterion benches of the offloop core pipeline, per stage and end to end, on one trace of the
//! seeded pg-style workload (`benches/lib/workload.js`: 20 `pg.query` spans of 10, 200 or 1000
//! rows × 8 mixed columns, plus the HTTP root) — the bytes the Node benchmark exports.
//!
//!   cargo bench -p offloop-bench                  # everything (a few minutes on 2 cores)
//!   cargo bench -p offloop-bench -- rows_200/     # one workload size
//!   cargo bench -p offloop-bench -- --quick       # criterion's quick mode
//!
//! Throughput is the span's JSON input bytes (td.inputValue, td.outputValue, merges, metadata),
//! the same for every bench of a size, so MB/s compare stage against stage and against the
//! `parse_value` baseline (serde_json into a `Value`). The stage internals are crate-private, so
//! stages are measured through the public API; the README ("Benchmarks") says what each one
//! covers. After the run a table of pipeline ÷ parse ratios is printed and written to
//! `<criterion dir>/offloop-summary.{json,md}`.

use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use criterion::{BatchSize, Criterion, SamplingMode, Throughput};
use offloop::frame::{decode_span, split_batch, BatchWriter};
use offloop::merges::Merges;
use offloop::payload::{self, Payload};
use offloop::record::{self, RecordOptions};
use offloop::sink::request::RequestHeader;
use offloop::{Exporter, ExporterConfig, Format, HashAlgorithm};
use offloop_bench::{batch, json_bytes, load, PlainSpan};
use serde::de::IgnoredAny;

const ROWS: [usize; 3] = [10, 200, 1000];

/// One value or output payload of a span with its merges.
struct Input<'a> {
    json: &'a [u8],
    merges: Option<Merges>,
}

fn inputs(spans: &[PlainSpan]) -> Vec<Input<'_>> {
    let mut out = Vec::new();
    for s in spans {
        for (value, merges) in [
            ("td.inputValue", "td.inputSchemaMerges"),
            ("td.outputValue", "td.outputSchemaMerges"),
        ] {
            if let Some(json) = s.str_attr(value) {
                out.push(Input {
                    json: json.as_bytes(),
                    merges: s
                        .str_attr(merges)
                        .map(|m| Merges::parse(m.as_bytes()).expect("workload merges parse")),
                });
            }
        }
    }
    out
}

fn bench_rows(c: &mut Criterion, rows: usize, spans: &[PlainSpan], tmp: &Path) {
    let bytes = json_bytes(spans);
    let texts: Vec<&[u8]> = spans.iter().flat_map(PlainSpan::json_texts).collect();
    let inputs = inputs(spans);
    let processed: Vec<Payload> = inputs
        .iter()
        .map(|i| payload::process(i.json, i.merges.as_ref(), HashAlgorithm::Blake3).unwrap())
        .collect();
    let frames: Vec<_> = spans.iter().map(PlainSpan::frame).collect();
    let batch = batch(spans);

    let mut g = c.benchmark_group(format!("rows_{rows}"));
    g.throughput(Throughput::Bytes(bytes as u64));
    if rows >= 200 {
        g.sampling_mode(SamplingMode::Flat);
    }

    // Baselines on the same bytes.
    g.bench_function("parse_value", |b| {
        b.iter(|| {
            for t in &texts {
                black_box(serde_json::from_slice::<serde_json::Value>(t).unwrap());
            }
        })
    });
    g.bench_function("parse_validate", |b| {
        b.iter(|| {
            for t in &texts {
                black_box(serde_json::from_slice::<IgnoredAny>(t).unwrap());
            }
        })
    });

    // Stages.
    g.bench_function("normalize_struct", |b| {
        b.iter(|| {
            for i in &inputs {
                black_box(payload::encode_value(i.json).unwrap());
            }
        })
    });
    for (name, algo, with_merges) in [
        ("payload_blake3", HashAlgorithm::Blake3, true),
        ("payload_sha256", HashAlgorithm::Sha256, true),
        ("payload_blake3_nomerges", HashAlgorithm::Blake3, false),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                for i in &inputs {
                    let merges = if with_merges { i.merges.as_ref() } else { None };
                    black_box(payload::process(i.json, merges, algo).unwrap());
                }
            })
        });
    }
    g.bench_function("schema_canonical_hash", |b| {
        b.iter(|| {
            for p in &processed {
                let json = p.schema.to_canonical_json();
                black_box(HashAlgorithm::Blake3.hex(json.as_bytes()));
            }
        })
    });
    g.bench_function("schema_proto", |b| {
        b.iter(|| {
            for p in &processed {
                black_box(p.schema.to_proto());
            }
        })
    });
    for (name, algo) in [
        ("hash_blake3", HashAlgorithm::Blake3),
        ("hash_sha256", HashAlgorithm::Sha256),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                for p in &processed {
                    black_box(algo.hex(&p.canonical));
                }
            })
        });
    }
    for (name, jsonl, proto) in [
        ("record_core", false, false),
        ("record_jsonl", true, false),
        ("record_proto", false, true),
    ] {
        let opts = RecordOptions {
            hash: HashAlgorithm::Blake3,
            environment: Some("bench".into()),
            jsonl,
            proto,
        };
        g.bench_function(name, |b| {
            b.iter(|| {
                for f in &frames {
                    black_box(record::record(f, &opts).unwrap());
                }
            })
        });
    }
    g.bench_function("frame_roundtrip", |b| {
        b.iter(|| {
            let mut w = BatchWriter::new();
            for f in &frames {
                w.push(f);
            }
            let buf = w.finish();
            let (_, slices) = split_batch(&buf).unwrap();
            for s in slices {
                black_box(decode_span(s.unwrap()).unwrap());
            }
        })
    });

    // End to end: Exporter::process on one batch buffer (the trace's 21 spans), on this thread.
    // One thread: these are per-core figures, compared with the single-threaded parse.
    let config = |hash, request: bool| ExporterConfig {
        hash,
        environment: Some("bench".into()),
        request: request.then(RequestHeader::default),
        threads: 1,
        ..ExporterConfig::default()
    };
    for (name, cfg) in [
        ("e2e_blake3", config(HashAlgorithm::Blake3, false)),
        ("e2e_sha256", config(HashAlgorithm::Sha256, false)),
        ("e2e_blake3_request", config(HashAlgorithm::Blake3, true)),
    ] {
        let exporter = Exporter::new(cfg).unwrap();
        g.bench_function(name, |b| {
            b.iter(|| {
                let r = exporter.process(&batch);
                assert_eq!(r.written as usize, spans.len(), "{:?}", r.errors);
                black_box(r)
            })
        });
    }
    for (name, hash, format, threads) in [
        (
            "e2e_blake3_jsonl_file",
            HashAlgorithm::Blake3,
            Format::Jsonl,
            1,
        ),
        (
            "e2e_blake3_jsonl_file_all_cores",
            HashAlgorithm::Blake3,
            Format::Jsonl,
            offloop::dispatch::cores(),
        ),
        (
            "e2e_sha256_jsonl_file",
            HashAlgorithm::Sha256,
            Format::Jsonl,
            1,
        ),
        (
            "e2e_blake3_proto_file",
            HashAlgorithm::Blake3,
            Format::Proto,
            1,
        ),
    ] {
        // A fresh, empty directory per iteration (not timed), so files do not grow.
        let dir = tmp.join(format!("{rows}-{name}"));
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let _ = std::fs::remove_dir_all(&dir);
                    Exporter::new(ExporterConfig {
                        directory: Some(dir.clone()),
                        format,
                        threads,
                        ..config(hash, false)
                    })
                    .unwrap()
                },
                |exporter| {
                    let r = exporter.process(&batch);
                    assert_eq!(r.written as usize, spans.len(), "{:?}", r.errors);
                    (exporter, r)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

// ---------------------------------------------------------------------------
// Summary: pipeline bytes/s ÷ parse-only bytes/s
// ---------------------------------------------------------------------------

/// Benches whose ratio to `parse_value` is also measured paired (see [`paired_ratios`]).
const PAIRED: [&str; 3] = ["e2e_blake3", "e2e_blake3_request", "e2e_blake3_jsonl_file"];

/// The ratio parse time ÷ pipeline time measured back to back on the same bytes, median of
/// `ROUNDS` rounds: robust against load that comes and goes on a shared machine, which can skew
/// two criterion benches measured seconds apart.
fn paired_ratios(spans: &[PlainSpan], tmp: &Path) -> HashMap<&'static str, f64> {
    const ROUNDS: usize = 21;
    let texts: Vec<&[u8]> = spans.iter().flat_map(PlainSpan::json_texts).collect();
    let batch = batch(spans);
    let parse = || {
        let t = Instant::now();
        for t in &texts {
            black_box(serde_json::from_slice::<serde_json::Value>(t).unwrap());
        }
        t.elapsed()
    };
    let dir = tmp.join("paired");
    let mut out = HashMap::new();
    for name in PAIRED {
        let mut ratios: Vec<f64> = (0..ROUNDS)
            .map(|_| {
                let _ = std::fs::remove_dir_all(&dir);
                let exporter = Exporter::new(ExporterConfig {
                    directory: (name == "e2e_blake3_jsonl_file").then(|| dir.clone()),
                    request: (name == "e2e_blake3_request").then(RequestHeader::default),
                    environment: Some("bench".into()),
                    threads: 1,
                    ..ExporterConfig::default()
                })
                .unwrap();
                let p = parse();
                let t = Instant::now();
                black_box(exporter.process(&batch));
                p.as_secs_f64() / t.elapsed().as_secs_f64()
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        out.insert(name, ratios[ROUNDS / 2]);
    }
    out
}

/// Where criterion keeps its estimates (same rules as criterion: `$CRITERION_HOME`, else
/// `<target dir>/criterion`; the bench binary lives in `<target dir>/<profile>/deps/`).
fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(target).join("criterion");
    }
    let exe = std::env::current_exe().expect("current exe");
    exe.ancestors()
        .nth(3)
        .map(|t| t.join("criterion"))
        .unwrap_or_else(|| PathBuf::from("target/criterion"))
}

/// Mean time per iteration (ns) measured by this run, if any.
fn mean_ns(dir: &Path, group: &str, id: &str, since: SystemTime) -> Option<f64> {
    let path = dir.join(group).join(id).join("new/estimates.json");
    let fresh = std::fs::metadata(&path).and_then(|m| m.modified()).ok()? >= since;
    if !fresh {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    v["mean"]["point_estimate"].as_f64()
}

const SUMMARY: [(&str, &str); 10] = [
    ("parse_value", "serde_json → Value (baseline)"),
    ("parse_validate", "serde_json validate only (IgnoredAny)"),
    (
        "payload_blake3",
        "payloads: parse+normalize+merges+schema+Struct+hashes",
    ),
    ("record_jsonl", "records: payloads + JSONL lines"),
    ("e2e_blake3", "Exporter::process, no output"),
    ("e2e_sha256", "Exporter::process, no output, sha256"),
    (
        "e2e_blake3_request",
        "Exporter::process → proto ExportSpansRequest",
    ),
    ("e2e_blake3_jsonl_file", "Exporter::process → JSONL files"),
    (
        "e2e_blake3_jsonl_file_all_cores",
        "the same, the batch's spans over every core (`threads`)",
    ),
    (
        "e2e_sha256_jsonl_file",
        "Exporter::process → JSONL files, sha256",
    ),
];

/// One workload size: rows, spans, JSON bytes, paired ratios.
type Size = (usize, usize, usize, HashMap<&'static str, f64>);

fn summarize(sizes: &[Size], since: SystemTime) {
    let dir = criterion_dir();
    let mut md = String::from(
        "| rows | stage | MB/s | ÷ parse_value | paired ÷ parse | spans/s |\n|---:|---|---:|---:|---:|---:|\n",
    );
    let mut json = Vec::new();
    for (rows, spans, bytes, paired) in sizes {
        let (rows, spans, bytes) = (*rows, *spans, *bytes);
        let group = format!("rows_{rows}");
        let Some(parse) = mean_ns(&dir, &group, "parse_value", since) else {
            continue;
        };
        for (id, what) in SUMMARY {
            let Some(ns) = mean_ns(&dir, &group, id, since) else {
                continue;
            };
            let mbps = bytes as f64 / ns * 1e3;
            let ratio = parse / ns;
            let spans_per_s = spans as f64 / ns * 1e9;
            let paired = paired.get(id).copied();
            let paired_cell = paired.map_or("–".to_string(), |r| format!("{r:.2}"));
            md.push_str(&format!(
                "| {rows} | `{id}` {what} | {mbps:.0} | {ratio:.2} | {paired_cell} | {spans_per_s:.0} |\n"
            ));
            json.push(serde_json::json!({
                "rows": rows, "bench": id, "bytes": bytes, "spans": spans, "meanNs": ns,
                "mbPerSec": mbps, "ratioToParseValue": ratio, "pairedRatioToParseValue": paired,
                "spansPerSec": spans_per_s,
            }));
        }
    }
    if json.is_empty() {
        return;
    }
    println!(
        "\npipeline bytes/s ÷ serde_json parse-into-Value bytes/s (same bytes; target ≥ 1.00)"
    );
    println!("paired: parse and pipeline timed back to back, median of 21 rounds\n");
    println!("{md}");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("offloop-summary.md"), &md);
    let _ = std::fs::write(
        dir.join("offloop-summary.json"),
        serde_json::to_vec_pretty(&json).unwrap(),
    );
    println!(
        "(written to {})",
        dir.join("offloop-summary.{md,json}").display()
    );
}

fn main() {
    let listing = std::env::args().any(|a| a == "--list" || a == "--test");
    let since = SystemTime::now() - Duration::from_secs(1);
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut sizes = Vec::new();
    for rows in ROWS {
        let spans = load(rows, 1);
        bench_rows(&mut c, rows, &spans, tmp.path());
        let paired = if listing {
            HashMap::new()
        } else {
            paired_ratios(&spans, tmp.path())
        };
        sizes.push((rows, spans.len(), json_bytes(&spans), paired));
    }
    c.final_summary();
    if !listing {
        summarize(&sizes, since);
    }
}
