//! Schema merges (`td.inputSchemaMerges` / `td.outputSchemaMerges`).
//!
//! A merge map is `{ key: { encoding?, decodedType?, matchImportance? } }`. It applies to the
//! **top-level** keys of a payload only (reference §2.4): `encoding: 1` (BASE64) makes the
//! hash see the decoded body, `decodedType: 1` (JSON) parses it, and every key of the merge
//! object is copied verbatim onto that property's schema, as the JS reference does.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use crate::json::walk::{walk, Emit, Sinks};

/// `EncodingType.BASE64`.
pub const ENCODING_BASE64: i64 = 1;
/// `DecodedType.JSON`.
pub const DECODED_JSON: i64 = 1;

/// One entry of a merge map.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Merge {
    /// `EncodingType` (1 = BASE64).
    pub encoding: Option<i64>,
    /// `DecodedType` (1 = JSON).
    pub decoded_type: Option<i64>,
    /// 0 removes the field from reduced hashes during replay matching.
    pub match_importance: Option<f64>,
    /// The merge object's own entries as canonical JSON, copied onto the schema node.
    pub(crate) verbatim: Vec<(String, Vec<u8>)>,
}

impl Merge {
    /// Whether the value under this key is decoded before hashing (`encoding` truthy).
    pub fn decodes(&self) -> bool {
        self.encoding.is_some_and(|e| e != 0)
    }

    /// `Buffer.from(s, 'base64')` when `encoding` is BASE64, else `s` unchanged.
    pub(crate) fn decode_text<'a>(&self, s: &'a str) -> Cow<'a, str> {
        if self.encoding == Some(ENCODING_BASE64) {
            Cow::Owned(crate::base64::decode_lossy_utf8(s))
        } else {
            Cow::Borrowed(s)
        }
    }

    /// JS tries `JSON.parse` when `decodedType` is JSON or unset.
    pub(crate) fn parses_json(&self) -> bool {
        matches!(self.decoded_type, None | Some(0) | Some(DECODED_JSON))
    }

    /// A failed `JSON.parse` restores the original (encoded) string only for explicit JSON.
    pub(crate) fn restores_original_on_parse_error(&self) -> bool {
        self.decoded_type == Some(DECODED_JSON)
    }
}

/// A parsed merge map, in the order it was given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Merges {
    /// Shared with the schema nodes they annotate (an `Arc` bump, not a copy, per payload).
    entries: Vec<(String, Arc<Merge>)>,
}

impl Merges {
    /// Parses a merge map from JSON text. Errors name the offending key and field.
    pub fn parse(json: &[u8]) -> Result<Merges, String> {
        const SHAPE: &str = "{key: {encoding?, decodedType?, matchImportance?}}";
        let value: serde_json::Value =
            serde_json::from_slice(json).map_err(|e| format!("invalid JSON: {e}"))?;
        let serde_json::Value::Object(map) = value else {
            return Err(format!(
                "expected a JSON object {SHAPE}, got {}",
                type_name(&value)
            ));
        };
        // serde_json's map resolves duplicate keys last-wins, like `JSON.parse`.
        let mut entries = Vec::with_capacity(map.len());
        for (key, value) in map {
            if is_falsy(&value) {
                // JS: `if (schemaMerges[key])` skips falsy entries.
                continue;
            }
            let obj = value
                .as_object()
                .ok_or_else(|| format!("{key}: expected an object, got {}", type_name(&value)))?;
            let mut merge = Merge {
                encoding: int_field(obj, key.as_str(), &["encoding"])?,
                decoded_type: int_field(obj, key.as_str(), &["decodedType", "decoded_type"])?,
                match_importance: num_field(
                    obj,
                    key.as_str(),
                    &["matchImportance", "match_importance"],
                )?,
                verbatim: Vec::with_capacity(obj.len()),
            };
            // Each entry of the merge object is copied onto the schema node verbatim (JS
            // semantics), in the canonical form the schema hash covers.
            for (k, v) in obj {
                let text = serde_json::to_vec(v).map_err(|e| format!("{key}.{k}: {e}"))?;
                let mut sinks = Sinks::default();
                walk(&text, &mut sinks, Emit::CANON, None)
                    .map_err(|e| format!("{key}.{k}: {e}"))?;
                merge.verbatim.push((k.clone(), sinks.canon));
            }
            entries.push((key, Arc::new(merge)));
        }
        Ok(Merges { entries })
    }

    /// [`Merges::parse`], memoized per thread. An app (and a recording) uses a handful of
    /// distinct merge maps — every pg span carries the same one — and parsing one costs more
    /// than hashing a small payload, so the exporter, `hash_payload` and replay all parse
    /// through here.
    pub fn parse_shared(json: &[u8]) -> Result<Arc<Merges>, String> {
        const MAX_CACHED: usize = 256;
        thread_local! {
            static CACHE: RefCell<HashMap<Box<[u8]>, Arc<Merges>>> = RefCell::new(HashMap::new());
        }
        if let Some(m) = CACHE.with(|c| c.borrow().get(json).cloned()) {
            return Ok(m);
        }
        let m = Arc::new(Merges::parse(json)?);
        CACHE.with(|c| {
            let mut c = c.borrow_mut();
            if c.len() >= MAX_CACHED {
                c.clear();
            }
            c.insert(json.into(), Arc::clone(&m));
        });
        Ok(m)
    }

    /// The merge for a top-level key, if any.
    pub fn get(&self, key: &str) -> Option<&Merge> {
        self.get_shared(key).map(|m| &**m)
    }

    /// The merge for a top-level key, shared.
    pub(crate) fn get_shared(&self, key: &str) -> Option<&Arc<Merge>> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, m)| m)
    }

    /// True when `key` has `matchImportance: 0`: the reduced hashes leave it out.
    pub fn ignores(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|m| m.match_importance == Some(0.0))
    }

    /// True when some key has `matchImportance: 0`.
    pub fn ignores_any(&self) -> bool {
        self.entries
            .iter()
            .any(|(_, m)| m.match_importance == Some(0.0))
    }

    /// All entries.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Merge)> {
        self.entries.iter().map(|(k, m)| (k.as_str(), &**m))
    }

    /// True when the map has no applicable entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn is_falsy(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::Bool(b) => !b,
        serde_json::Value::Number(n) => n.as_f64() == Some(0.0),
        serde_json::Value::String(s) => s.is_empty(),
        _ => false,
    }
}

fn type_name(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn find<'a>(
    obj: &'a serde_json::Map<String, serde_json::Value>,
    names: &[&str],
) -> Option<(&'a str, &'a serde_json::Value)> {
    names
        .iter()
        .find_map(|n| obj.get_key_value(*n))
        .map(|(k, v)| (k.as_str(), v))
        .filter(|(_, v)| !v.is_null())
}

fn int_field(
    obj: &serde_json::Map<String, serde_json::Value>,
    key: &str,
    names: &[&str],
) -> Result<Option<i64>, String> {
    match find(obj, names) {
        None => Ok(None),
        Some((name, v)) => match v.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e9 => Ok(Some(f as i64)),
            _ => Err(format!("{key}.{name}: expected an enum number, got {v}")),
        },
    }
}

fn num_field(
    obj: &serde_json::Map<String, serde_json::Value>,
    key: &str,
    names: &[&str],
) -> Result<Option<f64>, String> {
    match find(obj, names) {
        None => Ok(None),
        Some((name, v)) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| format!("{key}.{name}: expected a number, got {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_and_rejects_bad_shapes() {
        let m = Merges::parse(
            br#"{"body":{"encoding":1,"decodedType":1},"headers":{"matchImportance":0},"x":null}"#,
        )
        .unwrap();
        assert!(m.get("body").unwrap().decodes());
        assert_eq!(m.get("headers").unwrap().match_importance, Some(0.0));
        assert!(m.get("x").is_none());
        assert!(Merges::parse(b"[1]")
            .unwrap_err()
            .contains("expected a JSON object"));
        assert!(Merges::parse(b"null").unwrap_err().ends_with("got null"));
        assert!(Merges::parse(br#"{"a":"s"}"#)
            .unwrap_err()
            .contains("a: expected an object"));
        assert!(Merges::parse(br#"{"a":{"encoding":"b64"}}"#)
            .unwrap_err()
            .contains("a.encoding"));
        assert!(Merges::parse(b"{").unwrap_err().contains("invalid JSON"));
    }
}
