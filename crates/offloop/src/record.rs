//! One span frame → its recorded forms: the protobuf `tusk.drift.core.v1.Span` and the
//! Tusk-style JSONL line (`CleanSpanData` keys, reference §1.2, §2.3).

use std::sync::{Arc, OnceLock};

use prost::Message;
use tusk_drift_schemas::tusk::drift::core::v1 as pb;

use crate::error::{display_id, Stage};
use crate::frame::{AttrValue, SpanFrame};
use crate::hash::HashAlgorithm;
use crate::json::escape::write_json_str;
use crate::json::number::write_js_number;
use crate::json::pb::put_len_prefixed;
use crate::merges::Merges;
use crate::payload::{self, Payload};
use crate::schema::Schema;

/// The Tusk attribute names.
pub mod attrs {
    /// Display name.
    pub const NAME: &str = "td.name";
    /// `PackageType` enum number.
    pub const PACKAGE_TYPE: &str = "td.packageType";
    /// `http`, `pg`, …
    pub const PACKAGE_NAME: &str = "td.packageName";
    /// Instrumentation class name.
    pub const INSTRUMENTATION_NAME: &str = "td.instrumentationName";
    /// `GET`, `query`, …
    pub const SUBMODULE: &str = "td.submodule";
    /// Recorded before the app was ready.
    pub const IS_PRE_APP_START: &str = "td.isPreAppStart";
    /// Input value (JSON string).
    pub const INPUT_VALUE: &str = "td.inputValue";
    /// Output value (JSON string).
    pub const OUTPUT_VALUE: &str = "td.outputValue";
    /// Input schema merges (JSON string).
    pub const INPUT_SCHEMA_MERGES: &str = "td.inputSchemaMerges";
    /// Output schema merges (JSON string).
    pub const OUTPUT_SCHEMA_MERGES: &str = "td.outputSchemaMerges";
    /// Free-form metadata (JSON string).
    pub const METADATA: &str = "td.metadata";
    /// Transform metadata (JSON string).
    pub const TRANSFORM_METADATA: &str = "td.transformMetadata";
}

/// Set by the JS shim on the frame of a span object it could not read; the value is why.
pub const INVALID_SPAN: &str = "offloop.invalidSpan";

/// OpenTelemetry `SpanKind.SERVER`.
pub const OTEL_KIND_SERVER: u8 = 1;
/// OpenTelemetry `SpanStatusCode.ERROR`.
pub const OTEL_STATUS_ERROR: u8 = 2;

/// Options that shape a record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Digest for value and schema hashes.
    pub hash: HashAlgorithm,
    /// Written as `environment` when set.
    pub environment: Option<String>,
    /// Build the JSONL line.
    pub jsonl: bool,
    /// Build the protobuf `Span`.
    pub proto: bool,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            hash: HashAlgorithm::default(),
            environment: None,
            jsonl: true,
            proto: true,
        }
    }
}

/// A recorded span.
#[derive(Clone, Debug)]
pub struct SpanRecord {
    /// Validated trace id (32 lower-case hex).
    pub trace_id: String,
    /// Validated span id (16 lower-case hex).
    pub span_id: String,
    /// Encoded `tusk.drift.core.v1.Span` (empty unless [`RecordOptions::proto`]).
    pub proto: Vec<u8>,
    /// The JSONL line, without the trailing newline (empty unless [`RecordOptions::jsonl`]).
    pub jsonl: Vec<u8>,
}

/// Why a span could not be recorded: the stage and a message naming the field.
pub type RecordError = (Stage, String);

/// Checks ids, enums and times. Ids become file names, so this is also the path guard.
pub fn validate(frame: &SpanFrame<'_>) -> Result<(), RecordError> {
    if let Some(AttrValue::Str(reason)) = frame.attr(INVALID_SPAN) {
        return Err((Stage::Frame, String::from_utf8_lossy(reason).into_owned()));
    }
    let bad = |m: String| Err((Stage::Validate, m));
    if !is_hex_id(frame.trace_id, 32) {
        return bad(format!(
            "traceId: expected 32 lower-case hex characters, got \"{}\" ({} bytes)",
            display_id(frame.trace_id),
            frame.trace_id.len()
        ));
    }
    if !is_hex_id(frame.span_id, 16) {
        return bad(format!(
            "spanId: expected 16 lower-case hex characters, got \"{}\" ({} bytes)",
            display_id(frame.span_id),
            frame.span_id.len()
        ));
    }
    if !frame.parent_span_id.is_empty() && !is_hex_id(frame.parent_span_id, 16) {
        return bad(format!(
            "parentSpanId: expected empty or 16 lower-case hex characters, got \"{}\"",
            display_id(frame.parent_span_id)
        ));
    }
    if frame.kind > 4 {
        return bad(match frame.kind {
            255 => "kind: missing or not an OpenTelemetry SpanKind (0..=4)".to_string(),
            k => format!("kind: {k} is not an OpenTelemetry SpanKind (0..=4)"),
        });
    }
    if frame.status_code > 2 {
        return bad(match frame.status_code {
            255 => "status.code: missing or not an OpenTelemetry status code (0..=2)".to_string(),
            c => format!("status.code: {c} is not an OpenTelemetry status code (0..=2)"),
        });
    }
    for (what, (sec, nanos)) in [("startTime", frame.start), ("duration", frame.duration)] {
        if !(sec.is_finite() && sec >= 0.0 && sec.fract() == 0.0 && sec < 1e15)
            || nanos >= 1_000_000_000
        {
            return bad(format!(
                "{what}: [{sec}, {nanos}] is not a valid [seconds, nanos] time"
            ));
        }
    }
    Ok(())
}

fn is_hex_id(id: &str, len: usize) -> bool {
    id.len() == len
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && id.bytes().any(|b| b != b'0')
}

/// The bytes of `td.inputValue` + `td.outputValue`, for the size filter.
pub fn payload_bytes(frame: &SpanFrame<'_>) -> usize {
    [attrs::INPUT_VALUE, attrs::OUTPUT_VALUE]
        .iter()
        .map(|k| match frame.attr(k) {
            Some(AttrValue::Str(s)) | Some(AttrValue::IllFormed(s)) | Some(AttrValue::Json(s)) => {
                s.len()
            }
            _ => 0,
        })
        .sum()
}

/// Records one validated span.
pub fn record(frame: &SpanFrame<'_>, opts: &RecordOptions) -> Result<SpanRecord, RecordError> {
    let algo = opts.hash;
    let want = payload::Want {
        struct_bytes: opts.proto,
        canonical: false,
    };
    let input = match frame.attr(attrs::INPUT_VALUE) {
        None => {
            // No td.inputValue: the span's other attributes are its input value.
            let json = other_attributes_json(frame);
            payload::process_with(&json, None, algo, want)
                .map_err(|e| (Stage::Input, format!("attributes: {e}")))?
        }
        Some(v) => {
            let json = json_attr(attrs::INPUT_VALUE, v).map_err(|e| (Stage::Input, e))?;
            let merges =
                merges_attr(frame, attrs::INPUT_SCHEMA_MERGES).map_err(|e| (Stage::Input, e))?;
            payload::process_with(json, merges.as_deref(), algo, want)
                .map_err(|e| (Stage::Input, format!("{}: {e}", attrs::INPUT_VALUE)))?
        }
    };
    let output_attr = frame
        .attr(attrs::OUTPUT_VALUE)
        .filter(|v| !matches!(v, AttrValue::Str(s) if s.is_empty()));
    let output_owned;
    let output: &Payload = match output_attr {
        None => empty_output(algo),
        Some(v) => {
            let json = json_attr(attrs::OUTPUT_VALUE, v).map_err(|e| (Stage::Output, e))?;
            let merges =
                merges_attr(frame, attrs::OUTPUT_SCHEMA_MERGES).map_err(|e| (Stage::Output, e))?;
            output_owned = payload::process_with(json, merges.as_deref(), algo, want)
                .map_err(|e| (Stage::Output, format!("{}: {e}", attrs::OUTPUT_VALUE)))?;
            &output_owned
        }
    };
    let metadata = match frame.attr(attrs::METADATA) {
        None => None,
        Some(v) => {
            let json = json_attr(attrs::METADATA, v).map_err(|e| (Stage::Attributes, e))?;
            Some(
                payload::encode_value(json)
                    .map_err(|e| (Stage::Attributes, format!("{}: {e}", attrs::METADATA)))?,
            )
        }
    };
    // Like the reference, unreadable transform metadata is left out rather than failing the span.
    let transform_metadata = match frame.attr(attrs::TRANSFORM_METADATA) {
        Some(AttrValue::Str(s)) => payload::encode_value(s).ok().map(|(json, _)| json),
        _ => None,
    };

    let fields = Fields::from_frame(frame).map_err(|e| (Stage::Attributes, e))?;
    let mut proto = Vec::new();
    if opts.proto {
        proto = encode_proto(
            frame,
            &fields,
            &input,
            output,
            metadata.as_ref().map(|m| &m.1[..]),
            opts,
        );
    }
    let mut line = Vec::new();
    if opts.jsonl {
        line.reserve(input.value_json.len() + output.value_json.len() + 1024);
        let metadata = metadata.as_ref().map(|m| &m.0[..]);
        write_jsonl(
            &mut line,
            frame,
            &fields,
            &input,
            output,
            metadata,
            transform_metadata.as_deref(),
            opts,
        );
    }
    Ok(SpanRecord {
        trace_id: frame.trace_id.to_string(),
        span_id: frame.span_id.to_string(),
        proto,
        jsonl: line,
    })
}

fn empty_output(algo: HashAlgorithm) -> &'static Payload {
    static BLAKE3: OnceLock<Payload> = OnceLock::new();
    static SHA256: OnceLock<Payload> = OnceLock::new();
    let cell = match algo {
        HashAlgorithm::Blake3 => &BLAKE3,
        HashAlgorithm::Sha256 => &SHA256,
    };
    cell.get_or_init(|| Payload::empty_object(algo))
}

fn json_attr<'a>(key: &str, v: &AttrValue<'a>) -> Result<&'a [u8], String> {
    match v {
        AttrValue::Str(s) => Ok(s),
        AttrValue::IllFormed(_) => Err(format!(
            "{key}: string is not well-formed UTF-16 (it contains a lone surrogate) and cannot be encoded as UTF-8"
        )),
        other => Err(format!("{key}: expected a JSON string attribute, got {}", attr_type(other))),
    }
}

fn merges_attr(frame: &SpanFrame<'_>, key: &str) -> Result<Option<Arc<Merges>>, String> {
    match frame.attr(key) {
        None => Ok(None),
        Some(v) => {
            let json = json_attr(key, v)?;
            if json.is_empty() {
                return Ok(None);
            }
            Merges::parse_shared(json)
                .map(Some)
                .map_err(|e| format!("{key}: {e}"))
        }
    }
}

fn attr_type(v: &AttrValue<'_>) -> &'static str {
    match v {
        AttrValue::Str(_) | AttrValue::IllFormed(_) => "a string",
        AttrValue::Num(_) => "a number",
        AttrValue::Bool(_) => "a boolean",
        AttrValue::StrArray(_)
        | AttrValue::NumArray(_)
        | AttrValue::BoolArray(_)
        | AttrValue::Json(_) => "an array",
    }
}

/// `{ key: value, … }` of the non-`td.` attributes, in span order.
fn other_attributes_json(frame: &SpanFrame<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(b'{');
    let mut first = true;
    for (k, v) in &frame.attrs {
        if k.starts_with("td.") {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        write_json_str(&mut out, k);
        out.push(b':');
        let s = |out: &mut Vec<u8>, b: &[u8]| write_json_str(out, &String::from_utf8_lossy(b));
        match v {
            AttrValue::Str(b) | AttrValue::IllFormed(b) => s(&mut out, b),
            AttrValue::Num(n) => write_js_number(&mut out, *n),
            AttrValue::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            AttrValue::Json(b) => {
                if payload::encode_value(b).is_ok() {
                    out.extend_from_slice(b)
                } else {
                    s(&mut out, b)
                }
            }
            AttrValue::StrArray(xs) => list(&mut out, xs.iter(), |o, b| s(o, b)),
            AttrValue::NumArray(xs) => list(&mut out, xs.iter(), |o, n| write_js_number(o, *n)),
            AttrValue::BoolArray(xs) => list(&mut out, xs.iter(), |o, b| {
                o.extend_from_slice(if *b { b"true" } else { b"false" })
            }),
        }
    }
    out.push(b'}');
    out
}

fn list<T>(out: &mut Vec<u8>, items: impl Iterator<Item = T>, mut f: impl FnMut(&mut Vec<u8>, T)) {
    out.push(b'[');
    for (i, x) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        f(out, x);
    }
    out.push(b']');
}

/// The scalar fields the reference derives from attributes, with its defaults.
struct Fields<'a> {
    name: std::borrow::Cow<'a, str>,
    package_name: std::borrow::Cow<'a, str>,
    instrumentation_name: String,
    submodule_name: std::borrow::Cow<'a, str>,
    package_type: i32,
    is_pre_app_start: bool,
}

impl<'a> Fields<'a> {
    fn from_frame(frame: &SpanFrame<'a>) -> Result<Fields<'a>, String> {
        let text = |key: &str| -> Result<Option<std::borrow::Cow<'a, str>>, String> {
            match frame.attr(key) {
                None => Ok(None),
                Some(AttrValue::Str(b)) | Some(AttrValue::IllFormed(b)) if b.is_empty() => Ok(None),
                Some(AttrValue::Str(b)) | Some(AttrValue::IllFormed(b)) => {
                    Ok(Some(String::from_utf8_lossy(b)))
                }
                Some(other) => Err(format!(
                    "{key}: expected a string, got {}",
                    attr_type(other)
                )),
            }
        };
        let package_name = text(attrs::PACKAGE_NAME)?.unwrap_or("unknown".into());
        let instrumentation_name = match text(attrs::INSTRUMENTATION_NAME)? {
            Some(n) => n.into_owned(),
            None if !frame.scope_name.is_empty() => {
                format!("tusk-instrumentation-{}", frame.scope_name)
            }
            None => format!("tusk-instrumentation-{package_name}"),
        };
        let package_type = match frame.attr(attrs::PACKAGE_TYPE) {
            None => 0,
            Some(AttrValue::Num(n)) if n.fract() == 0.0 && *n >= 0.0 && *n <= i32::MAX as f64 => {
                *n as i32
            }
            Some(other) => {
                return Err(format!(
                    "{}: expected a PackageType enum number, got {}",
                    attrs::PACKAGE_TYPE,
                    match other {
                        AttrValue::Num(n) => n.to_string(),
                        o => attr_type(o).to_string(),
                    }
                ))
            }
        };
        Ok(Fields {
            name: text(attrs::NAME)?.unwrap_or(std::borrow::Cow::Borrowed(frame.name)),
            package_name,
            instrumentation_name,
            submodule_name: text(attrs::SUBMODULE)?.unwrap_or_default(),
            package_type,
            is_pre_app_start: matches!(
                frame.attr(attrs::IS_PRE_APP_START),
                Some(AttrValue::Bool(true))
            ),
        })
    }
}

/// Status mapping of the reference: only OK stays OK; UNSET and ERROR become ERROR.
fn status_code(frame: &SpanFrame<'_>) -> i32 {
    if frame.status_code == 1 {
        pb::StatusCode::Ok as i32
    } else {
        pb::StatusCode::Error as i32
    }
}

fn encode_proto(
    frame: &SpanFrame<'_>,
    f: &Fields<'_>,
    input: &Payload,
    output: &Payload,
    metadata_struct: Option<&[u8]>,
    opts: &RecordOptions,
) -> Vec<u8> {
    let span = pb::Span {
        trace_id: frame.trace_id.to_string(),
        span_id: frame.span_id.to_string(),
        parent_span_id: frame.parent_span_id.to_string(),
        name: f.name.to_string(),
        package_name: f.package_name.to_string(),
        instrumentation_name: f.instrumentation_name.clone(),
        submodule_name: f.submodule_name.to_string(),
        package_type: f.package_type,
        input_value: None,
        output_value: None,
        input_schema: Some(input.schema.to_proto()),
        output_schema: Some(output.schema.to_proto()),
        input_schema_hash: input.schema_hash.clone(),
        output_schema_hash: output.schema_hash.clone(),
        input_value_hash: input.value_hash.clone(),
        output_value_hash: output.value_hash.clone(),
        kind: frame.kind as i32 + 1,
        status: Some(pb::SpanStatus {
            code: status_code(frame),
            message: frame.status_message.to_string(),
        }),
        is_pre_app_start: f.is_pre_app_start,
        timestamp: Some(prost_types::Timestamp {
            seconds: frame.start.0 as i64,
            nanos: frame.start.1 as i32,
        }),
        duration: Some(prost_types::Duration {
            seconds: frame.duration.0 as i64,
            nanos: frame.duration.1 as i32,
        }),
        is_root_span: frame.kind == OTEL_KIND_SERVER,
        metadata: None,
        environment: opts.environment.clone(),
        id: None,
    };
    let mut buf = Vec::with_capacity(
        span.encoded_len() + input.struct_bytes.len() + output.struct_bytes.len() + 32,
    );
    span.encode(&mut buf).expect("Vec has capacity");
    // The value Structs were encoded while walking the JSON; append them as fields 9, 10, 23
    // (protobuf fields may come in any order).
    put_len_prefixed(&mut buf, 9, &input.struct_bytes);
    put_len_prefixed(&mut buf, 10, &output.struct_bytes);
    put_len_prefixed(&mut buf, 23, metadata_struct.unwrap_or_default());
    buf
}

#[allow(clippy::too_many_arguments)]
fn write_jsonl(
    out: &mut Vec<u8>,
    frame: &SpanFrame<'_>,
    f: &Fields<'_>,
    input: &Payload,
    output: &Payload,
    metadata_json: Option<&[u8]>,
    transform_metadata: Option<&[u8]>,
    opts: &RecordOptions,
) {
    let key = |out: &mut Vec<u8>, k: &str| {
        out.push(b',');
        write_json_str(out, k);
        out.push(b':');
    };
    let schema = |out: &mut Vec<u8>, s: &Schema| s.write_canonical(out);
    out.extend_from_slice(b"{\"traceId\":");
    write_json_str(out, frame.trace_id);
    key(out, "spanId");
    write_json_str(out, frame.span_id);
    key(out, "parentSpanId");
    write_json_str(out, frame.parent_span_id);
    key(out, "name");
    write_json_str(out, &f.name);
    key(out, "packageName");
    write_json_str(out, &f.package_name);
    key(out, "instrumentationName");
    write_json_str(out, &f.instrumentation_name);
    key(out, "submoduleName");
    write_json_str(out, &f.submodule_name);
    if f.package_type != 0 {
        key(out, "packageType");
        out.extend_from_slice(f.package_type.to_string().as_bytes());
    }
    if let Some(env) = &opts.environment {
        key(out, "environment");
        write_json_str(out, env);
    }
    key(out, "inputValue");
    out.extend_from_slice(&input.value_json);
    key(out, "outputValue");
    out.extend_from_slice(&output.value_json);
    key(out, "inputSchema");
    schema(out, &input.schema);
    key(out, "outputSchema");
    schema(out, &output.schema);
    for (k, v) in [
        ("inputSchemaHash", &input.schema_hash),
        ("outputSchemaHash", &output.schema_hash),
        ("inputValueHash", &input.value_hash),
        ("outputValueHash", &output.value_hash),
    ] {
        key(out, k);
        write_json_str(out, v);
    }
    key(out, "kind");
    out.extend_from_slice((frame.kind as i32 + 1).to_string().as_bytes());
    key(out, "status");
    out.extend_from_slice(format!("{{\"code\":{},\"message\":", status_code(frame)).as_bytes());
    write_json_str(out, frame.status_message);
    out.push(b'}');
    key(out, "isPreAppStart");
    out.extend_from_slice(if f.is_pre_app_start {
        b"true"
    } else {
        b"false"
    });
    for (k, (sec, nanos)) in [("timestamp", frame.start), ("duration", frame.duration)] {
        key(out, k);
        out.extend_from_slice(
            format!("{{\"seconds\":{},\"nanos\":{}}}", sec as i64, nanos).as_bytes(),
        );
    }
    key(out, "isRootSpan");
    out.extend_from_slice(if frame.kind == OTEL_KIND_SERVER {
        b"true"
    } else {
        b"false"
    });
    if let Some(m) = metadata_json {
        key(out, "metadata");
        out.extend_from_slice(m);
    }
    if let Some(m) = transform_metadata {
        key(out, "transformMetadata");
        out.extend_from_slice(m);
    }
    out.push(b'}');
}
