//! The look-up hashes of one input value, for a recorded span (at load) and for a replay
//! request alike.
//!
//! Both sides go through [`crate::payload`], the exporter's own code, so a request hashes to
//! exactly what the recorder would have written for it. The *reduced* form (matching levels
//! that ignore fields with `matchImportance: 0`) is no second canonicalizer either: it removes
//! those top-level fields from the JSON text and hands what is left to the same code, with the
//! same merges. The reduced schema hash is then the hash of the schema with those properties
//! removed, since a schema lists exactly the value's properties.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::value::RawValue;

use crate::hash::HashAlgorithm;
use crate::json::escape::write_json_str;
use crate::merges::Merges;
use crate::payload;

/// A 256-bit value or schema hash (the digest behind the 64-character hex form).
pub type Digest = [u8; 32];

/// Exact hashes of an input value.
#[derive(Clone, Debug)]
pub struct Exact {
    /// Hash of the decoded value (`inputValueHash`).
    pub value: Digest,
    /// Hash of the inferred schema (`inputSchemaHash`).
    pub schema: Digest,
    /// The canonical JSON the value hash covers: merges decoded, keys sorted. Similarity
    /// scoring and the HTTP shape check read this form, so a base64 JSON body is compared
    /// as the object it encodes.
    pub canonical: Vec<u8>,
    /// `value` as the exporter prints it (64 lower-case hex characters).
    pub value_hex: String,
    /// `schema` as the exporter prints it.
    pub schema_hex: String,
}

/// Hashes with the `matchImportance: 0` top-level fields removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reduced {
    /// Hash of the reduced value.
    pub value: Digest,
    /// Hash of the reduced schema.
    pub schema: Digest,
}

/// The exact hashes of `json` under `merges`.
pub fn exact(json: &[u8], merges: Option<&Merges>, algo: HashAlgorithm) -> Result<Exact, String> {
    let p = payload::process_with(
        json,
        merges,
        algo,
        payload::Want {
            struct_bytes: false,
            canonical: true,
        },
    )?;
    Ok(Exact {
        value: digest(&p.value_hash),
        schema: digest(&p.schema_hash),
        canonical: p.canonical,
        value_hex: p.value_hash,
        schema_hex: p.schema_hash,
    })
}

/// The reduced hashes of `json` under `merges`; equal to `exact`'s when no field is removed
/// (no merge with `matchImportance: 0`, none of its keys present, or a non-object root).
pub fn reduced(
    json: &[u8],
    merges: Option<&Merges>,
    algo: HashAlgorithm,
    exact: &Exact,
) -> Result<Reduced, String> {
    let same = Reduced {
        value: exact.value,
        schema: exact.schema,
    };
    let Some(merges) = merges else {
        return Ok(same);
    };
    let ignored: Vec<&str> = merges
        .iter()
        .filter(|(_, m)| m.match_importance == Some(0.0))
        .map(|(k, _)| k)
        .collect();
    if ignored.is_empty() {
        return Ok(same);
    }
    // Last duplicate wins, as in `JSON.parse`; the order is irrelevant to the canonical form.
    let Ok(fields) = serde_json::from_slice::<BTreeMap<Key<'_>, &RawValue>>(json) else {
        return Ok(same);
    };
    if !fields.keys().any(|k| ignored.contains(&&*k.0)) {
        return Ok(same);
    }
    let mut kept = Vec::with_capacity(json.len());
    kept.push(b'{');
    for (k, v) in fields.iter().filter(|(k, _)| !ignored.contains(&&*k.0)) {
        if kept.len() > 1 {
            kept.push(b',');
        }
        write_json_str(&mut kept, &k.0);
        kept.push(b':');
        kept.extend_from_slice(v.get().as_bytes());
    }
    kept.push(b'}');
    let p = payload::process_with(
        &kept,
        Some(merges),
        algo,
        payload::Want {
            struct_bytes: false,
            canonical: false,
        },
    )?;
    Ok(Reduced {
        value: digest(&p.value_hash),
        schema: digest(&p.schema_hash),
    })
}

/// An object key, borrowed from the JSON text unless it had escapes.
#[derive(serde::Deserialize, PartialEq, Eq, PartialOrd, Ord)]
struct Key<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);

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

    #[test]
    fn exact_is_the_exporters_hash() {
        let json = br#"{"text":"SELECT $1","values":[42]}"#;
        let m = merges(r#"{"values":{"matchImportance":0}}"#);
        let e = exact(json, Some(&m), HashAlgorithm::Sha256).unwrap();
        let p = crate::hash_payload(
            json,
            Some(br#"{"values":{"matchImportance":0}}"#),
            HashAlgorithm::Sha256,
        )
        .unwrap();
        assert_eq!(to_hex(&e.value), p.value_hash);
        assert_eq!(to_hex(&e.schema), p.schema_hash);
        assert_eq!(digest(&p.value_hash), e.value);
    }

    #[test]
    fn reduced_drops_importance_zero_fields_only() {
        let algo = HashAlgorithm::Sha256;
        let m = merges(r#"{"values":{"matchImportance":0},"text":{"matchImportance":1}}"#);
        let a = br#"{"text":"SELECT $1","values":[42]}"#;
        let b = br#"{"values":[7,8],"text":"SELECT $1"}"#;
        let (ea, eb) = (
            exact(a, Some(&m), algo).unwrap(),
            exact(b, Some(&m), algo).unwrap(),
        );
        assert_ne!(ea.value, eb.value);
        let (ra, rb) = (
            reduced(a, Some(&m), algo, &ea).unwrap(),
            reduced(b, Some(&m), algo, &eb).unwrap(),
        );
        assert_eq!(ra, rb);
        // Same as hashing the value without the field (the `text` merge still applies).
        let only = exact(br#"{"text":"SELECT $1"}"#, Some(&m), algo).unwrap();
        assert_eq!(ra.value, only.value);
        assert_eq!(ra.schema, only.schema);
        // Nothing to drop: the exact hashes.
        let none = reduced(a, None, algo, &ea).unwrap();
        assert_eq!((none.value, none.schema), (ea.value, ea.schema));
        let arr = exact(b"[1]", Some(&m), algo).unwrap();
        let r = reduced(b"[1]", Some(&m), algo, &arr).unwrap();
        assert_eq!(r.value, arr.value);
    }

    #[test]
    fn reduced_keeps_decoding_the_other_fields() {
        let algo = HashAlgorithm::Blake3;
        let m =
            merges(r#"{"body":{"encoding":1,"decodedType":1},"headers":{"matchImportance":0}}"#);
        let a = br#"{"method":"POST","headers":{"x":"1"},"body":"eyJrIjoidiJ9"}"#;
        let b = br#"{"method":"POST","headers":{"x":"2"},"body":"eyJrIjoidiJ9"}"#;
        let ra = reduced(a, Some(&m), algo, &exact(a, Some(&m), algo).unwrap()).unwrap();
        let rb = reduced(b, Some(&m), algo, &exact(b, Some(&m), algo).unwrap()).unwrap();
        assert_eq!(ra, rb);
        let decoded = exact(br#"{"method":"POST","body":{"k":"v"}}"#, None, algo).unwrap();
        assert_eq!(ra.value, decoded.value);
    }
}
