//! The single pass over a payload's JSON bytes.
//!
//! serde_json tokenizes and validates (UTF-8, escapes, numbers, a nesting limit of 128); this
//! visitor emits, while tokens arrive and without building a tree:
//! - `canon`: the canonical bytes that are hashed (JS key order, JS numbers, duplicate keys
//!   resolved last-wins like `JSON.parse`, `__proto__` dropped like the JS reference),
//! - `pb`: the `google.protobuf.Struct` encoding for the protobuf `Span`,
//! - `compact` (optional): the value re-written compactly in document order,
//! - the inferred [`Schema`] (only for the nodes the schema looks at: element 0 of arrays).
//!
//! Top-level keys named in schema merges are hashed and schema-inferred *decoded* (base64,
//! then JSON) while `compact` and `pb` keep the stored, encoded value (reference §2.4).
//!
//! Allocation: keys, per-object entries, list ranges and the reordering scratch space live in
//! stacks inside [`Sinks`] that are reused across nodes, so a walk allocates only when a
//! buffer grows and for schema nodes.

use std::cmp::Ordering;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::escape::write_json_str;
use super::keys::cmp_js_keys;
use super::number::JsNumber;
use super::pb;
use crate::merges::{Merge, Merges};
use crate::schema::{types, Schema};

/// Output buffers of one walk, plus the reusable working stacks.
#[derive(Default, Debug)]
pub(crate) struct Sinks {
    pub compact: Vec<u8>,
    pub canon: Vec<u8>,
    pub pb: Vec<u8>,
    keys: String,
    entries: Vec<Entry>,
    ranges: Vec<Range<usize>>,
    order: Vec<usize>,
    scratch: Vec<u8>,
    /// The last object shape seen at each depth: rows of a result set share their keys, so
    /// their canonical order is computed once.
    shapes: Vec<Shape>,
}

#[derive(Debug, Default)]
struct Shape {
    keys: String,
    lens: Vec<usize>,
    order: Vec<usize>,
    sorted: bool,
}

impl Sinks {
    pub fn with_capacity(n: usize) -> Sinks {
        Sinks {
            canon: Vec::with_capacity(n + 64),
            pb: Vec::with_capacity(n + n / 2),
            scratch: Vec::with_capacity(n / 4),
            ..Sinks::default()
        }
    }
}

/// Which outputs to produce. Canonical bytes are always produced.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Emit {
    pub compact: bool,
    pub pb: bool,
    pub schema: bool,
}

impl Emit {
    pub const CANON: Emit = Emit {
        compact: false,
        pb: false,
        schema: false,
    };
}

/// Walks `bytes`, appending to `sinks`. `merges` is `Some` when the payload came with a merge
/// map (even an empty one: JS then spreads the root into a fresh object).
pub(crate) fn walk(
    bytes: &[u8],
    sinks: &mut Sinks,
    emit: Emit,
    merges: Option<&Merges>,
) -> Result<Option<Schema>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let schema = Walker {
        sinks,
        emit,
        depth: 0,
        root: true,
        merges,
        decode: None,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(schema)
}

struct Walker<'s, 'm> {
    sinks: &'s mut Sinks,
    emit: Emit,
    depth: usize,
    /// The payload root: its protobuf form is a `Struct` (empty unless it is an object).
    root: bool,
    /// Only at the root.
    merges: Option<&'m Merges>,
    /// Set for a top-level value whose merge decodes it.
    decode: Option<&'m Merge>,
}

#[derive(Debug)]
struct Entry {
    /// Into `Sinks::keys`.
    key: Range<usize>,
    /// `"key":value` in `canon`.
    canon: Range<usize>,
    /// The value's `google.protobuf.Value` in `pb`.
    pb: Range<usize>,
    schema: Option<Schema>,
}

fn write_str(out: &mut Vec<u8>, s: &str, plain: bool) {
    if plain {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        write_json_str(out, s);
    }
}

/// Copies object keys into `Sinks::keys`; `plain` when the source had no escapes in it.
struct KeySeed<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = (Range<usize>, bool);
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = (Range<usize>, bool);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        let start = self.0.len();
        self.0.push_str(s);
        Ok((start..self.0.len(), true))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        let start = self.0.len();
        self.0.push_str(s);
        Ok((start..self.0.len(), false))
    }
}

impl<'s, 'm> Walker<'s, 'm> {
    fn child<'c>(&'c mut self, emit: Emit, decode: Option<&'m Merge>) -> Walker<'c, 'm> {
        Walker {
            sinks: self.sinks,
            emit,
            depth: self.depth + 1,
            root: false,
            merges: None,
            decode,
        }
    }

    /// Whether this node writes a `google.protobuf.Value` (the root writes a `Struct`).
    fn pb_value(&self) -> bool {
        self.emit.pb && !self.root
    }

    /// `{...primitive}` in JS is `{}`: applies at the root of a payload with merges.
    fn spread_root(&self) -> bool {
        self.root && self.merges.is_some()
    }

    fn scalar(&mut self, ty: i32, text: &[u8], pb: impl FnOnce(&mut Vec<u8>)) -> Option<Schema> {
        if self.emit.compact {
            self.sinks.compact.extend_from_slice(text);
        }
        if self.spread_root() {
            self.sinks.canon.extend_from_slice(b"{}");
            return self.emit.schema.then(|| Schema::leaf(types::OBJECT));
        }
        self.sinks.canon.extend_from_slice(text);
        if self.pb_value() {
            pb(&mut self.sinks.pb);
        }
        self.emit.schema.then(|| Schema::leaf(ty))
    }

    fn number(&mut self, v: f64) -> Option<Schema> {
        let mut buf = JsNumber::default();
        let text = buf.format(v);
        self.scalar(types::NUMBER, text.as_bytes(), |o| pb::value_number(o, v))
    }

    fn string(&mut self, s: &str, plain: bool) -> Option<Schema> {
        if let Some(merge) = self.decode {
            return self.decoded_string(merge, s, plain);
        }
        if self.spread_root() {
            return self.spread_string(s, plain);
        }
        let start = self.sinks.canon.len();
        write_str(&mut self.sinks.canon, s, plain);
        if self.emit.compact {
            let Sinks { canon, compact, .. } = &mut *self.sinks;
            compact.extend_from_slice(&canon[start..]);
        }
        if self.pb_value() {
            pb::value_string(&mut self.sinks.pb, s);
        }
        self.emit.schema.then(|| Schema::leaf(types::STRING))
    }

    /// A top-level string under a decoding merge: stored as is, hashed decoded.
    fn decoded_string(&mut self, merge: &Merge, s: &str, plain: bool) -> Option<Schema> {
        if self.emit.compact {
            write_str(&mut self.sinks.compact, s, plain);
        }
        if self.emit.pb {
            pb::value_string(&mut self.sinks.pb, s);
        }
        let text = merge.decode_text(s);
        if merge.parses_json() {
            let mark = self.sinks.canon.len();
            // A parse that fails midway leaves partial entries on the shared stacks.
            let stacks = (
                self.sinks.entries.len(),
                self.sinks.keys.len(),
                self.sinks.ranges.len(),
            );
            let emit = Emit {
                compact: false,
                pb: false,
                schema: self.emit.schema,
            };
            let mut de = serde_json::Deserializer::from_str(&text);
            let parsed = self
                .child(emit, None)
                .deserialize(&mut de)
                .and_then(|schema| de.end().map(|_| schema));
            match parsed {
                Ok(schema) => return schema,
                Err(_) => {
                    self.sinks.canon.truncate(mark);
                    self.sinks.entries.truncate(stacks.0);
                    self.sinks.keys.truncate(stacks.1);
                    self.sinks.ranges.truncate(stacks.2);
                }
            }
            if merge.restores_original_on_parse_error() {
                write_str(&mut self.sinks.canon, s, plain);
                return self.emit.schema.then(|| Schema::leaf(types::STRING));
            }
        }
        write_json_str(&mut self.sinks.canon, &text);
        self.emit.schema.then(|| Schema::leaf(types::STRING))
    }

    /// `{..."str"}` in JS: an object of UTF-16 code units.
    fn spread_string(&mut self, s: &str, plain: bool) -> Option<Schema> {
        if self.emit.compact {
            write_str(&mut self.sinks.compact, s, plain);
        }
        let canon = &mut self.sinks.canon;
        canon.push(b'{');
        let mut props = Vec::new();
        for (i, unit) in s.encode_utf16().enumerate() {
            if i > 0 {
                canon.push(b',');
            }
            canon.extend_from_slice(format!("\"{i}\":").as_bytes());
            match char::from_u32(unit as u32) {
                Some(c) => write_json_str(canon, c.encode_utf8(&mut [0; 4])),
                None => canon.extend_from_slice(format!("\"\\u{unit:04x}\"").as_bytes()),
            }
            if self.emit.schema {
                props.push((i.to_string(), Schema::leaf(types::STRING)));
            }
        }
        canon.push(b'}');
        self.emit.schema.then(|| Schema {
            properties: props,
            ..Schema::leaf(types::OBJECT)
        })
    }

    /// Finishes an object whose entries are `entries[ebase..]` and whose canonical bytes
    /// (`{"k":v,…}` in document order) start at `canon_base`: puts them in canonical order
    /// (unless they already are), writes the `Struct`, builds the schema.
    fn finish_object(
        &mut self,
        ebase: usize,
        kbase: usize,
        canon_base: usize,
        pb_base: usize,
    ) -> Option<Schema> {
        let pb_on = self.emit.pb;
        let root = self.root;
        let Sinks {
            canon,
            pb: pbuf,
            keys,
            entries,
            order,
            scratch,
            shapes,
            ..
        } = &mut *self.sinks;
        let depth = self.depth;
        let es = &mut entries[ebase..];
        let key = |e: &Entry| &keys[e.key.clone()];

        // Canonical order: keep the last of equal keys (`JSON.parse`), drop `__proto__`.
        // This object's keys are `keys[kbase..]` (children truncated theirs): if they match
        // the last object at this depth, reuse its order.
        if shapes.len() <= depth {
            shapes.resize_with(depth + 1, Shape::default);
        }
        let shape = &mut shapes[depth];
        let same_shape = shape.keys == keys[kbase..]
            && shape.lens.len() == es.len()
            && shape
                .lens
                .iter()
                .zip(es.iter())
                .all(|(&l, e)| l == e.key.len());
        if !same_shape {
            shape.keys.clear();
            shape.keys.push_str(&keys[kbase..]);
            shape.lens.clear();
            shape.lens.extend(es.iter().map(|e| e.key.len()));
            shape.sorted = es
                .windows(2)
                .all(|w| cmp_js_keys(key(&w[0]), key(&w[1])) == Ordering::Less)
                && !es.iter().any(|e| key(e) == "__proto__");
            shape.order.clear();
            shape.order.extend(0..es.len());
            if !shape.sorted {
                let order = &mut shape.order;
                order.sort_by(|&a, &b| cmp_js_keys(key(&es[a]), key(&es[b])).then(a.cmp(&b)));
                let mut kept = 0;
                for n in 0..order.len() {
                    let i = order[n];
                    if key(&es[i]) == "__proto__" {
                        continue;
                    }
                    if kept > 0 && key(&es[order[kept - 1]]) == key(&es[i]) {
                        order[kept - 1] = i;
                    } else {
                        order[kept] = i;
                        kept += 1;
                    }
                }
                order.truncate(kept);
            }
        }
        order.clear();
        order.extend_from_slice(&shape.order);
        if !shape.sorted {
            scratch.clear();
            scratch.push(b'{');
            for (n, &i) in order.iter().enumerate() {
                if n > 0 {
                    scratch.push(b',');
                }
                scratch.extend_from_slice(&canon[es[i].canon.clone()]);
            }
            scratch.push(b'}');
            canon.truncate(canon_base);
            canon.extend_from_slice(scratch);
        }

        if pb_on {
            scratch.clear();
            for e in es.iter() {
                let k = key(e).as_bytes();
                let v = &pbuf[e.pb.clone()];
                let entry_len =
                    1 + varint_len(k.len()) + k.len() + 1 + varint_len(v.len()) + v.len();
                pb::put_tag(scratch, 1, pb::LEN);
                pb::put_varint(scratch, entry_len as u64);
                pb::put_len_prefixed(scratch, 1, k);
                pb::put_len_prefixed(scratch, 2, v);
            }
            pbuf.truncate(pb_base);
            if root {
                pbuf.extend_from_slice(scratch);
            } else {
                pb::put_len_prefixed(pbuf, 5, scratch);
            }
        }

        let schema = self.emit.schema.then(|| {
            let properties = order
                .iter()
                .map(|&i| {
                    let e = &mut es[i];
                    let mut schema = e.schema.take().unwrap_or_else(|| Schema::leaf(types::NULL));
                    let name = keys[e.key.clone()].to_string();
                    if let Some(merge) = self.merges.and_then(|m| m.get(&name)) {
                        schema.merge = Some(Arc::new(merge.clone()));
                    }
                    (name, schema)
                })
                .collect();
            Schema {
                properties,
                ..Schema::leaf(types::OBJECT)
            }
        });
        entries.truncate(ebase);
        keys.truncate(kbase);
        schema
    }
}

fn varint_len(n: usize) -> usize {
    ((usize::BITS - (n | 1).leading_zeros()) as usize).div_ceil(7)
}

impl<'de> DeserializeSeed<'de> for Walker<'_, '_> {
    type Value = Option<Schema>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walker<'_, '_> {
    type Value = Option<Schema>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<Self::Value, E> {
        Ok(self.scalar(types::NULL, b"null", pb::value_null))
    }

    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<Self::Value, E> {
        let text: &[u8] = if v { b"true" } else { b"false" };
        Ok(self.scalar(types::BOOLEAN, text, |o| pb::value_bool(o, v)))
    }

    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<Self::Value, E> {
        Ok(self.number(v as f64))
    }

    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<Self::Value, E> {
        Ok(self.number(v as f64))
    }

    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<Self::Value, E> {
        Ok(self.number(v))
    }

    fn visit_borrowed_str<E: de::Error>(mut self, s: &'de str) -> Result<Self::Value, E> {
        // Borrowed straight from the source: it had no escapes, so it needs none.
        Ok(self.string(s, true))
    }

    fn visit_str<E: de::Error>(mut self, s: &str) -> Result<Self::Value, E> {
        Ok(self.string(s, false))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Self::Value, A::Error> {
        // With merges, JS spreads an array root into `{"0":…,"1":…}` before hashing.
        let spread = self.spread_root();
        let canon_base = self.sinks.canon.len();
        let pb_base = self.sinks.pb.len();
        let ebase = self.sinks.entries.len();
        let kbase = self.sinks.keys.len();
        let rbase = self.sinks.ranges.len();
        let pb_on = self.pb_value();
        let mut items: Option<Schema> = None;
        if self.emit.compact {
            self.sinks.compact.push(b'[');
        }
        self.sinks.canon.push(if spread { b'{' } else { b'[' });
        let mut i = 0usize;
        loop {
            let sep = i > 0;
            if sep {
                if self.emit.compact {
                    self.sinks.compact.push(b',');
                }
                self.sinks.canon.push(b',');
            }
            let canon_mark = self.sinks.canon.len();
            let mut key = 0..0;
            let mut decode = None;
            if spread {
                let name = i.to_string();
                let keys = &mut self.sinks.keys;
                key = keys.len()..keys.len() + name.len();
                keys.push_str(&name);
                write_str(&mut self.sinks.canon, &name, true);
                self.sinks.canon.push(b':');
                decode = self
                    .merges
                    .and_then(|m| m.get(&name))
                    .filter(|m| m.decodes());
            }
            let ps = self.sinks.pb.len();
            let emit = Emit {
                compact: self.emit.compact,
                pb: pb_on,
                schema: self.emit.schema && (spread || i == 0),
            };
            let Some(schema) = seq.next_element_seed(self.child(emit, decode))? else {
                // No element: undo the separator (and the spread key).
                self.sinks.canon.truncate(canon_mark - sep as usize);
                if sep && self.emit.compact {
                    self.sinks.compact.pop();
                }
                if spread {
                    self.sinks.keys.truncate(key.start);
                }
                break;
            };
            if spread {
                let canon = canon_mark..self.sinks.canon.len();
                self.sinks.entries.push(Entry {
                    key,
                    canon,
                    pb: 0..0,
                    schema,
                });
            } else {
                if i == 0 {
                    items = schema;
                }
                if pb_on {
                    self.sinks.ranges.push(ps..self.sinks.pb.len());
                }
            }
            i += 1;
        }
        if self.emit.compact {
            self.sinks.compact.push(b']');
        }
        if spread {
            self.sinks.canon.push(b'}');
            let saved = self.emit.pb;
            self.emit.pb = false; // an array root has an empty Struct
            let schema = self.finish_object(ebase, kbase, canon_base, pb_base);
            self.emit.pb = saved;
            return Ok(schema);
        }
        self.sinks.canon.push(b']');
        if pb_on {
            let Sinks {
                pb: pbuf,
                ranges,
                scratch,
                ..
            } = &mut *self.sinks;
            scratch.clear();
            for r in &ranges[rbase..] {
                pb::put_len_prefixed(scratch, 1, &pbuf[r.clone()]);
            }
            ranges.truncate(rbase);
            pbuf.truncate(pb_base);
            pb::put_len_prefixed(pbuf, 6, scratch);
        }
        Ok(self.emit.schema.then(|| Schema {
            items: items.map(Box::new),
            ..Schema::leaf(types::ORDERED_LIST)
        }))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
        let canon_base = self.sinks.canon.len();
        let pb_base = self.sinks.pb.len();
        let ebase = self.sinks.entries.len();
        let kbase = self.sinks.keys.len();
        if self.emit.compact {
            self.sinks.compact.push(b'{');
        }
        self.sinks.canon.push(b'{');
        let mut n = 0usize;
        while let Some((key, plain)) = map.next_key_seed(KeySeed(&mut self.sinks.keys))? {
            let Sinks {
                canon,
                compact,
                keys,
                ..
            } = &mut *self.sinks;
            let name = &keys[key.clone()];
            if n > 0 {
                canon.push(b',');
            }
            let cs = canon.len();
            write_str(canon, name, plain);
            canon.push(b':');
            if self.emit.compact {
                if n > 0 {
                    compact.push(b',');
                }
                compact.extend_from_slice(&canon[cs..]);
            }
            let decode = self
                .merges
                .and_then(|m| m.get(name))
                .filter(|m| m.decodes());
            let ps = self.sinks.pb.len();
            let emit = self.emit;
            let schema = map.next_value_seed(self.child(emit, decode))?;
            let canon = cs..self.sinks.canon.len();
            let pb = ps..self.sinks.pb.len();
            self.sinks.entries.push(Entry {
                key,
                canon,
                pb,
                schema,
            });
            n += 1;
        }
        if self.emit.compact {
            self.sinks.compact.push(b'}');
        }
        self.sinks.canon.push(b'}');
        Ok(self.finish_object(ebase, kbase, canon_base, pb_base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Emit = Emit {
        compact: true,
        pb: true,
        schema: true,
    };

    fn canon(json: &str) -> String {
        let mut s = Sinks::default();
        walk(json.as_bytes(), &mut s, ALL, None).unwrap();
        String::from_utf8(s.canon).unwrap()
    }

    #[test]
    fn canonical_form() {
        assert_eq!(
            canon(r#"{"b":1,"a":[1.0,2e0,{"z":null,"y":true}]}"#),
            r#"{"a":[1,2,{"y":true,"z":null}],"b":1}"#
        );
        assert_eq!(canon(r#"{"10":"a","9":"b"}"#), r#"{"9":"b","10":"a"}"#);
        assert_eq!(canon(r#"{"a":1,"a":2}"#), r#"{"a":2}"#);
        assert_eq!(canon(r#"{"b":1,"a":2,"b":3}"#), r#"{"a":2,"b":3}"#);
        assert_eq!(
            canon(r#"{"__proto__":1,"x":0.000001}"#),
            r#"{"x":0.000001}"#
        );
        assert_eq!(
            canon(r#"{"a\u0041":"\u0041\n","a":[]}"#),
            "{\"a\":[],\"aA\":\"A\\n\"}"
        );
        assert_eq!(canon(r#"  "s"  "#), r#""s""#);
        assert_eq!(canon("[]"), "[]");
        assert_eq!(canon("{}"), "{}");
        assert_eq!(canon(r#"[[],{},[1]]"#), r#"[[],{},[1]]"#);
        // Shape cache: same concatenated keys, different boundaries or order.
        assert_eq!(
            canon(
                r#"[{"c":2,"ab":1},{"c":2,"ab":1},{"a":1,"bc":2},{"ab":3,"c":4},{"c":5,"c":6,"ab":7}]"#
            ),
            r#"[{"ab":1,"c":2},{"ab":1,"c":2},{"a":1,"bc":2},{"ab":3,"c":4},{"ab":7,"c":6}]"#
        );
        assert_eq!(
            canon(r#"[{"m":{"z":1,"y":2},"b":0},{"m":{"z":3,"y":4},"b":1}]"#),
            r#"[{"b":0,"m":{"y":2,"z":1}},{"b":1,"m":{"y":4,"z":3}}]"#
        );
    }

    #[test]
    fn compact_keeps_document_order() {
        let mut s = Sinks::default();
        walk(
            br#" { "b" : 1 , "a" : [ 1e21, "\u0041" ] } "#,
            &mut s,
            ALL,
            None,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(s.compact).unwrap(),
            r#"{"b":1,"a":[1e+21,"A"]}"#
        );
    }

    #[test]
    fn varint_lengths() {
        for n in [0usize, 1, 127, 128, 16383, 16384, 1 << 21, usize::MAX >> 1] {
            let mut v = Vec::new();
            pb::put_varint(&mut v, n as u64);
            assert_eq!(varint_len(n), v.len(), "{n}");
        }
    }

    #[test]
    fn errors_are_reported_not_panics() {
        let mut s = Sinks::default();
        assert!(walk(b"{\"a\":", &mut s, ALL, None).is_err());
        let deep = "[".repeat(100_000);
        assert!(walk(deep.as_bytes(), &mut s, ALL, None).is_err());
        assert!(walk(b"\"\\ud800\"", &mut s, ALL, None).is_err());
        assert!(walk(b"\"\xff\"", &mut s, ALL, None).is_err());
    }
}
