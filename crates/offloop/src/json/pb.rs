//! Minimal protobuf wire helpers for `google.protobuf.Value`/`Struct`/`ListValue`, written
//! while walking JSON so no `prost_types::Struct` tree is built per payload. The output is
//! ordinary protobuf: any decoder (prost, protobufjs, protobuf-ts) reads it.

/// Wire type 0 (varint).
pub const VARINT: u8 = 0;
/// Wire type 1 (64-bit).
pub const FIXED64: u8 = 1;
/// Wire type 2 (length-delimited).
pub const LEN: u8 = 2;

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    put_varint(out, ((field as u64) << 3) | wire as u64);
}

pub fn put_len_prefixed(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_tag(out, field, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// `Value.null_value = NULL_VALUE` (field 1, enum 0).
pub fn value_null(out: &mut Vec<u8>) {
    put_tag(out, 1, VARINT);
    out.push(0);
}

/// `Value.number_value` (field 2, double).
pub fn value_number(out: &mut Vec<u8>, v: f64) {
    put_tag(out, 2, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// `Value.string_value` (field 3).
pub fn value_string(out: &mut Vec<u8>, s: &str) {
    put_len_prefixed(out, 3, s.as_bytes());
}

/// `Value.bool_value` (field 4).
pub fn value_bool(out: &mut Vec<u8>, b: bool) {
    put_tag(out, 4, VARINT);
    out.push(b as u8);
}
