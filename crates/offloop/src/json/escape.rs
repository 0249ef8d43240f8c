//! JSON string escaping exactly as `JSON.stringify` does it.
//!
//! `"` and `\` are escaped, control characters below U+0020 use the short forms
//! (`\b \f \n \r \t`) or `\u00xx` with lower-case hex; everything else, including U+2028,
//! U+2029 and DEL, is written raw. serde_json agrees today, but the canonical bytes are a
//! hashing contract, so the rule lives here, next to its test.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// True for the bytes `JSON.stringify` escapes.
#[inline(always)]
fn escaped(b: u8) -> bool {
    (b < 0x20) | (b == b'"') | (b == b'\\')
}

/// Length of the longest prefix of `bytes` that needs no escaping. Most strings (ids, names,
/// hashes, SQL) are entirely plain: they are checked 16 bytes at a time, branch-free per
/// chunk so it vectorizes, and copied in one go.
fn plain_prefix(bytes: &[u8]) -> usize {
    let mut n = 0;
    for chunk in bytes.chunks_exact(16) {
        if chunk.iter().fold(false, |bad, &b| bad | escaped(b)) {
            break;
        }
        n += 16;
    }
    n + bytes[n..]
        .iter()
        .position(|&b| escaped(b))
        .unwrap_or(bytes.len() - n)
}

/// Appends `s` as a quoted JSON string literal.
pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut at = 0;
    loop {
        let run = plain_prefix(&bytes[at..]);
        out.extend_from_slice(&bytes[at..at + run]);
        at += run;
        let Some(&b) = bytes.get(at) else { break };
        at += 1;
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xf) as usize],
            ]),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_json_stringify() {
        let mut out = Vec::new();
        write_json_str(&mut out, "a\"b\\c\n\u{1}\u{7f}\u{2028}é");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"b\\\\c\\n\\u0001\u{7f}\u{2028}é\""
        );
    }

    /// Every ASCII byte at every position around the 16-byte chunk boundaries, alone and in
    /// pairs, against serde_json (which escapes as `JSON.stringify` does).
    #[test]
    fn escapes_at_every_position_like_serde_json() {
        let mut out = Vec::new();
        for len in [1usize, 15, 16, 17, 31, 32, 33, 40] {
            for at in 0..len {
                for b in 0u8..0x80 {
                    let mut text = vec![b'a'; len];
                    text[at] = b;
                    text[len - 1 - at] = b'"';
                    let text = String::from_utf8(text).unwrap();
                    out.clear();
                    write_json_str(&mut out, &text);
                    assert_eq!(
                        out,
                        serde_json::to_string(&text).unwrap().as_bytes(),
                        "{text:?}"
                    );
                }
            }
        }
    }
}
