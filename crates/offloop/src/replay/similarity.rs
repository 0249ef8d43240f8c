//! Similarity ranking for the schema-hash levels (reference §4.4): when several recorded
//! spans share the request's schema, the one whose input is closest wins.
//!
//! `score(a, b)` is in `[0, 1]`: objects average the scores of their keys over the union of
//! keys, arrays average index-wise over the longer length, strings use a normalized
//! Levenshtein distance (a character-multiset Sørensen–Dice coefficient beyond 100 bytes),
//! other scalars compare their JSON text, and below depth 5 whole subtrees compare as text.

use std::collections::HashMap;

use serde_json::Value;

/// Beyond this depth, subtrees are compared as JSON text.
const MAX_DEPTH: usize = 5;

/// Similarity of two JSON values, 1 for identical.
pub fn score(a: &Value, b: &Value) -> f64 {
    score_at(a, b, 0)
}

fn score_at(a: &Value, b: &Value, depth: usize) -> f64 {
    if depth > MAX_DEPTH {
        return compare_strings(&text(a), &text(b));
    }
    match (a, b) {
        (Value::Null, Value::Null) => 1.0,
        (Value::Null, _) | (_, Value::Null) => 0.0,
        (Value::Object(x), Value::Object(y)) => {
            if x.is_empty() || y.is_empty() {
                return if x.is_empty() && y.is_empty() {
                    1.0
                } else {
                    0.0
                };
            }
            let common: f64 = x
                .iter()
                .filter_map(|(k, v)| Some(score_at(v, y.get(k)?, depth + 1)))
                .sum();
            let union = x.len() + y.keys().filter(|k| !x.contains_key(*k)).count();
            common / union as f64
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.is_empty() || y.is_empty() {
                return if x.is_empty() && y.is_empty() {
                    1.0
                } else {
                    0.0
                };
            }
            let sum: f64 = x
                .iter()
                .zip(y)
                .map(|(a, b)| score_at(a, b, depth + 1))
                .sum();
            sum / x.len().max(y.len()) as f64
        }
        (Value::String(x), Value::String(y)) => compare_strings(x, y),
        (Value::Object(_) | Value::Array(_) | Value::String(_), _)
        | (_, Value::Object(_) | Value::Array(_)) => {
            // Different kinds (a string against a number counts as different too).
            if let (Value::Number(_) | Value::Bool(_), Value::String(s)) = (a, b) {
                return compare_strings(&text(a), s);
            }
            0.0
        }
        _ => compare_strings(&text(a), &text(b)),
    }
}

/// Strings as themselves, `null` as empty, everything else as compact JSON.
fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// 1 for equal strings; a length-difference bound below 0.3; otherwise
/// `1 - levenshtein / longer length` (bytes), or Sørensen–Dice on characters past 100 bytes.
pub fn compare_strings(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    let max = a.len().max(b.len());
    if max == 0 {
        return 1.0;
    }
    let bound = 1.0 - a.len().abs_diff(b.len()) as f64 / max as f64;
    if bound < 0.3 {
        return bound;
    }
    if max > 100 {
        return char_dice(a, b);
    }
    1.0 - strsim::levenshtein(a, b) as f64 / max as f64
}

/// `2·|A∩B| / (|A|+|B|)` over character multisets: order-blind, linear time.
fn char_dice(a: &str, b: &str) -> f64 {
    let mut counts: HashMap<char, (u32, u32)> = HashMap::new();
    for c in a.chars() {
        counts.entry(c).or_default().0 += 1;
    }
    for c in b.chars() {
        counts.entry(c).or_default().1 += 1;
    }
    let (common, total) = counts.values().fold((0u64, 0u64), |(c, t), &(x, y)| {
        (c + x.min(y) as u64, t + (x + y) as u64)
    });
    if total == 0 {
        1.0
    } else {
        2.0 * common as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scores() {
        assert_eq!(score(&json!({"a": 1}), &json!({"a": 1})), 1.0);
        assert_eq!(score(&json!({}), &json!({})), 1.0);
        assert_eq!(score(&json!({}), &json!({"a": 1})), 0.0);
        assert_eq!(
            score(&json!({"a": 1, "b": 2}), &json!({"a": 1, "c": 2})),
            1.0 / 3.0
        );
        assert_eq!(score(&json!([1, 2]), &json!([1])), 0.5);
        assert_eq!(score(&json!(null), &json!("x")), 0.0);
        assert_eq!(score(&json!("kitten"), &json!("sitten")), 1.0 - 1.0 / 6.0);
        assert!((compare_strings("a", "abcdefghij") - 0.1).abs() < 1e-12);
        let long_a = "ab".repeat(60);
        let long_b = "ba".repeat(60);
        assert_eq!(compare_strings(&long_a, &long_b), 1.0);
        let deep_a = json!({"a":{"b":{"c":{"d":{"e":{"f":"xyz"}}}}}});
        let deep_b = json!({"a":{"b":{"c":{"d":{"e":{"f":"xyw"}}}}}});
        let s = score(&deep_a, &deep_b);
        assert!(s > 0.5 && s < 1.0, "{s}");
    }
}
