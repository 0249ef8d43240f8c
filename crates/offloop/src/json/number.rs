//! ECMAScript number formatting.
//!
//! Tusk's JS reference hashes `JSON.stringify` output, which formats numbers with
//! `Number::toString` (`1e+21`, `0.000001`, `20000000000000000000`). serde_json formats
//! differently (`1e-6`, `2e19`), so canonical bytes and hashes would diverge (reference §2.6
//! D4). `ryu-js` implements exactly the ECMAScript algorithm.

/// Appends `v` formatted like JavaScript's `JSON.stringify(v)`.
///
/// Non-finite values cannot come out of JSON text; they format as `null`, as in JS.
pub fn write_js_number(out: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    if v == 0.0 {
        // -0 prints as "0" in JS.
        out.push(b'0');
        return;
    }
    let mut buf = ryu_js::Buffer::new();
    out.extend_from_slice(buf.format_finite(v).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(v: f64) -> String {
        let mut out = Vec::new();
        write_js_number(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn matches_ecmascript_number_to_string() {
        assert_eq!(fmt(0.000001), "0.000001");
        assert_eq!(fmt(1.5e-7), "1.5e-7");
        assert_eq!(fmt(1e21), "1e+21");
        assert_eq!(fmt(20000000000000000000.0), "20000000000000000000");
        assert_eq!(fmt(-0.0), "0");
        assert_eq!(fmt(42.0), "42");
        assert_eq!(fmt(-3.25), "-3.25");
        assert_eq!(fmt(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(fmt(f64::NAN), "null");
    }
}
