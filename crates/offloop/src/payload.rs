//! One payload (an input or output value): parse, normalize, decode merges, infer the
//! schema and hash value and schema, in one pass ([`crate::json`]).
//!
//! This is the single code path behind the exporter, [`hash_payload`] (JS `hashPayload`) and
//! the replay matcher, so record-time and replay-time hashes cannot disagree.

use std::cell::RefCell;

use crate::hash::HashAlgorithm;
use crate::json::walk::{walk, Emit, Sinks};
use crate::merges::Merges;
use crate::schema::Schema;

/// Everything the pipeline derives from one payload.
#[derive(Clone, Debug)]
pub struct Payload {
    /// The stored value: compact JSON in document order, numbers in JS form. Not decoded
    /// (base64 bodies stay base64), as in Tusk's `CleanSpanData`.
    pub value_json: Vec<u8>,
    /// `google.protobuf.Struct` encoding of the stored value (empty unless it is an object).
    pub struct_bytes: Vec<u8>,
    /// Canonical JSON of the *decoded* value: the bytes behind `value_hash`.
    pub canonical: Vec<u8>,
    /// Hash of `canonical`.
    pub value_hash: String,
    /// The inferred schema (with merges applied at the top level).
    pub schema: Schema,
    /// Hash of the schema's canonical JSON.
    pub schema_hash: String,
}

impl Payload {
    /// The `{}` payload used for spans without an output value.
    pub fn empty_object(algo: HashAlgorithm) -> Payload {
        process(b"{}", None, algo).expect("{} is valid JSON")
    }
}

/// Processes one payload given as JSON text.
///
/// `merges` is `Some` when the span carried a merge map (even an empty one: the reference then
/// spreads a non-object root into an object before hashing). Errors describe the problem
/// without naming the field; callers prefix the attribute name.
pub fn process(
    json: &[u8],
    merges: Option<&Merges>,
    algo: HashAlgorithm,
) -> Result<Payload, String> {
    process_with(json, merges, algo, Want::ALL)
}

/// Which optional outputs [`process_with`] returns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Want {
    /// `Payload::struct_bytes` (only protobuf output needs it).
    pub struct_bytes: bool,
    /// `Payload::canonical` (the exporter needs only its hash).
    pub canonical: bool,
}

impl Want {
    pub const ALL: Want = Want {
        struct_bytes: true,
        canonical: true,
    };
}

thread_local! {
    /// Working storage reused by every payload processed on this thread: the parser's input
    /// copy and tape, the walker's stacks and the canonical buffer.
    static WORK: RefCell<Sinks> = RefCell::new(Sinks::default());
}

/// Working storage a thread keeps between payloads; after a larger payload it is released
/// (pool threads live as long as the process, and one huge span must not pin its buffers).
const RETAIN_BYTES: usize = 16 * 1024 * 1024;

/// Runs `f` with this thread's working storage.
fn with_sinks<R>(f: impl FnOnce(&mut Sinks) -> R) -> R {
    WORK.with(|cell| match cell.try_borrow_mut() {
        Ok(mut sinks) => {
            let r = f(&mut sinks);
            if sinks.retained_bytes() > RETAIN_BYTES {
                *sinks = Sinks::default();
            }
            r
        }
        // Not reachable today (nothing re-enters), but never worth a panic.
        Err(_) => f(&mut Sinks::default()),
    })
}

/// [`process`], returning only the optional outputs in `want`.
pub(crate) fn process_with(
    json: &[u8],
    merges: Option<&Merges>,
    algo: HashAlgorithm,
    want: Want,
) -> Result<Payload, String> {
    with_sinks(|sinks| process_into(sinks, json, merges, algo, want))
}

fn process_into(
    sinks: &mut Sinks,
    json: &[u8],
    merges: Option<&Merges>,
    algo: HashAlgorithm,
    want: Want,
) -> Result<Payload, String> {
    sinks.clear_outputs();
    let verbatim = stored_verbatim(json);
    let emit = Emit {
        compact: verbatim.is_none(),
        pb: want.struct_bytes,
        schema: true,
        reduced: false,
    };
    let schema = walk(json, sinks, emit, merges)?.expect("schema requested");
    let mut schema_json = Vec::with_capacity(128);
    schema.write_canonical(&mut schema_json);
    Ok(Payload {
        value_hash: algo.hex(&sinks.canon),
        schema_hash: algo.hex_recurring(&schema_json),
        value_json: match verbatim {
            Some(v) => v.to_vec(),
            None => std::mem::take(&mut sinks.compact),
        },
        struct_bytes: std::mem::take(&mut sinks.pb),
        canonical: if want.canonical {
            sinks.canon.clone()
        } else {
            Vec::new()
        },
        schema,
    })
}

/// The hashes replay looks spans up by, as digests: those [`process`] computes, plus the
/// *reduced* pair (top-level fields with `matchImportance: 0` left out).
#[derive(Clone, Debug)]
pub struct LookupHashes {
    /// Digest of the value hash (`inputValueHash`).
    pub value: [u8; 32],
    /// Digest of the schema hash (`inputSchemaHash`).
    pub schema: [u8; 32],
    /// The value hash without the `matchImportance: 0` fields (`value` when none is present).
    pub reduced_value: [u8; 32],
    /// The schema hash without those properties (`schema` when none is present).
    pub reduced_schema: [u8; 32],
    /// The canonical bytes behind `value`.
    pub canonical: Vec<u8>,
}

/// The canonical texts behind [`LookupHashes`], not digested yet: a matcher digests only
/// those its levels reach (a digest of a short text costs about as much as the walk).
#[derive(Clone, Debug)]
pub struct LookupTexts {
    /// The value texts.
    pub value: ValueTexts,
    /// The schema texts.
    pub schema: SchemaTexts,
}

/// The value half of [`LookupTexts`].
#[derive(Clone, Debug)]
pub struct ValueTexts {
    /// Canonical value bytes (hashed as the value hash).
    pub canonical: Vec<u8>,
    /// The canonical value without the `matchImportance: 0` root fields; `None` when no
    /// field is left out.
    pub reduced: Option<Vec<u8>>,
}

/// The schema half of [`LookupTexts`].
#[derive(Clone, Debug)]
pub struct SchemaTexts {
    /// Canonical schema bytes (hashed as the schema hash).
    pub schema: Vec<u8>,
    /// The schema without the left-out properties; `Some` exactly when the value's is.
    pub reduced: Option<Vec<u8>>,
}

impl LookupTexts {
    /// All four digests.
    pub fn hashes(self, algo: HashAlgorithm) -> LookupHashes {
        let value = algo.digest(&self.value.canonical);
        let schema = algo.digest_recurring(&self.schema.schema);
        let reduced_value = self
            .value
            .reduced
            .as_ref()
            .map_or(value, |v| algo.digest(v));
        let reduced_schema = self
            .schema
            .reduced
            .as_ref()
            .map_or(schema, |s| algo.digest_recurring(s));
        LookupHashes {
            value,
            schema,
            reduced_value,
            reduced_schema,
            canonical: self.value.canonical,
        }
    }
}

/// [`LookupTexts`] of one payload, from the single walk that computes the exact hashes: the
/// reduced value is the canonical form with those root entries skipped, and the reduced
/// schema the root schema without those properties — what processing the value with the
/// fields removed gives, without a second parse.
pub fn lookup_texts(json: &[u8], merges: Option<&Merges>) -> Result<LookupTexts, String> {
    let (value, schema) = walk_lookup(json, merges, true)?;
    Ok(LookupTexts {
        value,
        schema: schema.expect("schema requested"),
    })
}

/// Only the value half of [`lookup_texts`]: a request answered at a value-hash level never
/// needs its schema, and building the schema tree is a good part of the walk.
pub fn lookup_value_texts(json: &[u8], merges: Option<&Merges>) -> Result<ValueTexts, String> {
    Ok(walk_lookup(json, merges, false)?.0)
}

fn walk_lookup(
    json: &[u8],
    merges: Option<&Merges>,
    schema: bool,
) -> Result<(ValueTexts, Option<SchemaTexts>), String> {
    with_sinks(|sinks| {
        sinks.clear_outputs();
        let emit = Emit {
            schema,
            reduced: merges.is_some_and(Merges::ignores_any),
            ..Emit::CANON
        };
        let tree = walk(json, sinks, emit, merges)?;
        let reduced_by = merges.filter(|_| !sinks.reduced.is_empty());
        let schema = tree.map(|tree| {
            let mut schema = Vec::with_capacity(128);
            tree.write_canonical(&mut schema);
            let reduced = reduced_by.map(|m| {
                let mut reduced = Vec::with_capacity(schema.len());
                tree.write_canonical_without(|k| m.ignores(k), &mut reduced);
                reduced
            });
            SchemaTexts { schema, reduced }
        });
        let value = ValueTexts {
            canonical: sinks.canon.clone(),
            reduced: reduced_by.map(|_| sinks.reduced.clone()),
        };
        Ok((value, schema))
    })
}

/// [`lookup_texts`], digested.
pub fn lookup_hashes(
    json: &[u8],
    merges: Option<&Merges>,
    algo: HashAlgorithm,
) -> Result<LookupHashes, String> {
    Ok(lookup_texts(json, merges)?.hashes(algo))
}

/// The stored value is the attribute's own JSON text when that is safe to put on a JSONL line
/// (no line breaks between tokens; JSON strings cannot hold raw ones), which it is for
/// anything `JSON.stringify` produced. Only other input is re-serialized compactly. The walk
/// validates the text either way.
fn stored_verbatim(json: &[u8]) -> Option<&[u8]> {
    let trimmed = json.trim_ascii();
    memchr::memchr2(b'\n', b'\r', trimmed)
        .is_none()
        .then_some(trimmed)
}

/// Hashes a payload exactly as the exporter does. `merges_json` is the merge map as JSON
/// text (the `td.*SchemaMerges` attribute).
///
/// ```
/// use offloop::{hash_payload, HashAlgorithm};
/// let p = hash_payload(br#"{"text":"SELECT 1","values":[1,"a"]}"#, None, HashAlgorithm::Sha256).unwrap();
/// assert_eq!(p.value_hash, "6e980c78ddf677ddfa725dcefde674e997182def57ede6d04f8d79136eb4b4a8");
/// ```
pub fn hash_payload(
    json: &[u8],
    merges_json: Option<&[u8]>,
    algo: HashAlgorithm,
) -> Result<Payload, String> {
    let merges = match merges_json {
        Some(m) => Some(Merges::parse_shared(m).map_err(|e| format!("schema merges: {e}"))?),
        None => None,
    };
    process(json, merges.as_deref(), algo)
}

/// Compact JSON and `google.protobuf.Struct` bytes of a value that is stored but not hashed
/// (`td.metadata`).
pub fn encode_value(json: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut sinks = Sinks::with_capacity(json.len());
    let verbatim = stored_verbatim(json);
    let emit = Emit {
        compact: verbatim.is_none(),
        pb: true,
        schema: false,
        reduced: false,
    };
    walk(json, &mut sinks, emit, None)?;
    Ok((
        verbatim.map(<[u8]>::to_vec).unwrap_or(sinks.compact),
        sinks.pb,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::types;

    fn sha(json: &str, merges: Option<&str>) -> Payload {
        hash_payload(
            json.as_bytes(),
            merges.map(str::as_bytes),
            HashAlgorithm::Sha256,
        )
        .unwrap()
    }

    #[test]
    fn reference_vectors() {
        // tusk-drift-spec §7.
        let p = sha("{}", None);
        assert_eq!(
            p.value_hash,
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(
            p.schema_hash,
            "ab249fbec6dbf0d17e3d2eae4ede338e9d8b20f6f442559935a494a5ad09f9a5"
        );

        let p = sha(r#"{"text":"SELECT 1","values":[1,"a"]}"#, None);
        assert_eq!(
            p.schema_hash,
            "d556154172a9ec3523dc5aef54575a356c2e4c15a8649afb12f42122e87dd968"
        );

        let p = sha(
            r#"{"text":"SELECT $1","values":[42]}"#,
            Some(r#"{"values":{"matchImportance":0}}"#),
        );
        assert_eq!(
            p.value_hash,
            "2c3e9a035824dff185a0ffad5b044307bf2d123f487c8afb4bdbd7ac57d87c20"
        );
        assert_eq!(
            p.schema_hash,
            "bd8d7c8de7c78412b3c53258af006fa1cf43b101ef549899a8e388950a5a190f"
        );

        let p = sha(
            r#"{"method":"POST","headers":{"content-type":"application/json"},"body":"eyJrIjoidiJ9"}"#,
            Some(r#"{"body":{"encoding":1,"decodedType":1},"headers":{"matchImportance":0}}"#),
        );
        assert_eq!(
            p.value_hash,
            "d5b30f5201ae23f8736fd9c2da2750ad946fa3716ae873e74f597c943dffff9a"
        );
        assert_eq!(
            p.schema_hash,
            "e3afd1fcd38fc046cf9c62c6d2a4cb194bac52b0993c0a5510b279df9cd8d1da"
        );
        // The stored value keeps the base64 body.
        assert!(String::from_utf8(p.value_json)
            .unwrap()
            .contains("eyJrIjoidiJ9"));
        let body = &p
            .schema
            .properties
            .iter()
            .find(|(k, _)| k == "body")
            .unwrap()
            .1;
        assert_eq!(body.ty, types::OBJECT);

        let p = sha(r#"{"10":"a","9":"b"}"#, None);
        assert_eq!(
            p.value_hash,
            "32c76047634ee8d61aeb727dee6fcb2507b60cc4fe6ecce96d04274d6a9c8c03"
        );
    }

    #[test]
    fn invalid_json_in_merged_body_restores_original_for_explicit_json() {
        // base64 of `{bad`
        let p = sha(
            r#"{"body":"e2JhZA=="}"#,
            Some(r#"{"body":{"encoding":1,"decodedType":1}}"#),
        );
        assert_eq!(p.canonical, br#"{"body":"e2JhZA=="}"#);
        let p = sha(r#"{"body":"e2JhZA=="}"#, Some(r#"{"body":{"encoding":1}}"#));
        assert_eq!(p.canonical, br#"{"body":"{bad"}"#);
    }

    #[test]
    fn a_body_that_fails_to_parse_midway_leaves_no_partial_entries() {
        // base64 of `{"a":1,}`: the decoded text starts an object, then fails.
        let p = sha(
            r#"{"a":{"x":1},"b":"eyJhIjoxLH0=","c":2}"#,
            Some(r#"{"b":{"encoding":1}}"#),
        );
        assert_eq!(
            String::from_utf8(p.canonical).unwrap(),
            r#"{"a":{"x":1},"b":"{\"a\":1,}","c":2}"#
        );
    }

    #[test]
    fn array_root_with_merges_is_spread() {
        let p = sha(r#"["x",1]"#, Some("{}"));
        assert_eq!(p.canonical, br#"{"0":"x","1":1}"#);
        assert!(p.struct_bytes.is_empty());
        assert_eq!(p.value_json, br#"["x",1]"#);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = hash_payload(b"{\"a\":1", None, HashAlgorithm::Blake3).unwrap_err();
        assert!(e.starts_with("invalid JSON"), "{e}");
        let e = hash_payload(&[b'"', 0xff, b'"'], None, HashAlgorithm::Blake3).unwrap_err();
        assert!(e.contains("UTF-8"), "{e}");
        let e = hash_payload(b"{}", Some(b"[]"), HashAlgorithm::Blake3).unwrap_err();
        assert!(e.starts_with("schema merges"), "{e}");
    }
}
