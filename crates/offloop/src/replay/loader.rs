//! Reads a recordings directory: every `*trace*.jsonl` (offloop's and other Tusk recorders'
//! `CleanSpanData` lines) and `*trace*.pb` (varint-length-delimited
//! `tusk.drift.core.v1.Span`) file.
//!
//! Stored hashes are not trusted for matching: each span's input hashes are recomputed from
//! its recorded input value with the merge settings recovered from its recorded input schema
//! (the recorder copies every merge onto the top-level property it applies to), through the
//! same code that hashes replay requests. So a recording made with sha256, by the Tusk JS SDK
//! or by the Tusk Rust core matches requests hashed by offloop with the replay's algorithm.
//!
//! Files are parsed in parallel (and the lines of a large file too); results are put back in
//! file-name and line order, so loading is deterministic. A line or record that cannot be
//! used is skipped and reported with its file and line, never fatal.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use prost::Message;
use rayon::prelude::*;
use serde::Deserialize;
use serde_json::value::RawValue;
use tusk_drift_schemas::tusk::drift::core::v1 as pb;

use super::hashing;
use super::span::{RecordedSpan, Source, SpanHashes, SpanStrings, SpanText, Time};
use super::struct_json::{len_fields, struct_to_json};
use crate::hash::HashAlgorithm;
use crate::json::escape::write_json_str;
use crate::json::number::write_js_number;
use crate::merges::Merges;
use crate::schema::types;

/// How a recording is loaded.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Digest for the recomputed hashes; requests are hashed with the same one.
    pub hash: HashAlgorithm,
    /// How many skipped lines are described in detail (all are counted).
    pub max_reasons: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            hash: HashAlgorithm::default(),
            max_reasons: 10,
        }
    }
}

/// A line or record that was not loaded, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// File name inside the recordings directory.
    pub file: String,
    /// 1-based line (JSONL) or record number (protobuf); 0 for the whole file.
    pub line: u64,
    /// What was wrong.
    pub reason: String,
}

/// What a directory held.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub spans: Vec<RecordedSpan>,
    pub files: usize,
    pub skipped: u64,
    pub reasons: Vec<Skipped>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Jsonl,
    Proto,
}

fn kind_of(name: &str) -> Option<Kind> {
    if !name.contains("trace") {
        return None;
    }
    if name.ends_with(".jsonl") {
        Some(Kind::Jsonl)
    } else if name.ends_with(".pb") {
        Some(Kind::Proto)
    } else {
        None
    }
}

/// Loads every recording file directly inside `dir`. Fails only when the directory cannot be
/// listed; unreadable files and bad lines are reported in [`Loaded::reasons`].
pub(crate) fn load(dir: &Path, opts: &LoadOptions) -> io::Result<Loaded> {
    let listing = fs::read_dir(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot read recordings directory {}: {e}", dir.display()),
        )
    })?;
    let mut files = Vec::new();
    for entry in listing {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if let Some(kind) = kind_of(&name) {
            if fs::metadata(entry.path()).is_ok_and(|m| m.is_file()) {
                files.push((name, kind));
            }
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let results: Vec<FileResult> = files
        .par_iter()
        .map(|(name, kind)| load_file(dir, name, *kind, opts.hash))
        .collect();
    let mut loaded = Loaded {
        files: files.len(),
        ..Loaded::default()
    };
    for ((name, _), r) in files.iter().zip(results) {
        loaded.spans.extend(r.spans);
        for (line, reason) in r.skipped {
            loaded.skipped += 1;
            if loaded.reasons.len() < opts.max_reasons {
                loaded.reasons.push(Skipped {
                    file: name.clone(),
                    line,
                    reason,
                });
            }
        }
    }
    Ok(loaded)
}

#[derive(Default)]
struct FileResult {
    spans: Vec<RecordedSpan>,
    skipped: Vec<(u64, String)>,
}

fn load_file(dir: &Path, name: &str, kind: Kind, algo: HashAlgorithm) -> FileResult {
    // One read buffer per thread, reused across files: freeing a large buffer per file makes
    // the allocator consolidate its free lists every time. Taken out while in use, since a
    // thread waiting inside the nested parallel loop below may start another file.
    thread_local! {
        static BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    }
    let mut data = BUFFER.with(|b| b.take());
    data.clear();
    let read = fs::File::open(dir.join(name)).and_then(|mut f| f.read_to_end(&mut data));
    let result = match read {
        Ok(_) => parse_file(&data, name, kind, algo),
        Err(e) => FileResult {
            spans: Vec::new(),
            skipped: vec![(0, format!("cannot read the file: {e}"))],
        },
    };
    BUFFER.with(|b| b.set(data));
    result
}

fn parse_file(data: &[u8], name: &str, kind: Kind, algo: HashAlgorithm) -> FileResult {
    let file: Arc<str> = name.into();
    let (records, tail) = match kind {
        Kind::Jsonl => (split_lines(data), None),
        Kind::Proto => split_delimited(data),
    };
    let parsed: Vec<Result<RecordedSpan, String>> = records
        .par_iter()
        .with_min_len(64)
        .map(|r| {
            let source = Source {
                file: Arc::clone(&file),
                line: r.number,
            };
            let span = match kind {
                Kind::Jsonl => parse_line(r.bytes, algo, source),
                Kind::Proto => parse_record(r.bytes, algo, source),
            };
            span.map_err(|e| {
                if r.torn {
                    format!("torn last line (no newline at the end of the file): {e}")
                } else {
                    e
                }
            })
        })
        .collect();
    let mut out = FileResult::default();
    for (r, p) in records.iter().zip(parsed) {
        match p {
            Ok(span) => out.spans.push(span),
            Err(e) => out.skipped.push((r.number, e)),
        }
    }
    out.skipped.extend(tail);
    out
}

struct RawRecord<'a> {
    number: u64,
    bytes: &'a [u8],
    /// The last line of a file that does not end with a newline: a write may have been cut.
    torn: bool,
}

/// Non-blank lines, numbered from 1.
fn split_lines(data: &[u8]) -> Vec<RawRecord<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut number = 0;
    while start < data.len() {
        number += 1;
        let (end, next, torn) = match memchr::memchr(b'\n', &data[start..]) {
            Some(i) => (start + i, start + i + 1, false),
            None => (data.len(), data.len(), true),
        };
        let bytes = data[start..end].trim_ascii();
        if !bytes.is_empty() {
            out.push(RawRecord {
                number,
                bytes,
                torn,
            });
        }
        start = next;
    }
    out
}

/// Varint-length-delimited messages, numbered from 1. A length that runs past the end of the
/// file ends the file (the framing cannot be trusted after it) and is reported.
fn split_delimited(data: &[u8]) -> (Vec<RawRecord<'_>>, Option<(u64, String)>) {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut number = 0;
    while pos < data.len() {
        number += 1;
        let Some((len, at)) = read_varint(data, pos) else {
            let msg = format!("record at byte {pos}: truncated or invalid length prefix; the rest of the file was skipped");
            return (out, Some((number, msg)));
        };
        let left = data.len() - at;
        if len > left as u64 {
            let msg = format!(
                "record at byte {pos} claims {len} bytes but {left} are left (torn write or not a length-delimited span file); the rest of the file was skipped"
            );
            return (out, Some((number, msg)));
        }
        let end = at + len as usize;
        out.push(RawRecord {
            number,
            bytes: &data[at..end],
            torn: false,
        });
        pos = end;
    }
    (out, None)
}

fn read_varint(data: &[u8], mut pos: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *data.get(pos)?;
        pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some((v, pos));
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// JSONL (`CleanSpanData`, camelCase)

/// The `CleanSpanData` keys replay reads. Scalars whose type varies between recorders
/// (numbers vs numeric strings, `{seconds,nanos}` vs `[s, ns]`) are read loosely.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    trace_id: Option<String>,
    span_id: Option<String>,
    parent_span_id: Option<String>,
    name: Option<String>,
    package_name: Option<String>,
    instrumentation_name: Option<String>,
    submodule_name: Option<String>,
    #[serde(borrow)]
    package_type: Option<&'a RawValue>,
    #[serde(borrow)]
    input_value: Option<&'a RawValue>,
    #[serde(borrow)]
    output_value: Option<&'a RawValue>,
    #[serde(borrow)]
    input_schema: Option<SchemaLine<'a>>,
    input_schema_hash: Option<String>,
    input_value_hash: Option<String>,
    #[serde(borrow)]
    kind: Option<&'a RawValue>,
    #[serde(borrow)]
    status: Option<StatusLine<'a>>,
    is_pre_app_start: Option<bool>,
    is_root_span: Option<bool>,
    #[serde(borrow)]
    timestamp: Option<&'a RawValue>,
    #[serde(borrow)]
    duration: Option<&'a RawValue>,
    #[serde(borrow)]
    metadata: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct SchemaLine<'a> {
    #[serde(borrow, rename = "type")]
    ty: Option<&'a RawValue>,
    #[serde(borrow)]
    properties: Option<BTreeMap<String, Option<PropLine<'a>>>>,
}

/// A top-level property's merge keys, in either spelling (JS camelCase, Rust snake_case).
#[derive(Deserialize)]
struct PropLine<'a> {
    #[serde(borrow)]
    encoding: Option<&'a RawValue>,
    #[serde(borrow, rename = "decodedType")]
    decoded_type: Option<&'a RawValue>,
    #[serde(borrow, rename = "decoded_type")]
    decoded_type_snake: Option<&'a RawValue>,
    #[serde(borrow, rename = "matchImportance")]
    match_importance: Option<&'a RawValue>,
    #[serde(borrow, rename = "match_importance")]
    match_importance_snake: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct StatusLine<'a> {
    #[serde(borrow)]
    code: Option<&'a RawValue>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct TimeLine<'a> {
    #[serde(borrow)]
    seconds: Option<&'a RawValue>,
    #[serde(borrow)]
    nanos: Option<&'a RawValue>,
}

/// A number, or a string holding one (protobuf JSON writes int64 as strings).
fn loose_num(v: Option<&RawValue>) -> Option<f64> {
    let s = v?.get();
    s.parse::<f64>()
        .ok()
        .or_else(|| serde_json::from_str::<String>(s).ok()?.trim().parse().ok())
        .filter(|n| n.is_finite())
}

fn loose_int(v: Option<&RawValue>) -> i32 {
    loose_num(v)
        .filter(|n| n.fract() == 0.0 && n.abs() <= i32::MAX as f64)
        .map_or(0, |n| n as i32)
}

fn loose_time(v: Option<&RawValue>) -> Option<Time> {
    let text = v?.get();
    let (s, n) = if text.starts_with('[') {
        let parts: Vec<&RawValue> = serde_json::from_str(text).ok()?;
        (
            loose_num(parts.first().copied())?,
            loose_num(parts.get(1).copied()),
        )
    } else {
        let t: TimeLine = serde_json::from_str(text).ok()?;
        (loose_num(t.seconds)?, loose_num(t.nanos))
    };
    Some((s as i64, n.unwrap_or(0.0) as i32))
}

fn non_empty(s: Option<String>, what: &str) -> Result<String, String> {
    s.filter(|s| !s.is_empty())
        .ok_or_else(|| format!("missing {what}"))
}

fn parse_line(bytes: &[u8], algo: HashAlgorithm, source: Source) -> Result<RecordedSpan, String> {
    let line: Line = serde_json::from_slice(bytes).map_err(|e| format!("not a span: {e}"))?;
    let input = line.input_value.ok_or("missing inputValue")?.get();
    let is_object = input.starts_with('{');
    let (props, schema_type) = match &line.input_schema {
        None => (Vec::new(), None),
        Some(s) => (
            s.properties
                .iter()
                .flatten()
                .filter_map(|(k, p)| {
                    let p = p.as_ref()?;
                    Some((
                        k.clone(),
                        MergeFields {
                            encoding: loose_num(p.encoding),
                            decoded_type: loose_num(p.decoded_type.or(p.decoded_type_snake)),
                            match_importance: loose_num(
                                p.match_importance.or(p.match_importance_snake),
                            ),
                        },
                    ))
                })
                .collect(),
            loose_num(s.ty),
        ),
    };
    let spread = !is_object && schema_type == Some(types::OBJECT as f64);
    let merges = recover_merges(props, spread)?;
    let (hashes, canonical) = hash_input(input.as_bytes(), merges.as_deref(), algo)?;
    let status = line.status.as_ref();
    let trace_id = non_empty(line.trace_id, "traceId")?;
    let span_id = non_empty(line.span_id, "spanId")?;
    let status_message = status.and_then(|s| s.message.as_deref());
    let text = SpanText::new(&SpanStrings {
        output_value: line.output_value.map_or("{}", RawValue::get),
        metadata: line.metadata.map(RawValue::get),
        trace_id: &trace_id,
        span_id: &span_id,
        name: line.name.as_deref().unwrap_or_default(),
        package_name: line.package_name.as_deref().unwrap_or_default(),
        parent_span_id: line.parent_span_id.as_deref().unwrap_or_default(),
        instrumentation_name: line.instrumentation_name.as_deref().unwrap_or_default(),
        submodule_name: line.submodule_name.as_deref().unwrap_or_default(),
        status_message: status_message.unwrap_or_default(),
        stored_value_hash: line.input_value_hash.as_deref().unwrap_or_default(),
        stored_schema_hash: line.input_schema_hash.as_deref().unwrap_or_default(),
    })?;
    Ok(RecordedSpan {
        text,
        package_type: loose_int(line.package_type),
        kind: loose_int(line.kind),
        status_code: loose_int(status.and_then(|s| s.code)),
        is_pre_app_start: line.is_pre_app_start.unwrap_or(false),
        is_root_span: line.is_root_span.unwrap_or(false),
        timestamp: loose_time(line.timestamp),
        duration: loose_time(line.duration),
        input_canonical: canonical,
        hashes,
        source,
        trace_no: 0,
        package_no: 0,
        no: 0,
        shape: OnceLock::new(),
    })
}

// ---------------------------------------------------------------------------------------------
// Protobuf (`tusk.drift.core.v1.Span`)

fn parse_record(bytes: &[u8], algo: HashAlgorithm, source: Source) -> Result<RecordedSpan, String> {
    let span =
        pb::Span::decode(bytes).map_err(|e| format!("not a tusk.drift.core.v1.Span: {e}"))?;
    // Values and metadata straight from the wire, in recorded key order (see struct_json).
    let [input, output, metadata] = len_fields(bytes, [9, 10, 23])
        .map_err(|e| format!("not a tusk.drift.core.v1.Span: {e}"))?;
    let json = |b: Option<&[u8]>, what: &str| -> Result<String, String> {
        let mut out = Vec::with_capacity(b.map_or(2, |b| b.len() + 16));
        struct_to_json(b.unwrap_or_default(), &mut out).map_err(|e| format!("{what}: {e}"))?;
        String::from_utf8(out).map_err(|e| format!("{what}: {e}"))
    };
    let input_json = json(input, "input_value")?;
    let props = span
        .input_schema
        .as_ref()
        .map(|s| {
            s.properties
                .iter()
                .map(|(k, p)| {
                    (
                        k.clone(),
                        MergeFields {
                            encoding: p.encoding.map(f64::from),
                            decoded_type: p.decoded_type.map(f64::from),
                            match_importance: p.match_importance,
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    // A Struct is always an object, so the spread case of non-object roots cannot arise.
    let merges = recover_merges(props, false)?;
    let (hashes, canonical) = hash_input(input_json.as_bytes(), merges.as_deref(), algo)?;
    let trace_id = non_empty(Some(span.trace_id), "trace_id")?;
    let span_id = non_empty(Some(span.span_id), "span_id")?;
    let output_value = json(output, "output_value")?;
    let metadata = match metadata {
        Some(m) if !m.is_empty() => Some(json(Some(m), "metadata")?),
        _ => None,
    };
    let status = span.status.unwrap_or_default();
    let text = SpanText::new(&SpanStrings {
        output_value: &output_value,
        metadata: metadata.as_deref(),
        trace_id: &trace_id,
        span_id: &span_id,
        name: &span.name,
        package_name: &span.package_name,
        parent_span_id: &span.parent_span_id,
        instrumentation_name: &span.instrumentation_name,
        submodule_name: &span.submodule_name,
        status_message: &status.message,
        stored_value_hash: &span.input_value_hash,
        stored_schema_hash: &span.input_schema_hash,
    })?;
    Ok(RecordedSpan {
        text,
        package_type: span.package_type,
        kind: span.kind,
        status_code: status.code,
        is_pre_app_start: span.is_pre_app_start,
        is_root_span: span.is_root_span,
        timestamp: span.timestamp.map(|t| (t.seconds, t.nanos)),
        duration: span.duration.map(|d| (d.seconds, d.nanos)),
        input_canonical: canonical,
        hashes,
        source,
        trace_no: 0,
        package_no: 0,
        no: 0,
        shape: OnceLock::new(),
    })
}

// ---------------------------------------------------------------------------------------------
// Merges and hashes

/// The merge keys found on one top-level property of a recorded input schema.
#[derive(Clone, Copy, Debug, Default)]
struct MergeFields {
    encoding: Option<f64>,
    decoded_type: Option<f64>,
    match_importance: Option<f64>,
}

/// Rebuilds the merge map the recorder applied from the properties that carry merge keys.
/// Keys are written in the JS spelling (`decodedType`, `matchImportance`, `0` not `0.0`),
/// the one replay requests use, whichever spelling the recorder stored. `spread`: the
/// recorder had a merge map although no property shows one (a non-object root hashed as
/// `{...value}`).
fn recover_merges(
    props: Vec<(String, MergeFields)>,
    spread: bool,
) -> Result<Option<Arc<Merges>>, String> {
    let mut json = Vec::new();
    for (key, f) in &props {
        let fields = [
            ("encoding", f.encoding),
            ("decodedType", f.decoded_type),
            ("matchImportance", f.match_importance),
        ];
        if fields.iter().all(|(_, v)| v.is_none()) {
            continue;
        }
        json.push(if json.is_empty() { b'{' } else { b',' });
        write_json_str(&mut json, key);
        json.extend_from_slice(b":{");
        let mut first = true;
        for (name, v) in fields {
            let Some(v) = v else { continue };
            if !first {
                json.push(b',');
            }
            first = false;
            write_json_str(&mut json, name);
            json.push(b':');
            write_js_number(&mut json, v);
        }
        json.push(b'}');
    }
    if json.is_empty() {
        return Ok(spread.then(Default::default));
    }
    json.push(b'}');
    hashing::parse_merges(&json)
        .map(Some)
        .map_err(|e| format!("inputSchema: unusable merge settings: {e}"))
}

fn hash_input(
    json: &[u8],
    merges: Option<&Merges>,
    algo: HashAlgorithm,
) -> Result<(SpanHashes, Box<[u8]>), String> {
    let h = hashing::hashes(json, merges, algo).map_err(|e| format!("inputValue: {e}"))?;
    let hashes = SpanHashes {
        value: h.value,
        schema: h.schema,
        reduced_value: h.reduced_value,
        reduced_schema: h.reduced_schema,
    };
    Ok((hashes, h.canonical.into_boxed_slice()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Source {
        Source {
            file: "t.jsonl".into(),
            line: 1,
        }
    }

    #[test]
    fn lines_are_numbered_and_the_torn_tail_is_flagged() {
        let recs = split_lines(b"a\n\n  \nb\r\nc");
        let v: Vec<_> = recs.iter().map(|r| (r.number, r.bytes, r.torn)).collect();
        assert_eq!(
            v,
            vec![
                (1, &b"a"[..], false),
                (4, &b"b"[..], false),
                (5, &b"c"[..], true)
            ]
        );
    }

    #[test]
    fn delimited_framing_stops_at_a_bad_length() {
        let (recs, tail) = split_delimited(&[2, 1, 2, 1, 9, 5, 1]);
        assert_eq!(recs.len(), 2);
        assert!(tail.unwrap().1.contains("claims 5 bytes but 1 are left"));
        let (recs, tail) = split_delimited(&[0x80]);
        assert!(recs.is_empty() && tail.unwrap().1.contains("length prefix"));
    }

    #[test]
    fn snake_case_rust_core_schemas_recover_the_js_merges() {
        let algo = HashAlgorithm::Sha256;
        // Tusk Rust core schema keys (`match_importance: 0.0`, `decoded_type`).
        let line = br#"{"traceId":"t","spanId":"s","inputValue":{"text":"SELECT $1","values":[42]},
            "inputSchema":{"type":6,"properties":{"text":{"type":2,"properties":{}},
            "values":{"type":7,"properties":{},"match_importance":0.0}}},"timestamp":[3,4]}"#;
        let span = parse_line(line, algo, source()).unwrap();
        // §7 TV2, JS form.
        assert_eq!(
            span.value_hash_hex(),
            "2c3e9a035824dff185a0ffad5b044307bf2d123f487c8afb4bdbd7ac57d87c20"
        );
        assert_eq!(
            span.schema_hash_hex(),
            "bd8d7c8de7c78412b3c53258af006fa1cf43b101ef549899a8e388950a5a190f"
        );
        assert_eq!(span.timestamp, Some((3, 4)));
        assert_ne!(span.hashes.reduced_value, span.hashes.value);
    }

    #[test]
    fn base64_bodies_hash_decoded() {
        let line = br#"{"traceId":"t","spanId":"s","inputValue":{"method":"POST","headers":{"content-type":"application/json"},"body":"eyJrIjoidiJ9"},
            "inputSchema":{"type":6,"properties":{"body":{"type":6,"encoding":1,"decodedType":1,"properties":{}},
            "headers":{"type":6,"matchImportance":0,"properties":{}},"method":{"type":2,"properties":{}}}},
            "timestamp":{"seconds":"5","nanos":6}}"#;
        let span = parse_line(line, HashAlgorithm::Sha256, source()).unwrap();
        // §7 TV3.
        assert_eq!(
            span.value_hash_hex(),
            "d5b30f5201ae23f8736fd9c2da2750ad946fa3716ae873e74f597c943dffff9a"
        );
        assert_eq!(
            span.schema_hash_hex(),
            "e3afd1fcd38fc046cf9c62c6d2a4cb194bac52b0993c0a5510b279df9cd8d1da"
        );
        assert_eq!(span.timestamp, Some((5, 6)));
    }

    #[test]
    fn bad_lines_say_why() {
        let e = |l: &[u8]| parse_line(l, HashAlgorithm::Blake3, source()).unwrap_err();
        assert!(e(b"{\"traceId\":").starts_with("not a span"));
        assert_eq!(e(br#"{"traceId":"t","spanId":"s"}"#), "missing inputValue");
        assert_eq!(e(br#"{"spanId":"s","inputValue":{}}"#), "missing traceId");
        assert!(e(br#"{"traceId":"t","spanId":"s","inputValue":{},"inputSchema":{"properties":{"a":{"encoding":1.5}}}}"#)
            .starts_with("inputSchema"));
    }
}
