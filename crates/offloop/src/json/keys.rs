//! JavaScript property order.
//!
//! The reference hash sorts keys with `Object.keys(o).sort()` (UTF-16 code units) and then
//! inserts them into a fresh object; JS objects list *array-index* keys ("0".."4294967294")
//! first, in numeric order, whatever the insertion order (reference §2.4, TV4). This module
//! reproduces that order so canonical bytes match `JSON.stringify` byte for byte.

use std::cmp::Ordering;

/// Returns the numeric value of `key` if JavaScript treats it as an array index.
pub fn array_index(key: &str) -> Option<u32> {
    let b = key.as_bytes();
    if b.is_empty() || b.len() > 10 || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    if !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = key.parse().ok()?;
    // 2^32 - 1 is not an array index.
    (n < u32::MAX as u64).then_some(n as u32)
}

/// Compares two keys by UTF-16 code units, as `Array.prototype.sort` does.
fn cmp_utf16(a: &str, b: &str) -> Ordering {
    // For BMP-only strings UTF-8 byte order equals code-unit order except for U+E000..U+FFFF
    // vs astral characters; comparing code units directly is exact and cheap enough.
    if a.is_ascii() && b.is_ascii() {
        return a.as_bytes().cmp(b.as_bytes());
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Orders keys as `JSON.stringify(sortObjectKeysRecursively(o))` prints them.
pub fn cmp_js_keys(a: &str, b: &str) -> Ordering {
    match (array_index(a), array_index(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => cmp_utf16(a, b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_keys_first_numeric() {
        let mut keys = vec![
            "a",
            "10",
            "9",
            "01",
            "4294967295",
            "B",
            "\u{e000}",
            "\u{1f600}",
        ];
        keys.sort_by(|a, b| cmp_js_keys(a, b));
        assert_eq!(
            keys,
            vec![
                "9",
                "10",
                "01",
                "4294967295",
                "B",
                "a",
                "\u{1f600}",
                "\u{e000}"
            ]
        );
    }
}
