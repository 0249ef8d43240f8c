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
    /// Trace id.
    pub trace_id: String,
    /// Span id.
    pub span_id: String,
    /// Parent span id (`""` for a root).
    pub parent_span_id: String,
    /// Display name (`pg.query`, `/api/users`, …).
    pub name: String,
    /// `http`, `pg`, …
    pub package_name: String,
    /// Instrumentation class name.
    pub instrumentation_name: String,
    /// `GET`, `query`, …
    pub submodule_name: String,
    /// `PackageType` enum number (0 when absent).
    pub package_type: i32,
    /// Span kind as recorded (proto `SpanKind` for offloop, OTel kind for older Tusk files).
    pub kind: i32,
    /// `StatusCode` enum number.
    pub status_code: i32,
    /// Status message.
    pub status_message: String,
    /// Recorded before the app was ready.
    pub is_pre_app_start: bool,
    /// A SERVER span (the inbound request of its trace).
    pub is_root_span: bool,
    /// Start time; `None` sorts first, like the reference matcher.
    pub timestamp: Option<Time>,
    /// Duration.
    pub duration: Option<Time>,
    /// The recorded output value as JSON text (what a mock answers with).
    pub output_value: String,
    /// The recorded metadata as JSON text.
    pub metadata: Option<String>,
    /// Canonical JSON of the decoded input (UTF-8): what the value hash covers.
    pub input_canonical: Box<[u8]>,
    /// Hashes recomputed at load with the recording's algorithm.
    pub hashes: SpanHashes,
    /// `inputValueHash` as stored in the file (reporting only; may use another algorithm).
    pub stored_value_hash: String,
    /// `inputSchemaHash` as stored in the file (reporting only).
    pub stored_schema_hash: String,
    /// Where it was read from.
    pub source: Source,
    /// Position in [`crate::replay::Recording::spans`] (its flags live in the recording).
    pub(crate) no: u32,
    pub(crate) trace_no: u32,
    pub(crate) package_no: u32,
    pub(crate) shape: OnceLock<Shape>,
}

impl RecordedSpan {
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
