//! A recorded span as replay keeps it: what a mock answer needs (output, metadata, times,
//! ids), the look-up hashes recomputed at load, and the consume-once flag.

use std::sync::{Arc, OnceLock};

use super::hashing::{to_hex, Digest};
use super::shape::Shape;

/// `google.protobuf.Timestamp` / `Duration` as `(seconds, nanos)`.
pub type Time = (i64, i32);

/// Where a span was read from.
#[derive(Clone, Debug)]
pub struct Source {
    /// File name inside the recordings directory.
    pub file: Arc<str>,
    /// 1-based line (JSONL) or record number (protobuf).
    pub line: u64,
}

/// The four look-up hashes of a span's input, recomputed at load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanHashes {
    /// Input value hash.
    pub value: Digest,
    /// Input schema hash.
    pub schema: Digest,
    /// Input value hash without the `matchImportance: 0` fields.
    pub reduced_value: Digest,
    /// Input schema hash without the `matchImportance: 0` properties.
    pub reduced_schema: Digest,
}

/// A span loaded from a recording.
#[derive(Debug)]
pub struct RecordedSpan {
    /// Its strings (ids, names, output, metadata), in one allocation: see [`SpanText`].
    pub(crate) text: SpanText,
    /// `PackageType` enum number (0 when absent).
    pub package_type: i32,
    /// Span kind as recorded (proto `SpanKind` for offloop, OTel kind for older Tusk files).
    pub kind: i32,
    /// `StatusCode` enum number.
    pub status_code: i32,
    /// Recorded before the app was ready.
    pub is_pre_app_start: bool,
    /// A SERVER span (the inbound request of its trace).
    pub is_root_span: bool,
    /// Start time; `None` sorts first, like the reference matcher.
    pub timestamp: Option<Time>,
    /// Duration.
    pub duration: Option<Time>,
    /// Canonical JSON of the decoded input (UTF-8): what the value hash covers.
    pub input_canonical: Box<[u8]>,
    /// Hashes recomputed at load with the recording's algorithm.
    pub hashes: SpanHashes,
    /// Where it was read from.
    pub source: Source,
    /// Position in [`crate::replay::Recording::spans`] (its flags live in the recording).
    pub(crate) no: u32,
    pub(crate) trace_no: u32,
    pub(crate) package_no: u32,
    pub(crate) shape: OnceLock<Shape>,
}

/// The strings of a span as a loader reads them, before they are packed into a [`SpanText`].
pub(crate) struct SpanStrings<'a> {
    pub output_value: &'a str,
    pub metadata: Option<&'a str>,
    pub trace_id: &'a str,
    pub span_id: &'a str,
    pub name: &'a str,
    pub package_name: &'a str,
    pub parent_span_id: &'a str,
    pub instrumentation_name: &'a str,
    pub submodule_name: &'a str,
    pub status_message: &'a str,
    pub stored_value_hash: &'a str,
    pub stored_schema_hash: &'a str,
}

/// A span's strings packed into one allocation, the ones a mock answer reads first (output,
/// metadata, trace and span id, name, package). Why: a replay answers spans of a large
/// recording in any order, so every span it answers is cold in the cache, and with a `String`
/// per field each field read was a cache miss of its own: the answer's reads were a fifth of a
/// `findMock` call on a 100k-span recording. Packed, they are a few adjacent cache lines.
#[derive(Debug)]
pub(crate) struct SpanText {
    buf: Box<str>,
    /// End offset of each field in `buf`, in [`SpanStrings`] order (metadata's end equals
    /// the output's when there is none).
    ends: [u32; 12],
    has_metadata: bool,
}

impl SpanText {
    pub(crate) fn new(s: &SpanStrings<'_>) -> Result<Self, String> {
        let fields = [
            s.output_value,
            s.metadata.unwrap_or_default(),
            s.trace_id,
            s.span_id,
            s.name,
            s.package_name,
            s.parent_span_id,
            s.instrumentation_name,
            s.submodule_name,
            s.status_message,
            s.stored_value_hash,
            s.stored_schema_hash,
        ];
        let total: usize = fields.iter().map(|f| f.len()).sum();
        if u32::try_from(total).is_err() {
            return Err(format!("span of {total} bytes: larger than 4 GiB"));
        }
        let mut buf = String::with_capacity(total);
        let mut ends = [0u32; 12];
        for (end, field) in ends.iter_mut().zip(fields) {
            buf.push_str(field);
            *end = buf.len() as u32;
        }
        Ok(Self {
            buf: buf.into_boxed_str(),
            ends,
            has_metadata: s.metadata.is_some(),
        })
    }

    fn field(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.buf[start..self.ends[i] as usize]
    }
}

impl RecordedSpan {
    /// The recorded output value as JSON text (what a mock answers with).
    pub fn output_value(&self) -> &str {
        self.text.field(0)
    }

    /// The recorded metadata as JSON text.
    pub fn metadata(&self) -> Option<&str> {
        self.text.has_metadata.then(|| self.text.field(1))
    }

    /// Trace id.
    pub fn trace_id(&self) -> &str {
        self.text.field(2)
    }

    /// Span id.
    pub fn span_id(&self) -> &str {
        self.text.field(3)
    }

    /// Display name (`pg.query`, `/api/users`, …).
    pub fn name(&self) -> &str {
        self.text.field(4)
    }

    /// `http`, `pg`, …
    pub fn package_name(&self) -> &str {
        self.text.field(5)
    }

    /// Parent span id (`""` for a root).
    pub fn parent_span_id(&self) -> &str {
        self.text.field(6)
    }

    /// Instrumentation class name.
    pub fn instrumentation_name(&self) -> &str {
        self.text.field(7)
    }

    /// `GET`, `query`, …
    pub fn submodule_name(&self) -> &str {
        self.text.field(8)
    }

    /// Status message.
    pub fn status_message(&self) -> &str {
        self.text.field(9)
    }

    /// `inputValueHash` as stored in the file (reporting only; may use another algorithm).
    pub fn stored_value_hash(&self) -> &str {
        self.text.field(10)
    }

    /// `inputSchemaHash` as stored in the file (reporting only).
    pub fn stored_schema_hash(&self) -> &str {
        self.text.field(11)
    }

    /// The HTTP/GraphQL shape of the input, computed on first use.
    pub(crate) fn shape(&self) -> &Shape {
        self.shape.get_or_init(|| Shape::of(&self.input_canonical))
    }

    /// Recomputed input value hash, hex.
    pub fn value_hash_hex(&self) -> String {
        to_hex(&self.hashes.value)
    }

    /// Recomputed input schema hash, hex.
    pub fn schema_hash_hex(&self) -> String {
        to_hex(&self.hashes.schema)
    }
}
