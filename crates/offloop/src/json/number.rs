//! ECMAScript number formatting.
//!
//! Tusk's JS reference hashes `JSON.stringify` output, which formats numbers with
//! `Number::toString` (`1e+21`, `0.000001`, `20000000000000000000`). serde_json formats
//! differently (`1e-6`, `2e19`), so canonical bytes and hashes would diverge (reference §2.6
//! D4). `ryu-js` implements exactly the ECMAScript algorithm; integers below 2^53 (exact in
//! f64, printed digit for digit by JS) take the faster `itoa` path.

/// Largest magnitude below which every integer-valued f64 prints as its exact digits.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

/// Appends `v` formatted like JavaScript's `JSON.stringify(v)`.
///
/// Non-finite values cannot come out of JSON text; they format as `null`, as in JS.
pub fn write_js_number(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(JsNumber::default().format(v).as_bytes());
}

/// Stack buffers for formatting one number without allocating.
#[derive(Default)]
pub struct JsNumber {
    int: itoa::Buffer,
    float: ryu_js::Buffer,
}

impl JsNumber {
    /// `v` as `JSON.stringify(v)` prints it.
    pub fn format(&mut self, v: f64) -> &str {
        if !v.is_finite() {
            "null"
        } else if v.fract() == 0.0 && v.abs() < EXACT_INT {
            // Also maps -0 to "0", as JS does.
            self.int.format(v as i64)
        } else {
            self.float.format_finite(v)
        }
    }
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
        assert_eq!(fmt(-42.0), "-42");
        assert_eq!(fmt(9007199254740994.0), "9007199254740994");
        assert_eq!(fmt(123456789012345678901.0), "123456789012345680000");
        assert_eq!(fmt(-3.25), "-3.25");
        assert_eq!(fmt(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(fmt(5e-324), "5e-324");
        assert_eq!(fmt(1.7976931348623157e308), "1.7976931348623157e+308");
        assert_eq!(fmt(f64::NAN), "null");
    }
}
