//! The payload pipeline (`hash_payload`) on arbitrary bytes, with and without schema merges.
//!
//! Input layout: byte 0 = flags (bit 0: sha256, bit 1: with merges); with merges, bytes 1..3
//! are the merge map's length (LE u16), then the merge JSON, then the payload JSON.
//!
//! Checked: no panic; without merges the payload is accepted exactly when serde_json accepts
//! it as a value (the walker is a serde visitor with the same limits); the canonical bytes are
//! JSON and hashing them again gives the same value and schema hashes (canonicalization is
//! idempotent); with merges, the canonical bytes are still JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offloop::{hash_payload, HashAlgorithm};
use offloop_fuzz::is_json;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let algo = if flags & 1 == 1 {
        HashAlgorithm::Sha256
    } else {
        HashAlgorithm::Blake3
    };
    let (merges, json) = if flags & 2 == 2 {
        if rest.len() < 2 {
            return;
        }
        let n = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
        (Some(&rest[2..2 + n]), &rest[2 + n..])
    } else {
        (None, rest)
    };

    let result = hash_payload(json, merges, algo);
    if merges.is_none() {
        let serde_ok = is_json(json);
        assert_eq!(
            result.is_ok(),
            serde_ok,
            "walker and serde_json disagree on validity: walker {:?}",
            result.as_ref().err()
        );
    }
    let Ok(p) = result else { return };
    assert!(is_json(&p.canonical), "canonical bytes are JSON");
    assert!(is_json(&p.value_json), "stored value is JSON");
    assert!(
        !p.value_json.contains(&b'\n') && !p.value_json.contains(&b'\r'),
        "stored value fits on one JSONL line"
    );
    if merges.is_none() {
        let again = hash_payload(&p.canonical, None, algo).expect("canonical bytes hash");
        assert_eq!(
            again.canonical,
            p.canonical,
            "canonicalization is idempotent ({})",
            String::from_utf8_lossy(&p.canonical)
        );
        assert_eq!(again.value_hash, p.value_hash);
        assert_eq!(
            again.schema_hash, p.schema_hash,
            "schema of the canonical form"
        );
    }
});
