//! `google.protobuf.Struct` wire bytes → JSON text, keeping the fields in the order they were
//! written.
//!
//! prost decodes a `Struct` into a `BTreeMap`, which sorts the keys; an app that reads a
//! recorded pg row back would then see its columns in a different order than it recorded.
//! The exporter writes Struct entries in document order, so reading the wire bytes directly
//! gives back the recorded value as it was. Numbers print in JS form, strings as
//! `JSON.stringify` escapes them.

use crate::json::escape::write_json_str;
use crate::json::number::write_js_number;

/// Deepest nesting accepted, like the JSON side.
const MAX_DEPTH: usize = 128;

/// Appends the JSON object encoded by `bytes` (a `Struct` message).
pub fn struct_to_json(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    write_struct(bytes, out, 0)
}

/// The raw bytes of the last occurrence of each of `fields` (length-delimited) in `msg`.
pub fn len_fields<const N: usize>(
    msg: &[u8],
    fields: [u32; N],
) -> Result<[Option<&[u8]>; N], String> {
    let mut found = [None; N];
    let mut r = Reader { buf: msg, pos: 0 };
    while let Some((field, wire)) = r.tag()? {
        match fields.iter().position(|f| *f == field) {
            Some(i) if wire == 2 => found[i] = Some(r.bytes()?),
            _ => r.skip(wire)?,
        }
    }
    Ok(found)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| format!("truncated varint at byte {}", self.pos))?;
            self.pos += 1;
            if shift < 64 {
                v |= u64::from(b & 0x7f) << shift;
            }
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("varint longer than 10 bytes at byte {}", self.pos))
    }

    fn tag(&mut self) -> Result<Option<(u32, u8)>, String> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let t = self.varint()?;
        let field = u32::try_from(t >> 3).map_err(|_| "field number out of range".to_string())?;
        if field == 0 {
            return Err(format!("field number 0 at byte {}", self.pos));
        }
        Ok(Some((field, (t & 7) as u8)))
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = self.varint()? as usize;
        let end = self
            .pos
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| format!("field at byte {} overruns its message", self.pos))?;
        let b = &self.buf[self.pos..end];
        self.pos = end;
        Ok(b)
    }

    fn fixed(&mut self, n: usize) -> Result<&'a [u8], String> {
        let b = self
            .buf
            .get(self.pos..self.pos + n)
            .ok_or_else(|| format!("truncated fixed field at byte {}", self.pos))?;
        self.pos += n;
        Ok(b)
    }

    fn skip(&mut self, wire: u8) -> Result<(), String> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.fixed(8).map(|_| ()),
            2 => self.bytes().map(|_| ()),
            5 => self.fixed(4).map(|_| ()),
            w => Err(format!("unsupported wire type {w} at byte {}", self.pos)),
        }
    }
}

fn utf8(b: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(b).map_err(|e| format!("string is not UTF-8: {e}"))
}

fn write_struct(bytes: &[u8], out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    let mut r = Reader { buf: bytes, pos: 0 };
    out.push(b'{');
    let mut first = true;
    while let Some((field, wire)) = r.tag()? {
        if field != 1 || wire != 2 {
            r.skip(wire)?;
            continue;
        }
        // map<string, Value> entry: {1: key, 2: value}
        let [key, value] = len_fields(r.bytes()?, [1, 2])?;
        if !first {
            out.push(b',');
        }
        first = false;
        write_json_str(out, utf8(key.unwrap_or_default())?);
        out.push(b':');
        write_value(value.unwrap_or_default(), out, depth + 1)?;
    }
    out.push(b'}');
    Ok(())
}

fn write_list(bytes: &[u8], out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    let mut r = Reader { buf: bytes, pos: 0 };
    out.push(b'[');
    let mut first = true;
    while let Some((field, wire)) = r.tag()? {
        if field != 1 || wire != 2 {
            r.skip(wire)?;
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        write_value(r.bytes()?, out, depth + 1)?;
    }
    out.push(b']');
    Ok(())
}

/// `google.protobuf.Value`: a oneof, so the last field set wins; none set is `null`.
fn write_value(bytes: &[u8], out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
    enum Kind<'a> {
        Null,
        Number(f64),
        Str(&'a [u8]),
        Bool(bool),
        Struct(&'a [u8]),
        List(&'a [u8]),
    }
    let mut kind = Kind::Null;
    let mut r = Reader { buf: bytes, pos: 0 };
    while let Some((field, wire)) = r.tag()? {
        kind = match (field, wire) {
            (1, 0) => {
                r.varint()?;
                Kind::Null
            }
            (2, 1) => {
                let b = r.fixed(8)?;
                Kind::Number(f64::from_le_bytes(b.try_into().expect("8 bytes")))
            }
            (3, 2) => Kind::Str(r.bytes()?),
            (4, 0) => Kind::Bool(r.varint()? != 0),
            (5, 2) => Kind::Struct(r.bytes()?),
            (6, 2) => Kind::List(r.bytes()?),
            (_, w) => {
                r.skip(w)?;
                continue;
            }
        };
    }
    match kind {
        Kind::Null => out.extend_from_slice(b"null"),
        Kind::Number(n) => write_js_number(out, n),
        Kind::Str(s) => write_json_str(out, utf8(s)?),
        Kind::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        Kind::Struct(s) => write_struct(s, out, depth)?,
        Kind::List(l) => write_list(l, out, depth)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(json: &str) -> String {
        let p = crate::hash_payload(json.as_bytes(), None, crate::HashAlgorithm::Blake3).unwrap();
        let mut out = Vec::new();
        struct_to_json(&p.struct_bytes, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn keeps_document_order_and_js_numbers() {
        let json = r#"{"z":1,"a":[1.5,"x",null,true,{"k":{}},[]],"m":0.000001,"e":"\n\"é"}"#;
        assert_eq!(roundtrip(json), json);
        assert_eq!(roundtrip("{}"), "{}");
    }

    #[test]
    fn agrees_with_prost() {
        use prost::Message;
        let p = crate::hash_payload(
            br#"{"b":[1,{"c":"d"}],"a":null}"#,
            None,
            crate::HashAlgorithm::Blake3,
        )
        .unwrap();
        let s = prost_types::Struct::decode(&p.struct_bytes[..]).unwrap();
        assert_eq!(s.fields.len(), 2);
        let mut out = Vec::new();
        struct_to_json(&s.encode_to_vec(), &mut out).unwrap();
        // prost re-encodes in key order.
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":null,"b":[1,{"c":"d"}]}"#
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        assert!(struct_to_json(&[0x0a, 0x05, 0x01], &mut out).is_err());
        assert!(struct_to_json(&[0xff; 12], &mut out).is_err());
        assert!(len_fields(&[0x4a, 0x80], [9]).is_err());
    }
}
