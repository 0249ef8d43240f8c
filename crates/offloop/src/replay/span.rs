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

/// Declares the packed string fields once: [`SpanStrings`] (what a loader hands over), their
/// order in [`SpanText`]'s buffer (output and metadata first, then as listed) and the
/// accessors on [`RecordedSpan`].
macro_rules! span_strings {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// The strings of a span as a loader reads them, before they are packed into a
        /// [`SpanText`].
        pub(crate) struct SpanStrings<'a> {
            pub output_value: &'a str,
            pub metadata: Option<&'a str>,
            $( pub $name: &'a str, )*
        }

        /// Field positions in a [`SpanText`].
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        enum Field {
            output_value,
            metadata,
            $( $name, )*
        }

        const FIELDS: usize = 2 + [$(Field::$name),*].len();

        impl SpanStrings<'_> {
            /// The fields in buffer order (`""` for no metadata).
            fn in_order(&self) -> [&str; FIELDS] {
                [self.output_value, self.metadata.unwrap_or_default(), $( self.$name, )*]
            }
        }

        impl RecordedSpan {
            $(
                $(#[$doc])*
                pub fn $name(&self) -> &str {
                    self.text.field(Field::$name)
                }
            )*
        }
    };
}

span_strings! {
    /// Trace id.
    trace_id,
    /// Span id.
    span_id,
    /// Display name (`pg.query`, `/api/users`, …).
    name,
    /// `http`, `pg`, …
    package_name,
    /// Parent span id (`""` for a root).
    parent_span_id,
    /// Instrumentation class name.
    instrumentation_name,
    /// `GET`, `query`, …
    submodule_name,
    /// Status message.
    status_message,
    /// `inputValueHash` as stored in the file (reporting only; may use another algorithm).
    stored_value_hash,
    /// `inputSchemaHash` as stored in the file (reporting only).
    stored_schema_hash,
}

/// A span's strings packed into one allocation, the ones a mock answer reads first (output,
/// metadata, trace and span id, name, package). Why: a replay answers spans of a large
/// recording in any order, so every span it answers is cold in the cache, and with a `String`
/// per field each field read was a cache miss of its own: the answer's reads were a fifth of a
/// `findMock` call on a 100k-span recording. Packed, they are a few adjacent cache lines.
#[derive(Debug)]
pub(crate) struct SpanText {
    buf: Box<str>,
    /// End offset of each field in `buf`, in [`Field`] order (metadata's end equals the
    /// output's when there is none).
    ends: [u32; FIELDS],
    has_metadata: bool,
}

impl SpanText {
    pub(crate) fn new(s: &SpanStrings<'_>) -> Result<Self, String> {
        let fields = s.in_order();
        let total: usize = fields.iter().map(|f| f.len()).sum();
        if u32::try_from(total).is_err() {
            return Err(format!("span of {total} bytes: larger than 4 GiB"));
        }
        let mut buf = String::with_capacity(total);
        let mut ends = [0u32; FIELDS];
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

    fn field(&self, f: Field) -> &str {
        let i = f as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.buf[start..self.ends[i] as usize]
    }
}

impl RecordedSpan {
    /// The recorded output value as JSON text (what a mock answers with).
    pub fn output_value(&self) -> &str {
        self.text.field(Field::output_value)
    }

    /// The recorded metadata as JSON text.
    pub fn metadata(&self) -> Option<&str> {
        self.text
            .has_metadata
            .then(|| self.text.field(Field::metadata))
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
