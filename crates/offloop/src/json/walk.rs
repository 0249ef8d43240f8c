//! The single pass over a payload's JSON bytes.
//!
//! serde_json tokenizes and validates (UTF-8, escapes, numbers, a nesting limit of 128); this
//! visitor emits, while tokens arrive and without building a tree:
//! - `compact`: the value re-written compactly in document order (the JSONL `inputValue`),
//! - `canon`: the canonical bytes that are hashed (JS key order, JS numbers, duplicate keys
//!   resolved last-wins like `JSON.parse`, `__proto__` dropped like the JS reference),
//! - `pb`: the `google.protobuf.Struct` encoding for the protobuf `Span`,
//! - the inferred [`Schema`] (only for the nodes the schema looks at: element 0 of arrays).
//!
//! Top-level keys named in schema merges are hashed and schema-inferred *decoded* (base64,
//! then JSON) while `compact` and `pb` keep the stored, encoded value (reference §2.4).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::escape::write_json_str;
use super::keys::cmp_js_keys;
use super::number::write_js_number;
use super::pb;
use crate::merges::{Merge, Merges};
use crate::schema::{types, Schema};

/// Output buffers of one walk.
#[derive(Default, Debug)]
pub(crate) struct Sinks {
    pub compact: Vec<u8>,
    pub canon: Vec<u8>,
    pub pb: Vec<u8>,
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
    pub const ALL: Emit = Emit {
        compact: true,
        pb: true,
        schema: true,
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
    /// The payload root: its protobuf form is a `Struct` (empty unless it is an object).
    root: bool,
    /// Only at the root.
    merges: Option<&'m Merges>,
    /// Set for a top-level value whose merge decodes it.
    decode: Option<&'m Merge>,
}

struct Entry {
    key: String,
    canon: Range<usize>,
    pb: Range<usize>,
    schema: Option<Schema>,
}

impl<'s, 'm> Walker<'s, 'm> {
    fn child<'c>(&'c mut self, emit: Emit, decode: Option<&'m Merge>) -> Walker<'c, 'm> {
        Walker {
            sinks: self.sinks,
            emit,
            root: false,
            merges: None,
            decode,
        }
    }

    fn pb_value(&self) -> bool {
        self.emit.pb && !self.root
    }

    fn scalar(
        &mut self,
        ty: i32,
        canon: impl Fn(&mut Vec<u8>),
        pb: impl Fn(&mut Vec<u8>),
    ) -> Option<Schema> {
        if self.root && self.merges.is_some() {
            // `{...primitive}` is `{}` in JS.
            self.sinks.canon.extend_from_slice(b"{}");
            if self.emit.compact {
                canon(&mut self.sinks.compact);
            }
            return self.emit.schema.then(|| Schema::leaf(types::OBJECT));
        }
        canon(&mut self.sinks.canon);
        if self.emit.compact {
            canon(&mut self.sinks.compact);
        }
        if self.pb_value() {
            pb(&mut self.sinks.pb);
        }
        self.emit.schema.then(|| Schema::leaf(ty))
    }

    fn number(&mut self, v: f64) -> Option<Schema> {
        self.scalar(
            types::NUMBER,
            |o| write_js_number(o, v),
            |o| pb::value_number(o, v),
        )
    }

    /// A top-level string under a decoding merge: stored as is, hashed decoded.
    fn decoded_string(&mut self, merge: &Merge, s: &str) -> Option<Schema> {
        if self.emit.compact {
            write_json_str(&mut self.sinks.compact, s);
        }
        if self.emit.pb {
            pb::value_string(&mut self.sinks.pb, s);
        }
        let text = merge.decode_text(s);
        if merge.parses_json() {
            let mark = self.sinks.canon.len();
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
                Err(_) => self.sinks.canon.truncate(mark),
            }
            if merge.restores_original_on_parse_error() {
                write_json_str(&mut self.sinks.canon, s);
                return self.emit.schema.then(|| Schema::leaf(types::STRING));
            }
        }
        write_json_str(&mut self.sinks.canon, &text);
        self.emit.schema.then(|| Schema::leaf(types::STRING))
    }

    /// `{..."str"}` in JS: an object of UTF-16 code units.
    fn spread_string(&mut self, s: &str) -> Option<Schema> {
        if self.emit.compact {
            write_json_str(&mut self.sinks.compact, s);
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

    /// Writes an object from its collected entries: canonical order, protobuf `Struct`, schema.
    fn finish_object(
        &mut self,
        entries: Vec<Entry>,
        canon_base: usize,
        pb_base: usize,
    ) -> Option<Schema> {
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by(|&a, &b| cmp_js_keys(&entries[a].key, &entries[b].key).then(a.cmp(&b)));
        // Keep the last of equal keys (`JSON.parse` semantics); drop `__proto__`.
        let mut kept: Vec<usize> = Vec::with_capacity(order.len());
        for &i in &order {
            if entries[i].key == "__proto__" {
                continue;
            }
            match kept.last_mut() {
                Some(last) if entries[*last].key == entries[i].key => *last = i,
                _ => kept.push(i),
            }
        }

        let canon = &mut self.sinks.canon;
        let mut obj = Vec::with_capacity(canon.len() - canon_base + entries.len() * 8 + 2);
        obj.push(b'{');
        for (n, &i) in kept.iter().enumerate() {
            if n > 0 {
                obj.push(b',');
            }
            write_json_str(&mut obj, &entries[i].key);
            obj.push(b':');
            obj.extend_from_slice(&canon[entries[i].canon.clone()]);
        }
        obj.push(b'}');
        canon.truncate(canon_base);
        canon.extend_from_slice(&obj);

        if self.emit.pb {
            let pbuf = &mut self.sinks.pb;
            let mut fields = Vec::with_capacity(pbuf.len() - pb_base + entries.len() * 8);
            let mut entry = Vec::new();
            for e in &entries {
                entry.clear();
                pb::put_len_prefixed(&mut entry, 1, e.key.as_bytes());
                pb::put_len_prefixed(&mut entry, 2, &pbuf[e.pb.clone()]);
                pb::put_len_prefixed(&mut fields, 1, &entry);
            }
            pbuf.truncate(pb_base);
            if self.root {
                pbuf.extend_from_slice(&fields);
            } else {
                pb::put_len_prefixed(pbuf, 5, &fields);
            }
        }

        if !self.emit.schema {
            return None;
        }
        let mut entries = entries;
        let mut properties = Vec::with_capacity(kept.len());
        for &i in &kept {
            let e = &mut entries[i];
            let mut schema = e.schema.take().unwrap_or_else(|| Schema::leaf(types::NULL));
            if let Some(merge) = self.merges.and_then(|m| m.get(&e.key)) {
                schema.merge = Some(Arc::new(merge.clone()));
            }
            properties.push((std::mem::take(&mut e.key), schema));
        }
        Some(Schema {
            properties,
            ..Schema::leaf(types::OBJECT)
        })
    }
}

impl<'de, 's, 'm> DeserializeSeed<'de> for Walker<'s, 'm> {
    type Value = Option<Schema>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 's, 'm> Visitor<'de> for Walker<'s, 'm> {
    type Value = Option<Schema>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<Self::Value, E> {
        Ok(self.scalar(
            types::NULL,
            |o| o.extend_from_slice(b"null"),
            pb::value_null,
        ))
    }

    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<Self::Value, E> {
        let text: &[u8] = if v { b"true" } else { b"false" };
        Ok(self.scalar(
            types::BOOLEAN,
            |o| o.extend_from_slice(text),
            |o| pb::value_bool(o, v),
        ))
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

    fn visit_str<E: de::Error>(mut self, s: &str) -> Result<Self::Value, E> {
        if let Some(merge) = self.decode {
            return Ok(self.decoded_string(merge, s));
        }
        if self.root && self.merges.is_some() {
            return Ok(self.spread_string(s));
        }
        Ok(self.scalar(
            types::STRING,
            |o| write_json_str(o, s),
            |o| pb::value_string(o, s),
        ))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Self::Value, A::Error> {
        // With merges, JS spreads an array root into `{"0":…,"1":…}` before hashing.
        let spread = self.root && self.merges.is_some();
        let canon_base = self.sinks.canon.len();
        let pb_base = self.sinks.pb.len();
        let pb_on = self.pb_value();
        let mut entries: Vec<Entry> = Vec::new();
        let mut pb_ranges: Vec<Range<usize>> = Vec::new();
        let mut items: Option<Schema> = None;
        if self.emit.compact {
            self.sinks.compact.push(b'[');
        }
        if !spread {
            self.sinks.canon.push(b'[');
        }
        let mut i = 0usize;
        loop {
            if i > 0 && self.emit.compact {
                self.sinks.compact.push(b',');
            }
            if i > 0 && !spread {
                self.sinks.canon.push(b',');
            }
            let (cs, ps) = (self.sinks.canon.len(), self.sinks.pb.len());
            let decode = if spread {
                self.merges
                    .and_then(|m| m.get(&i.to_string()))
                    .filter(|m| m.decodes())
            } else {
                None
            };
            let emit = Emit {
                compact: self.emit.compact,
                pb: pb_on,
                schema: self.emit.schema && (spread || i == 0),
            };
            let Some(schema) = seq.next_element_seed(self.child(emit, decode))? else {
                // `next_element_seed` wrote nothing; undo the separator.
                if i > 0 && self.emit.compact {
                    self.sinks.compact.pop();
                }
                if i > 0 && !spread {
                    self.sinks.canon.pop();
                }
                break;
            };
            if spread {
                entries.push(Entry {
                    key: i.to_string(),
                    canon: cs..self.sinks.canon.len(),
                    pb: 0..0,
                    schema,
                });
            } else {
                if i == 0 {
                    items = schema;
                }
                pb_ranges.push(ps..self.sinks.pb.len());
            }
            i += 1;
        }
        if self.emit.compact {
            self.sinks.compact.push(b']');
        }
        if spread {
            let saved = self.emit.pb;
            self.emit.pb = false; // an array root has an empty Struct
            let schema = self.finish_object(entries, canon_base, pb_base);
            self.emit.pb = saved;
            return Ok(schema);
        }
        self.sinks.canon.push(b']');
        if pb_on {
            let pbuf = &mut self.sinks.pb;
            let mut list = Vec::with_capacity(pbuf.len() - pb_base + pb_ranges.len() * 3);
            for r in &pb_ranges {
                pb::put_len_prefixed(&mut list, 1, &pbuf[r.clone()]);
            }
            pbuf.truncate(pb_base);
            pb::put_len_prefixed(pbuf, 6, &list);
        }
        Ok(self.emit.schema.then(|| Schema {
            items: items.map(Box::new),
            ..Schema::leaf(types::ORDERED_LIST)
        }))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
        let canon_base = self.sinks.canon.len();
        let pb_base = self.sinks.pb.len();
        let mut entries: Vec<Entry> = Vec::new();
        if self.emit.compact {
            self.sinks.compact.push(b'{');
        }
        while let Some(key) = map.next_key::<String>()? {
            if self.emit.compact {
                if !entries.is_empty() {
                    self.sinks.compact.push(b',');
                }
                write_json_str(&mut self.sinks.compact, &key);
                self.sinks.compact.push(b':');
            }
            let decode = self
                .merges
                .and_then(|m| m.get(&key))
                .filter(|m| m.decodes());
            let (cs, ps) = (self.sinks.canon.len(), self.sinks.pb.len());
            let emit = Emit {
                pb: self.emit.pb,
                ..self.emit
            };
            let schema = map.next_value_seed(self.child(emit, decode))?;
            entries.push(Entry {
                key,
                canon: cs..self.sinks.canon.len(),
                pb: ps..self.sinks.pb.len(),
                schema,
            });
        }
        if self.emit.compact {
            self.sinks.compact.push(b'}');
        }
        Ok(self.finish_object(entries, canon_base, pb_base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(json: &str) -> String {
        let mut s = Sinks::default();
        walk(json.as_bytes(), &mut s, Emit::ALL, None).unwrap();
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
        assert_eq!(
            canon(r#"{"__proto__":1,"x":0.000001}"#),
            r#"{"x":0.000001}"#
        );
        assert_eq!(canon(r#"  "s"  "#), r#""s""#);
    }

    #[test]
    fn compact_keeps_document_order() {
        let mut s = Sinks::default();
        walk(
            br#" { "b" : 1 , "a" : [ 1e21 ] } "#,
            &mut s,
            Emit::ALL,
            None,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(s.compact).unwrap(),
            r#"{"b":1,"a":[1e+21]}"#
        );
    }

    #[test]
    fn errors_are_reported_not_panics() {
        let mut s = Sinks::default();
        assert!(walk(b"{\"a\":", &mut s, Emit::ALL, None).is_err());
        let deep = "[".repeat(100_000);
        assert!(walk(deep.as_bytes(), &mut s, Emit::ALL, None).is_err());
        assert!(walk(b"\"\\ud800\"", &mut s, Emit::ALL, None).is_err());
        assert!(walk(b"\"\xff\"", &mut s, Emit::ALL, None).is_err());
    }
}
