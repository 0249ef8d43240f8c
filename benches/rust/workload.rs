//! The seeded pg-style workload of `benches/lib/workload.js`, for Rust benchmarks.
//!
//! The generator has one implementation, in JavaScript; this module runs
//! `node benches/lib/workload.js --dump` (no `node_modules` needed) and turns its plain spans
//! into [`SpanFrame`]s and batches, so the criterion benches measure exactly the bytes the Node
//! benchmark exports. Set `NODE` to pick the node binary.

use std::path::PathBuf;
use std::process::Command;

use offloop::frame::{AttrValue, BatchWriter, SpanFrame};
use serde_json::Value;

/// Attributes holding JSON text that the pipeline parses.
pub const JSON_ATTRS: [&str; 5] = [
    "td.inputValue",
    "td.outputValue",
    "td.inputSchemaMerges",
    "td.outputSchemaMerges",
    "td.metadata",
];

/// An owned attribute value.
#[derive(Clone, Debug)]
pub enum Attr {
    /// A string.
    Str(String),
    /// A number.
    Num(f64),
    /// A boolean.
    Bool(bool),
}

/// One span as the generator describes it.
#[derive(Clone, Debug)]
pub struct PlainSpan {
    /// 32 hex characters.
    pub trace_id: String,
    /// 16 hex characters.
    pub span_id: String,
    /// Empty for the root.
    pub parent_span_id: String,
    /// OpenTelemetry SpanKind.
    pub kind: u8,
    /// OpenTelemetry status code.
    pub status_code: u8,
    /// `[seconds, nanos]`.
    pub start: (f64, u32),
    /// `[seconds, nanos]`.
    pub duration: (f64, u32),
    /// Span name.
    pub name: String,
    /// Instrumentation scope name.
    pub scope: String,
    /// Attributes (`td.*`).
    pub attrs: Vec<(String, Attr)>,
}

impl PlainSpan {
    /// The span as a frame borrowing from `self`.
    pub fn frame(&self) -> SpanFrame<'_> {
        SpanFrame {
            trace_id: &self.trace_id,
            span_id: &self.span_id,
            parent_span_id: &self.parent_span_id,
            kind: self.kind,
            status_code: self.status_code,
            start: self.start,
            duration: self.duration,
            name: &self.name,
            status_message: "",
            scope_name: &self.scope,
            attrs: self
                .attrs
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        Attr::Str(s) => AttrValue::Str(s.as_bytes()),
                        Attr::Num(n) => AttrValue::Num(*n),
                        Attr::Bool(b) => AttrValue::Bool(*b),
                    };
                    (k.as_str(), v)
                })
                .collect(),
        }
    }

    /// The string attribute `key`.
    pub fn str_attr(&self, key: &str) -> Option<&str> {
        self.attrs.iter().find_map(|(k, v)| match v {
            Attr::Str(s) if k == key => Some(s.as_str()),
            _ => None,
        })
    }

    /// The JSON texts the pipeline parses for this span ([`JSON_ATTRS`] that are present).
    pub fn json_texts(&self) -> impl Iterator<Item = &[u8]> {
        JSON_ATTRS
            .iter()
            .filter_map(|k| self.str_attr(k).map(str::as_bytes))
    }
}

/// The spans of `traces` traces with `rows` rows per query result (seed 1, 20 queries per trace):
/// per trace 20 `pg.query` CLIENT spans, then the HTTP SERVER root.
pub fn load(rows: usize, traces: usize) -> Vec<PlainSpan> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("lib/workload.js");
    let node = std::env::var("NODE").unwrap_or_else(|_| "node".to_string());
    let out = Command::new(&node)
        .arg(&script)
        .arg("--dump")
        .arg(format!("--rows={rows}"))
        .arg(format!("--traces={traces}"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{node} {}`: {e} (the workload generator is JavaScript; set NODE to a node binary)",
                script.display()
            )
        });
    assert!(
        out.status.success(),
        "`{node} {} --dump` failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("workload dump is JSON");
    doc["spans"]
        .as_array()
        .expect("spans")
        .iter()
        .map(plain_span)
        .collect()
}

fn plain_span(v: &Value) -> PlainSpan {
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    let hr = |k: &str| (v[k][0].as_f64().unwrap(), v[k][1].as_u64().unwrap() as u32);
    let attrs = v["attributes"]
        .as_object()
        .expect("attributes")
        .iter()
        .map(|(k, v)| {
            let a = match v {
                Value::String(s) => Attr::Str(s.clone()),
                Value::Number(n) => Attr::Num(n.as_f64().unwrap()),
                Value::Bool(b) => Attr::Bool(*b),
                other => panic!("unexpected attribute {k}: {other}"),
            };
            (k.clone(), a)
        })
        .collect();
    PlainSpan {
        trace_id: s("traceId"),
        span_id: s("spanId"),
        parent_span_id: s("parentSpanId"),
        kind: v["kind"].as_u64().unwrap() as u8,
        status_code: v["statusCode"].as_u64().unwrap() as u8,
        start: hr("startTime"),
        duration: hr("duration"),
        name: s("name"),
        scope: s("scope"),
        attrs,
    }
}

/// One batch buffer (the format the JS shim sends) holding `spans`.
pub fn batch(spans: &[PlainSpan]) -> Vec<u8> {
    let mut w = BatchWriter::new();
    for s in spans {
        w.push(&s.frame());
    }
    w.finish()
}

/// Total bytes of the JSON texts the pipeline parses in `spans`.
pub fn json_bytes(spans: &[PlainSpan]) -> usize {
    spans
        .iter()
        .flat_map(PlainSpan::json_texts)
        .map(<[u8]>::len)
        .sum()
}
