//! `Buffer.from(s, 'base64').toString('utf8')` semantics.
//!
//! Node's decoder is lenient: it accepts the URL-safe alphabet, skips characters outside the
//! alphabet (whitespace included), stops at the first `=`, and ignores trailing bits. Bodies
//! recorded by JS SDKs are decoded that way, so the hash must see the same bytes. The strict
//! `base64` crate decoder handles the common well-formed case; the lenient loop below only runs
//! when it refuses the input.

use base64::Engine as _;

/// Decodes like Node and converts to UTF-8, replacing invalid sequences with U+FFFD.
pub fn decode_lossy_utf8(s: &str) -> String {
    let bytes = decode(s);
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Decodes like Node's `Buffer.from(s, 'base64')`.
///
/// Node reads the JS string one UTF-16 code unit at a time and keeps only its low byte, so
/// `'中'` (U+4E2D) counts as `'-'` (0x2D, URL-safe 62) and a surrogate half as whatever its low
/// byte is (`0x3D` is `'='`, which ends decoding). Non-ASCII input is mapped the same way.
pub fn decode(s: &str) -> Vec<u8> {
    if !s.is_ascii() {
        let low_bytes: Vec<u8> = s.encode_utf16().map(|unit| unit as u8).collect();
        return decode_lenient(&low_bytes);
    }
    const STRICT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    STRICT
        .decode(s)
        .unwrap_or_else(|_| decode_lenient(s.as_bytes()))
}

fn sextet(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    } as u32)
}

fn decode_lenient(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() * 3 / 4);
    let (mut acc, mut n) = (0u32, 0u32);
    for &c in input {
        if c == b'=' {
            break;
        }
        let Some(v) = sextet(c) else { continue };
        acc = (acc << 6) | v;
        n += 1;
        if n == 4 {
            out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]);
            acc = 0;
            n = 0;
        }
    }
    match n {
        2 => out.push((acc >> 4) as u8),
        3 => out.extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_like_node() {
        assert_eq!(decode("eyJrIjoidiJ9"), br#"{"k":"v"}"#);
        assert_eq!(decode("eyJr Ijoi\ndiJ9"), br#"{"k":"v"}"#);
        assert_eq!(decode("_-8"), vec![0xff, 0xef]);
        assert_eq!(decode("aGk=trailing"), b"hi");
        assert_eq!(decode_lossy_utf8("/w=="), "\u{fffd}");
        // Non-ASCII: the low byte of each UTF-16 unit ('中' = U+4E2D → '-').
        assert_eq!(decode("中L"), decode("-L"));
        assert_eq!(decode("eyJr\u{141}A"), decode("eyJrAA"));
        // U+1F600 is D83D DE00: 0x3D is '=', decoding stops there.
        assert_eq!(decode("aGk\u{1F600}aGk="), decode("aGk="));
    }
}
