//! The look-up hashes of one input value, for a recorded span (at load) and for a replay
//! request alike.
//!
//! Both sides go through [`crate::payload::lookup_hashes`], the exporter's own walk, so a
//! request hashes to exactly what the recorder would have written for it. The *reduced* form
//! (matching levels that ignore fields with `matchImportance: 0`) is no second canonicalizer
//! either: the same walk leaves those top-level entries out of a second canonical copy, and
//! the reduced schema is the schema without those properties (a schema lists exactly the
//! value's properties) — what hashing the value with the fields removed gives.

use std::sync::Arc;

use crate::hash::HashAlgorithm;
use crate::merges::Merges;
use crate::payload;

/// A 256-bit value or schema hash (the digest behind the 64-character hex form).
pub type Digest = [u8; 32];

pub use crate::payload::{LookupHashes as Hashes, LookupTexts as Texts, SchemaTexts, ValueTexts};

/// The look-up hashes of `json` under `merges`, with the canonical bytes (similarity scoring
/// and the HTTP shape check read them, so a base64 JSON body is compared as the object it
/// encodes).
pub fn hashes(json: &[u8], merges: Option<&Merges>, algo: HashAlgorithm) -> Result<Hashes, String> {
    payload::lookup_hashes(json, merges, algo)
}

/// The texts behind [`hashes`], for callers that digest only what they use.
pub fn texts(json: &[u8], merges: Option<&Merges>) -> Result<Texts, String> {
    payload::lookup_texts(json, merges)
}

/// The value half of [`texts`] (no schema), for a look-up that may end at a value level.
pub fn value_texts(json: &[u8], merges: Option<&Merges>) -> Result<ValueTexts, String> {
    payload::lookup_value_texts(json, merges)
}

/// [`Merges::parse_shared`]: the one memoized parse, shared with the exporter.
pub fn parse_merges(json: &[u8]) -> Result<Arc<Merges>, String> {
    Merges::parse_shared(json)
}

/// Parses a 64-character lower-case hex hash.
pub fn digest(hex: &str) -> Digest {
    let mut out = [0u8; 32];
    let b = hex.as_bytes();
    debug_assert_eq!(b.len(), 64, "hash hex is 64 characters");
    for (i, o) in out.iter_mut().enumerate() {
        *o = (nibble(b[2 * i]) << 4) | nibble(b[2 * i + 1]);
    }
    out
}

fn nibble(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

/// The 64-character lower-case hex form of a digest.
pub fn to_hex(d: &Digest) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(64);
    for b in d {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 0xf) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merges(json: &str) -> Merges {
        Merges::parse(json.as_bytes()).unwrap()
    }

    #[test]
    fn parsed_merges_are_memoized() {
        let a = parse_merges(br#"{"values":{"matchImportance":0}}"#).unwrap();
        let b = parse_merges(br#"{"values":{"matchImportance":0}}"#).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(parse_merges(b"[1]").is_err());
    }

    /// The reduced hashes by their definition: hash the value with the fields removed.
    fn reduced_by_definition(json: &str, m: &Merges, algo: HashAlgorithm) -> (Digest, Digest) {
        let v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(json).unwrap();
        let kept: serde_json::Map<_, _> = v.into_iter().filter(|(k, _)| !m.ignores(k)).collect();
        let h = hashes(
            serde_json::to_string(&kept).unwrap().as_bytes(),
            Some(m),
            algo,
        )
        .unwrap();
        (h.value, h.schema)
    }

    #[test]
    fn exact_is_the_exporters_hash() {
        let json = br#"{"text":"SELECT $1","values":[42]}"#;
        let m = merges(r#"{"values":{"matchImportance":0}}"#);
        let e = hashes(json, Some(&m), HashAlgorithm::Sha256).unwrap();
        let p = crate::hash_payload(
            json,
            Some(br#"{"values":{"matchImportance":0}}"#),
            HashAlgorithm::Sha256,
        )
        .unwrap();
        assert_eq!(to_hex(&e.value), p.value_hash);
        assert_eq!(to_hex(&e.schema), p.schema_hash);
        assert_eq!(digest(&p.value_hash), e.value);
        assert_eq!(e.canonical, p.canonical);
    }

    #[test]
    fn reduced_drops_importance_zero_fields_only() {
        let algo = HashAlgorithm::Sha256;
        let m = merges(r#"{"values":{"matchImportance":0},"text":{"matchImportance":1}}"#);
        let a = r#"{"text":"SELECT $1","values":[42]}"#;
        let b = r#"{"values":[7,8],"text":"SELECT $1"}"#;
        let (ea, eb) = (
            hashes(a.as_bytes(), Some(&m), algo).unwrap(),
            hashes(b.as_bytes(), Some(&m), algo).unwrap(),
        );
        assert_ne!(ea.value, eb.value);
        assert_eq!(
            (ea.reduced_value, ea.reduced_schema),
            (eb.reduced_value, eb.reduced_schema)
        );
        assert_ne!(ea.reduced_value, ea.value);
        // Same as hashing the value without the field (the `text` merge still applies).
        let only = hashes(br#"{"text":"SELECT $1"}"#, Some(&m), algo).unwrap();
        assert_eq!(
            (ea.reduced_value, ea.reduced_schema),
            (only.value, only.schema)
        );
        assert_eq!(
            (ea.reduced_value, ea.reduced_schema),
            reduced_by_definition(a, &m, algo)
        );
        // Nothing to drop: the exact hashes.
        let none = hashes(a.as_bytes(), None, algo).unwrap();
        assert_eq!(
            (none.reduced_value, none.reduced_schema),
            (none.value, none.schema)
        );
        let absent = hashes(br#"{"text":"x"}"#, Some(&m), algo).unwrap();
        assert_eq!(
            (absent.reduced_value, absent.reduced_schema),
            (absent.value, absent.schema)
        );
        // Only an object root has fields to drop (an array root is spread into "0", "1", …).
        let zero = merges(r#"{"0":{"matchImportance":0}}"#);
        for root in [&b"[1,2]"[..], b"\"ab\"", b"7"] {
            let h = hashes(root, Some(&zero), algo).unwrap();
            assert_eq!((h.reduced_value, h.reduced_schema), (h.value, h.schema));
        }
    }

    #[test]
    fn reduced_matches_its_definition_for_unsorted_duplicate_and_nested_keys() {
        let algo = HashAlgorithm::Blake3;
        let m = merges(r#"{"b":{"matchImportance":0},"z":{"matchImportance":0}}"#);
        for json in [
            r#"{"z":1,"a":{"y":2,"x":[3]},"b":"x","10":true,"9":null}"#,
            r#"{"b":1}"#,
            r#"{"a":1,"b":{"b":2},"c":[{"z":1}]}"#,
            r#"{"c":1,"b":2,"a":3}"#,
        ] {
            let h = hashes(json.as_bytes(), Some(&m), algo).unwrap();
            assert_eq!(
                (h.reduced_value, h.reduced_schema),
                reduced_by_definition(json, &m, algo),
                "{json}"
            );
        }
        // Duplicate keys: the last wins, and an ignored key is dropped whichever copy.
        let dup = hashes(br#"{"a":1,"b":2,"a":3,"b":4}"#, Some(&m), algo).unwrap();
        let plain = hashes(br#"{"a":3}"#, Some(&m), algo).unwrap();
        assert_eq!(
            (dup.reduced_value, dup.reduced_schema),
            (plain.value, plain.schema)
        );
    }

    #[test]
    fn reduced_keeps_decoding_the_other_fields() {
        let algo = HashAlgorithm::Blake3;
        let m =
            merges(r#"{"body":{"encoding":1,"decodedType":1},"headers":{"matchImportance":0}}"#);
        let a = br#"{"method":"POST","headers":{"x":"1"},"body":"eyJrIjoidiJ9"}"#;
        let b = br#"{"method":"POST","headers":{"x":"2"},"body":"eyJrIjoidiJ9"}"#;
        let ra = hashes(a, Some(&m), algo).unwrap();
        let rb = hashes(b, Some(&m), algo).unwrap();
        assert_eq!(ra.reduced_value, rb.reduced_value);
        assert_eq!(ra.reduced_schema, rb.reduced_schema);
        let decoded = hashes(br#"{"method":"POST","body":{"k":"v"}}"#, None, algo).unwrap();
        assert_eq!(ra.reduced_value, decoded.value);
    }
}
