//! The span frame: how the JS shim hands spans to native code.
//!
//! A batch is one buffer, so one native call carries any number of spans. Attribute strings
//! travel as their raw UTF-8 bytes (the JSON in `td.inputValue` is never re-stringified).
//! Every span is length-prefixed, so a malformed span is reported alone and the rest of the
//! batch still decodes. All integers are little-endian.
//!
//! ```text
//! batch  := "OFL1" count:u32 { len:u32 span[len] }*count
//! span   := trace_id:str span_id:str parent_span_id:str kind:u8 status_code:u8
//!           start_sec:f64 start_nanos:u32 duration_sec:f64 duration_nanos:u32
//!           name:str status_message:str scope_name:str attr_count:u32 attr*
//! attr   := key:str type:u8 value
//! value  := 1 str | 2 f64 | 3 u8 (bool) | 4 n:u32 str*n | 5 n:u32 f64*n | 6 n:u32 u8*n
//!         | 7 str (JSON text of an attribute value with no frame type, e.g. arrays with nulls)
//!         | 8 str (a string the shim found ill-formed: lone UTF-16 surrogates were replaced)
//! str    := len:u32 bytes[len]
//! ```
//!
//! `kind` and `status_code` are the OpenTelemetry enums (`SpanKind` 0..=4, `SpanStatusCode`
//! 0 UNSET, 1 OK, 2 ERROR).

/// Magic bytes at the start of a batch.
pub const MAGIC: &[u8; 4] = b"OFL1";

/// One attribute value, borrowing from the batch buffer.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue<'a> {
    /// A string (raw bytes; validated where used).
    Str(&'a [u8]),
    /// A number.
    Num(f64),
    /// A boolean.
    Bool(bool),
    /// An array of strings.
    StrArray(Vec<&'a [u8]>),
    /// An array of numbers.
    NumArray(Vec<f64>),
    /// An array of booleans.
    BoolArray(Vec<bool>),
    /// JSON text for values the frame has no type for.
    Json(&'a [u8]),
    /// A string that was not well-formed UTF-16 in JS (lone surrogates replaced by U+FFFD).
    IllFormed(&'a [u8]),
}

/// One decoded span frame.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanFrame<'a> {
    /// 32 lower-case hex characters (validated by the record stage, not here).
    pub trace_id: &'a str,
    /// 16 lower-case hex characters.
    pub span_id: &'a str,
    /// Empty for a root span.
    pub parent_span_id: &'a str,
    /// OpenTelemetry `SpanKind` (0 INTERNAL, 1 SERVER, 2 CLIENT, 3 PRODUCER, 4 CONSUMER).
    pub kind: u8,
    /// OpenTelemetry status code (0 UNSET, 1 OK, 2 ERROR).
    pub status_code: u8,
    /// Start time `[seconds, nanos]`.
    pub start: (f64, u32),
    /// Duration `[seconds, nanos]`.
    pub duration: (f64, u32),
    /// Span name.
    pub name: &'a str,
    /// Status message.
    pub status_message: &'a str,
    /// Instrumentation scope (library) name.
    pub scope_name: &'a str,
    /// Attributes in the order the span had them.
    pub attrs: Vec<(&'a str, AttrValue<'a>)>,
}

impl<'a> SpanFrame<'a> {
    /// The attribute named `key`.
    pub fn attr(&self, key: &str) -> Option<&AttrValue<'a>> {
        self.attrs
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

/// A framing error, with what was being read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameError(pub String);

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FrameError {}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], FrameError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                FrameError(format!(
                    "truncated frame: {what} needs {n} bytes at offset {}, {} left",
                    self.pos,
                    self.buf.len() - self.pos
                ))
            })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8, FrameError> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32, FrameError> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }
    fn f64(&mut self, what: &str) -> Result<f64, FrameError> {
        Ok(f64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }
    fn bytes(&mut self, what: &str) -> Result<&'a [u8], FrameError> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }
    fn str(&mut self, what: &str) -> Result<&'a str, FrameError> {
        let b = self.bytes(what)?;
        std::str::from_utf8(b).map_err(|e| FrameError(format!("{what}: invalid UTF-8 ({e})")))
    }
    fn count(&mut self, what: &str, min_item: usize) -> Result<usize, FrameError> {
        let n = self.u32(what)? as usize;
        // Refuse counts the remaining bytes cannot hold (no huge allocations from bad input).
        if n.saturating_mul(min_item) > self.buf.len() - self.pos {
            return Err(FrameError(format!("{what}: count {n} exceeds the frame")));
        }
        Ok(n)
    }
}

/// One span's frame body within a batch, or why it could not be located.
pub type SpanSlice<'a> = Result<&'a [u8], FrameError>;

/// Splits a batch into its span frames. The outer `Err` means the batch header itself is
/// unusable; an inner `Err` is one span whose frame is cut short, after which the rest of the
/// batch cannot be located (the declared count tells how many spans were lost).
pub fn split_batch(buf: &[u8]) -> Result<(u32, Vec<SpanSlice<'_>>), FrameError> {
    let mut r = Reader { buf, pos: 0 };
    let magic = r.take(4, "batch magic")?;
    if magic != MAGIC {
        return Err(FrameError(format!(
            "not an offloop batch (magic {magic:02x?})"
        )));
    }
    let count = r.u32("span count")?;
    let mut spans = Vec::with_capacity((count as usize).min(buf.len() / 16));
    for i in 0..count {
        match r.bytes("span frame") {
            Ok(body) => spans.push(Ok(body)),
            Err(e) => {
                spans.push(Err(FrameError(format!("span {i}: {e}"))));
                break;
            }
        }
    }
    if spans.iter().all(Result::is_ok) && r.pos != buf.len() {
        return Err(FrameError(format!(
            "{} trailing bytes after {count} spans",
            buf.len() - r.pos
        )));
    }
    Ok((count, spans))
}

/// The span count a batch header declares, if the header is readable.
pub fn peek_count(buf: &[u8]) -> Option<u32> {
    (buf.len() >= 8 && &buf[..4] == MAGIC)
        .then(|| u32::from_le_bytes(buf[4..8].try_into().unwrap()))
}

/// Decodes one span frame body.
pub fn decode_span(body: &[u8]) -> Result<SpanFrame<'_>, FrameError> {
    let mut r = Reader { buf: body, pos: 0 };
    let trace_id = r.str("traceId")?;
    let span_id = r.str("spanId")?;
    let parent_span_id = r.str("parentSpanId")?;
    let kind = r.u8("kind")?;
    let status_code = r.u8("status.code")?;
    let start = (r.f64("startTime")?, r.u32("startTime")?);
    let duration = (r.f64("duration")?, r.u32("duration")?);
    let name = r.str("name")?;
    let status_message = r.str("status.message")?;
    let scope_name = r.str("instrumentationScope.name")?;
    let n = r.count("attribute count", 6)?;
    let mut attrs = Vec::with_capacity(n);
    for _ in 0..n {
        let key = r.str("attribute key")?;
        let ty = r.u8(key)?;
        let value = match ty {
            1 => AttrValue::Str(r.bytes(key)?),
            2 => AttrValue::Num(r.f64(key)?),
            3 => AttrValue::Bool(r.u8(key)? != 0),
            4 => {
                let n = r.count(key, 4)?;
                AttrValue::StrArray((0..n).map(|_| r.bytes(key)).collect::<Result<_, _>>()?)
            }
            5 => {
                let n = r.count(key, 8)?;
                AttrValue::NumArray((0..n).map(|_| r.f64(key)).collect::<Result<_, _>>()?)
            }
            6 => {
                let n = r.count(key, 1)?;
                AttrValue::BoolArray(
                    (0..n)
                        .map(|_| r.u8(key).map(|b| b != 0))
                        .collect::<Result<_, _>>()?,
                )
            }
            7 => AttrValue::Json(r.bytes(key)?),
            8 => AttrValue::IllFormed(r.bytes(key)?),
            other => {
                return Err(FrameError(format!(
                    "attribute {key:?}: unknown value type {other}"
                )))
            }
        };
        attrs.push((key, value));
    }
    if r.pos != body.len() {
        return Err(FrameError(format!(
            "{} trailing bytes in span frame",
            body.len() - r.pos
        )));
    }
    Ok(SpanFrame {
        trace_id,
        span_id,
        parent_span_id,
        kind,
        status_code,
        start,
        duration,
        name,
        status_message,
        scope_name,
        attrs,
    })
}

/// Builds batches in the frame format: for Rust callers, tests, benchmarks and fuzzing. The
/// JS shim (`lib/frame.js`) writes the same bytes.
#[derive(Debug)]
pub struct BatchWriter {
    buf: Vec<u8>,
    count: u32,
}

impl Default for BatchWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl BatchWriter {
    /// An empty batch.
    pub fn new() -> BatchWriter {
        let mut buf = Vec::with_capacity(4096);
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&0u32.to_le_bytes());
        BatchWriter { buf, count: 0 }
    }

    /// Appends a span.
    pub fn push(&mut self, span: &SpanFrame<'_>) {
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        let b = &mut self.buf;
        put_str(b, span.trace_id.as_bytes());
        put_str(b, span.span_id.as_bytes());
        put_str(b, span.parent_span_id.as_bytes());
        b.push(span.kind);
        b.push(span.status_code);
        b.extend_from_slice(&span.start.0.to_le_bytes());
        b.extend_from_slice(&span.start.1.to_le_bytes());
        b.extend_from_slice(&span.duration.0.to_le_bytes());
        b.extend_from_slice(&span.duration.1.to_le_bytes());
        put_str(b, span.name.as_bytes());
        put_str(b, span.status_message.as_bytes());
        put_str(b, span.scope_name.as_bytes());
        b.extend_from_slice(&(span.attrs.len() as u32).to_le_bytes());
        for (k, v) in &span.attrs {
            put_str(b, k.as_bytes());
            match v {
                AttrValue::Str(s) => {
                    b.push(1);
                    put_str(b, s);
                }
                AttrValue::Num(n) => {
                    b.push(2);
                    b.extend_from_slice(&n.to_le_bytes());
                }
                AttrValue::Bool(x) => {
                    b.push(3);
                    b.push(*x as u8);
                }
                AttrValue::StrArray(xs) => {
                    b.push(4);
                    b.extend_from_slice(&(xs.len() as u32).to_le_bytes());
                    xs.iter().for_each(|s| put_str(b, s));
                }
                AttrValue::NumArray(xs) => {
                    b.push(5);
                    b.extend_from_slice(&(xs.len() as u32).to_le_bytes());
                    xs.iter()
                        .for_each(|n| b.extend_from_slice(&n.to_le_bytes()));
                }
                AttrValue::BoolArray(xs) => {
                    b.push(6);
                    b.extend_from_slice(&(xs.len() as u32).to_le_bytes());
                    xs.iter().for_each(|x| b.push(*x as u8));
                }
                AttrValue::Json(s) => {
                    b.push(7);
                    put_str(b, s);
                }
                AttrValue::IllFormed(s) => {
                    b.push(8);
                    put_str(b, s);
                }
            }
        }
        let len = (self.buf.len() - len_at - 4) as u32;
        self.buf[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
        self.count += 1;
    }

    /// Appends raw bytes as one span frame (for tests of malformed frames).
    pub fn push_raw(&mut self, body: &[u8]) {
        put_str(&mut self.buf, body);
        self.count += 1;
    }

    /// Number of spans so far.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// True when no span was pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The finished batch.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf[4..8].copy_from_slice(&self.count.to_le_bytes());
        self.buf
    }
}

fn put_str(b: &mut Vec<u8>, s: &[u8]) {
    b.extend_from_slice(&(s.len() as u32).to_le_bytes());
    b.extend_from_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SpanFrame<'static> {
        SpanFrame {
            trace_id: "0af7651916cd43dd8448eb211c80319c",
            span_id: "b7ad6b7169203331",
            parent_span_id: "",
            kind: 2,
            status_code: 1,
            start: (1_700_000_000.0, 5),
            duration: (0.0, 1_000),
            name: "pg.query",
            status_message: "",
            scope_name: "tusk-drift-sdk",
            attrs: vec![
                ("td.inputValue", AttrValue::Str(br#"{"text":"SELECT 1"}"#)),
                ("n", AttrValue::Num(1.5)),
                ("b", AttrValue::Bool(true)),
                ("sa", AttrValue::StrArray(vec![b"x", b"y"])),
                ("na", AttrValue::NumArray(vec![1.0])),
                ("ba", AttrValue::BoolArray(vec![false])),
                ("j", AttrValue::Json(b"[null]")),
            ],
        }
    }

    #[test]
    fn round_trip() {
        let mut w = BatchWriter::new();
        w.push(&sample());
        w.push(&sample());
        let buf = w.finish();
        let (count, spans) = split_batch(&buf).unwrap();
        assert_eq!(count, 2);
        for s in spans {
            assert_eq!(decode_span(s.unwrap()).unwrap(), sample());
        }
    }

    #[test]
    fn malformed_span_is_isolated() {
        let mut w = BatchWriter::new();
        w.push(&sample());
        w.push_raw(&[1, 2, 3]);
        w.push(&sample());
        let buf = w.finish();
        let (_, spans) = split_batch(&buf).unwrap();
        let results: Vec<_> = spans.into_iter().map(|s| decode_span(s.unwrap())).collect();
        assert!(results[0].is_ok() && results[2].is_ok());
        assert!(results[1].as_ref().unwrap_err().0.contains("truncated"));
    }

    #[test]
    fn truncated_batch_reports_position() {
        let mut w = BatchWriter::new();
        w.push(&sample());
        let mut buf = w.finish();
        buf.truncate(buf.len() - 3);
        let (count, spans) = split_batch(&buf).unwrap();
        assert_eq!(count, 1);
        assert!(spans[0]
            .as_ref()
            .unwrap_err()
            .0
            .starts_with("span 0: truncated"));
        assert!(split_batch(b"nope").is_err());
        // A huge declared array count does not allocate.
        let mut body = Vec::new();
        for _ in 0..3 {
            put_str(&mut body, b"");
        }
        body.extend_from_slice(&[0; 2 + 8 + 4 + 8 + 4]);
        for _ in 0..3 {
            put_str(&mut body, b"");
        }
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_span(&body).unwrap_err().0.contains("exceeds"));
    }
}
