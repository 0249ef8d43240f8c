//! `Exporter::process` on arbitrary bytes, and on well-formed frames carrying arbitrary
//! attribute bytes (so the fuzzer reaches the record stage, not only the frame decoder).
//!
//! Input layout: byte 0 even → the rest is a raw batch; odd → the rest is split at 0xFF bytes
//! into td.inputValue, td.outputValue, td.inputSchemaMerges, td.outputSchemaMerges,
//! td.metadata, td.transformMetadata and one plain attribute, of a span with valid ids (byte 0
//! also picks which attributes are present and the span kind/status).
//!
//! Checked: no panic (the exporter's panic guard would turn one into an "internal error"
//! entry, which is asserted against); every declared span is accounted written, dropped or
//! failed; every error names a stage and has a message; the `ExportSpansRequest` decodes with
//! the generated protobuf code and holds exactly the written spans; each JSONL record is one
//! line of JSON.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use offloop::exporter::{Exporter, ExporterConfig};
use offloop::frame::{AttrValue, BatchWriter, SpanFrame};
use offloop::record::{record, validate, RecordOptions};
use offloop::sink::request::RequestHeader;
use offloop_fuzz::is_json;
use prost::Message;
use tusk_drift_schemas::tusk::drift::backend::v1::ExportSpansRequest;

fn exporter() -> &'static Exporter {
    static E: OnceLock<Exporter> = OnceLock::new();
    E.get_or_init(|| {
        Exporter::new(ExporterConfig {
            directory: None,
            max_span_bytes: 64 * 1024,
            request: Some(RequestHeader::default()),
            ..ExporterConfig::default()
        })
        .unwrap()
    })
}

const KEYS: [&str; 7] = [
    "td.inputValue",
    "td.outputValue",
    "td.inputSchemaMerges",
    "td.outputSchemaMerges",
    "td.metadata",
    "td.transformMetadata",
    "http.route",
];

fn structured(flags: u8, rest: &[u8]) -> Vec<u8> {
    let parts: Vec<&[u8]> = rest.split(|b| *b == 0xff).collect();
    let mut attrs = Vec::new();
    for (i, key) in KEYS.iter().enumerate() {
        if let Some(p) = parts.get(i) {
            // Bit 1 drops td.inputValue (then the other attributes are the input value).
            if i == 0 && flags & 2 == 2 {
                continue;
            }
            attrs.push((*key, AttrValue::Str(p)));
        }
    }
    if let Some(extra) = parts.get(KEYS.len()) {
        attrs.push(("json.attr", AttrValue::Json(extra)));
        attrs.push(("td.name", AttrValue::Str(extra)));
    }
    let span = SpanFrame {
        trace_id: "0af7651916cd43dd8448eb211c80319c",
        span_id: "b7ad6b7169203331",
        parent_span_id: if flags & 4 == 4 {
            ""
        } else {
            "00f067aa0ba902b7"
        },
        kind: (flags >> 3) % 5,
        status_code: (flags >> 6) % 3,
        start: (1_700_000_000.0, 1),
        duration: (0.0, 1_000),
        name: "fuzz",
        status_message: "",
        scope_name: "fuzz",
        attrs,
    };
    // The record stage on its own, with both outputs.
    if validate(&span).is_ok() {
        if let Ok(r) = record(&span, &RecordOptions::default()) {
            assert!(!r.jsonl.contains(&b'\n'), "a JSONL record is one line");
            assert!(is_json(&r.jsonl), "a JSONL record is JSON");
            tusk_drift_schemas::tusk::drift::core::v1::Span::decode(&r.proto[..])
                .expect("the Span decodes");
        }
    }
    let mut w = BatchWriter::new();
    w.push(&span);
    w.finish()
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let batch = if flags & 1 == 0 {
        rest.to_vec()
    } else {
        structured(flags, rest)
    };
    let r = exporter().process(&batch);
    for e in &r.errors {
        assert!(!e.message.is_empty());
        assert!(
            !e.message.contains("internal error"),
            "panic inside the pipeline: {}",
            e.message
        );
    }
    assert_eq!(
        r.written as u64 + r.dropped as u64 + r.failed as u64,
        r.spans as u64,
        "every declared span is accounted"
    );
    let req = ExportSpansRequest::decode(r.request.as_deref().unwrap_or_default())
        .expect("the ExportSpansRequest decodes");
    assert_eq!(req.spans.len(), r.written as usize);
});
