//! The single pass over a payload's JSON bytes.
//!
//! simd-json tokenizes and validates (UTF-8, escapes, numbers, a nesting limit of 128) into a
//! flat tape of tokens — no tree, no allocation per node. One walk over the tape emits:
//! - `canon`: the canonical bytes that are hashed (JS key order, JS numbers, duplicate keys
//!   resolved last-wins like `JSON.parse`, `__proto__` dropped like the JS reference),
//! - `pb`: the `google.protobuf.Struct` encoding for the protobuf `Span`,
//! - `compact` (optional): the value re-written compactly in document order,
//! - the inferred [`Schema`] (only for the nodes the schema looks at: element 0 of arrays),
//! - `reduced` (replay only): the canonical bytes without the root's `matchImportance: 0`
//!   fields, so the reduced value hash needs no second parse.
//!
//! Top-level keys named in schema merges are hashed and schema-inferred *decoded* (base64,
//! then JSON) while `compact` and `pb` keep the stored, encoded value (reference §2.4).
//!
//! Allocation: keys, per-object entries, list ranges, the reordering scratch space, the input
//! copy simd-json parses in place and its tape all live in [`Sinks`] and are reused, so a
//! walk allocates only when a buffer grows and for schema nodes.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

use simd_json::{Buffers, Node, StaticNode};

use super::escape::write_json_str;
use super::keys::cmp_js_keys;
use super::number::JsNumber;
use super::pb;
use crate::merges::{Merge, Merges};
use crate::schema::{types, Schema};

/// Deepest nesting accepted. Deeper input is an error, never a stack overflow.
pub const MAX_DEPTH: usize = 128;

/// Output buffers of one walk, plus the reusable working storage.
#[derive(Default)]
pub(crate) struct Sinks {
    pub compact: Vec<u8>,
    pub canon: Vec<u8>,
    pub pb: Vec<u8>,
    /// With [`Emit::reduced`]: `canon` without the root object's `matchImportance: 0` keys;
    /// empty when no such key is present (the reduced form is then `canon` itself).
    pub reduced: Vec<u8>,
    keys: String,
    entries: Vec<Entry>,
    ranges: Vec<Range<usize>>,
    order: Vec<usize>,
    scratch: Vec<u8>,
    /// The last object shape seen at each depth: rows of a result set share their keys, so
    /// their canonical order is computed once.
    shapes: Vec<Shape>,
    /// simd-json parses a padded copy of the input in place.
    input: Vec<u8>,
    buffers: Option<Buffers>,
    tape: Vec<Node<'static>>,
    /// Working storage for decoded JSON bodies (walked as documents of their own).
    decoded: Option<Box<Sinks>>,
}

impl std::fmt::Debug for Sinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sinks").finish_non_exhaustive()
    }
}

impl Sinks {
    /// Empties the outputs, keeping every buffer's capacity.
    pub fn clear_outputs(&mut self) {
        self.compact.clear();
        self.canon.clear();
        self.pb.clear();
        self.reduced.clear();
    }

    /// Bytes held by the reusable buffers (roughly: the parser's own buffers count as the
    /// input they were sized for).
    pub fn retained_bytes(&self) -> usize {
        let bytes = |v: &Vec<u8>| v.capacity();
        bytes(&self.compact)
            + bytes(&self.canon)
            + bytes(&self.pb)
            + bytes(&self.reduced)
            + bytes(&self.scratch)
            + 2 * bytes(&self.input)
            + self.keys.capacity()
            + self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.tape.capacity() * std::mem::size_of::<Node<'static>>()
            + self.decoded.as_ref().map_or(0, |d| d.retained_bytes())
    }

    pub fn with_capacity(n: usize) -> Sinks {
        Sinks {
            canon: Vec::with_capacity(n + 64),
            scratch: Vec::with_capacity(n / 4),
            ..Sinks::default()
        }
    }
}

#[derive(Debug, Default)]
struct Shape {
    keys: String,
    lens: Vec<usize>,
    order: Vec<usize>,
    sorted: bool,
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

/// Which outputs to produce. Canonical bytes are always produced.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Emit {
    pub compact: bool,
    pub pb: bool,
    pub schema: bool,
    /// `Sinks::reduced` (root objects only).
    pub reduced: bool,
}

impl Emit {
    pub const CANON: Emit = Emit {
        compact: false,
        pb: false,
        schema: false,
        reduced: false,
    };
}

/// Walks `bytes`, appending to `sinks`. `merges` is `Some` when the payload came with a merge
/// map (even an empty one: JS then spreads the root into a fresh object). Errors say what is
/// wrong and where, without naming the field (callers prefix it).
pub(crate) fn walk(
    bytes: &[u8],
    sinks: &mut Sinks,
    emit: Emit,
    merges: Option<&Merges>,
) -> Result<Option<Schema>, String> {
    let mut input = std::mem::take(&mut sinks.input);
    input.clear();
    input.extend_from_slice(bytes);
    input.resize(bytes.len() + simd_json::INPUT_PADDING, 0);
    let mut buffers = sinks
        .buffers
        .take()
        .unwrap_or_else(|| Buffers::with_max_depth(bytes.len(), MAX_DEPTH));
    let mut tape = simd_json::Tape(recycle(std::mem::take(&mut sinks.tape)));
    let result = match simd_json::fill_tape_padded(&mut input, bytes.len(), &mut buffers, &mut tape)
    {
        Err(e) => Err(describe(&e, bytes)),
        Ok(()) => {
            let ctx = Ctx {
                emit,
                depth: 0,
                root: true,
                decode: None,
            };
            let mut walker = Walker { sinks, merges };
            walker.value(&tape.0, 0, ctx).map(|(_, schema)| schema)
        }
    };
    sinks.tape = recycle(tape.0);
    sinks.buffers = Some(buffers);
    sinks.input = input;
    result
}

/// Reuses a tape's allocation across inputs (an empty `Vec` carries no borrow).
fn recycle<'a, 'b>(mut v: Vec<Node<'a>>) -> Vec<Node<'b>> {
    v.clear();
    v.into_iter().map(|_| unreachable!("cleared")).collect()
}

/// simd-json's error, said for humans.
fn describe(e: &simd_json::Error, bytes: &[u8]) -> String {
    use simd_json::ErrorType as T;
    let at = e.index();
    match e.error() {
        T::DepthLimitExceeded => format!("nested deeper than {MAX_DEPTH} levels (at byte {at})"),
        T::InvalidUtf8 => format!("invalid UTF-8 (at byte {at})"),
        T::InvalidUnicodeCodepoint | T::InvalidUnicodeEscape => {
            format!("invalid JSON: invalid \\u escape or lone UTF-16 surrogate (at byte {at})")
        }
        T::Eof | T::UnterminatedString => format!(
            "invalid JSON: unexpected end of input (at byte {at} of {})",
            bytes.len()
        ),
        T::InvalidNumber | T::InvalidExponent | T::Overflow => format!(
            "invalid JSON: malformed number, or one beyond the range of a double (at byte {at})"
        ),
        T::TrailingData => {
            format!("invalid JSON: trailing characters after the value (at byte {at})")
        }
        T::InputTooLarge => "input too large for the JSON parser".to_string(),
        T::ExpectedObjectKey | T::KeyMustBeAString => {
            format!("invalid JSON: expected a property name in double quotes (at byte {at})")
        }
        T::ExpectedObjectColon => {
            format!("invalid JSON: expected ':' after a property name (at byte {at})")
        }
        T::ExpectedArrayComma | T::ExpectedMapComma => {
            format!("invalid JSON: expected ',' or a closing bracket (at byte {at})")
        }
        T::InvalidEscape => format!("invalid JSON: invalid escape sequence (at byte {at})"),
        T::ExpectedTrue | T::ExpectedFalse | T::ExpectedNull => {
            format!("invalid JSON: invalid literal (at byte {at})")
        }
        // simd-json's other kinds name its parser states; say what the input got wrong.
        _ => match e.character() {
            Some(c) => format!(
                "invalid JSON: unexpected {c:?} or unexpected end of input (near byte {at} of {})",
                bytes.len()
            ),
            None => format!("invalid JSON: syntax error (near byte {at})"),
        },
    }
}

struct Walker<'s, 'm> {
    sinks: &'s mut Sinks,
    /// The payload's merge map; applies to the root object's keys only.
    merges: Option<&'m Merges>,
}

#[derive(Clone, Copy)]
struct Ctx<'m> {
    emit: Emit,
    depth: usize,
    /// The payload root: its protobuf form is a `Struct` (empty unless it is an object).
    root: bool,
    /// Set for a top-level value whose merge decodes it.
    decode: Option<&'m Merge>,
}

impl<'m> Ctx<'m> {
    fn child(self, emit: Emit, decode: Option<&'m Merge>) -> Ctx<'m> {
        Ctx {
            emit,
            depth: self.depth + 1,
            root: false,
            decode,
        }
    }
}

fn varint_len(n: usize) -> usize {
    ((usize::BITS - (n | 1).leading_zeros()) as usize).div_ceil(7)
}

type Walked = Result<(usize, Option<Schema>), String>;

impl<'m> Walker<'_, 'm> {
    /// Walks the value at `nodes[i]`; returns the index after it.
    fn value(&mut self, nodes: &[Node<'_>], i: usize, ctx: Ctx<'m>) -> Walked {
        match nodes[i] {
            Node::Static(s) => Ok((i + 1, self.scalar(s, ctx))),
            Node::String(s) => Ok((i + 1, self.string(s, ctx))),
            Node::Array { len, .. } => self.array(nodes, i, len, ctx),
            Node::Object { len, .. } => self.object(nodes, i, len, ctx),
        }
    }

    /// `{...primitive}` in JS is `{}`: applies at the root of a payload with merges.
    fn spread_root(&self, ctx: Ctx<'_>) -> bool {
        ctx.root && self.merges.is_some()
    }

    fn scalar(&mut self, s: StaticNode, ctx: Ctx<'_>) -> Option<Schema> {
        let mut num = JsNumber::default();
        let (ty, text): (i32, &[u8]) = match s {
            StaticNode::Null => (types::NULL, b"null"),
            StaticNode::Bool(true) => (types::BOOLEAN, b"true"),
            StaticNode::Bool(false) => (types::BOOLEAN, b"false"),
            StaticNode::I64(v) => (types::NUMBER, num.format(v as f64).as_bytes()),
            StaticNode::U64(v) => (types::NUMBER, num.format(v as f64).as_bytes()),
            StaticNode::F64(v) => (types::NUMBER, num.format(v).as_bytes()),
        };
        if ctx.emit.compact {
            self.sinks.compact.extend_from_slice(text);
        }
        if self.spread_root(ctx) {
            self.sinks.canon.extend_from_slice(b"{}");
            return ctx.emit.schema.then(|| Schema::leaf(types::OBJECT));
        }
        self.sinks.canon.extend_from_slice(text);
        if ctx.emit.pb && !ctx.root {
            let out = &mut self.sinks.pb;
            match s {
                StaticNode::Null => pb::value_null(out),
                StaticNode::Bool(b) => pb::value_bool(out, b),
                StaticNode::I64(v) => pb::value_number(out, v as f64),
                StaticNode::U64(v) => pb::value_number(out, v as f64),
                StaticNode::F64(v) => pb::value_number(out, v),
            }
        }
        ctx.emit.schema.then(|| Schema::leaf(ty))
    }

    fn string(&mut self, s: &str, ctx: Ctx<'_>) -> Option<Schema> {
        if let Some(merge) = ctx.decode {
            return self.decoded_string(merge, s, ctx);
        }
        if self.spread_root(ctx) {
            return self.spread_string(s, ctx);
        }
        let start = self.sinks.canon.len();
        write_json_str(&mut self.sinks.canon, s);
        if ctx.emit.compact {
            let Sinks { canon, compact, .. } = &mut *self.sinks;
            compact.extend_from_slice(&canon[start..]);
        }
        if ctx.emit.pb && !ctx.root {
            pb::value_string(&mut self.sinks.pb, s);
        }
        ctx.emit.schema.then(|| Schema::leaf(types::STRING))
    }

    /// A top-level string under a decoding merge: stored as is, hashed decoded.
    fn decoded_string(&mut self, merge: &Merge, s: &str, ctx: Ctx<'_>) -> Option<Schema> {
        if ctx.emit.compact {
            write_json_str(&mut self.sinks.compact, s);
        }
        if ctx.emit.pb {
            pb::value_string(&mut self.sinks.pb, s);
        }
        let text = merge.decode_text(s);
        if merge.parses_json() {
            // The decoded body is a document of its own: parse it with its own buffers and
            // walk it into the same canonical output (nothing stored, nothing in `pb`).
            let mut sub = self.sinks.decoded.take().unwrap_or_default();
            sub.clear_outputs();
            let emit = Emit {
                schema: ctx.emit.schema,
                ..Emit::CANON
            };
            std::mem::swap(&mut sub.canon, &mut self.sinks.canon);
            let mark = sub.canon.len();
            let parsed = walk(text.as_bytes(), &mut sub, emit, None);
            std::mem::swap(&mut sub.canon, &mut self.sinks.canon);
            self.sinks.decoded = Some(sub);
            match parsed {
                Ok(schema) => return schema,
                Err(_) => self.sinks.canon.truncate(mark),
            }
            if merge.restores_original_on_parse_error() {
                write_json_str(&mut self.sinks.canon, s);
                return ctx.emit.schema.then(|| Schema::leaf(types::STRING));
            }
        }
        write_json_str(&mut self.sinks.canon, &text);
        ctx.emit.schema.then(|| Schema::leaf(types::STRING))
    }

    /// `{..."str"}` in JS: an object of UTF-16 code units.
    fn spread_string(&mut self, s: &str, ctx: Ctx<'_>) -> Option<Schema> {
        if ctx.emit.compact {
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
            if ctx.emit.schema {
                props.push((i.to_string(), Schema::leaf(types::STRING)));
            }
        }
        canon.push(b'}');
        ctx.emit.schema.then(|| Schema {
            properties: props,
            ..Schema::leaf(types::OBJECT)
        })
    }

    fn array(&mut self, nodes: &[Node<'_>], at: usize, len: usize, ctx: Ctx<'m>) -> Walked {
        // With merges, JS spreads an array root into `{"0":…,"1":…}` before hashing.
        let spread = self.spread_root(ctx);
        let pb_on = ctx.emit.pb && !ctx.root;
        let canon_base = self.sinks.canon.len();
        let pb_base = self.sinks.pb.len();
        let ebase = self.sinks.entries.len();
        let kbase = self.sinks.keys.len();
        let rbase = self.sinks.ranges.len();
        let mut items: Option<Schema> = None;
        if ctx.emit.compact {
            self.sinks.compact.push(b'[');
        }
        self.sinks.canon.push(if spread { b'{' } else { b'[' });
        let mut i = at + 1;
        for n in 0..len {
            if n > 0 {
                if ctx.emit.compact {
                    self.sinks.compact.push(b',');
                }
                self.sinks.canon.push(b',');
            }
            let canon_start = self.sinks.canon.len();
            let ps = self.sinks.pb.len();
            let mut key = 0..0;
            let mut decode = None;
            if spread {
                let name = n.to_string();
                let keys = &mut self.sinks.keys;
                key = keys.len()..keys.len() + name.len();
                keys.push_str(&name);
                write_json_str(&mut self.sinks.canon, &name);
                self.sinks.canon.push(b':');
                decode = self
                    .merges
                    .and_then(|m| m.get(&name))
                    .filter(|m| m.decodes());
            }
            let emit = Emit {
                compact: ctx.emit.compact,
                pb: pb_on,
                schema: ctx.emit.schema && (spread || n == 0),
                reduced: false,
            };
            let (next, schema) = self.value(nodes, i, ctx.child(emit, decode))?;
            i = next;
            if spread {
                let canon = canon_start..self.sinks.canon.len();
                self.sinks.entries.push(Entry {
                    key,
                    canon,
                    pb: 0..0,
                    schema,
                });
            } else {
                if n == 0 {
                    items = schema;
                }
                if pb_on {
                    self.sinks.ranges.push(ps..self.sinks.pb.len());
                }
            }
        }
        if ctx.emit.compact {
            self.sinks.compact.push(b']');
        }
        if spread {
            self.sinks.canon.push(b'}');
            // An array root has an empty Struct.
            let ctx = Ctx {
                emit: Emit {
                    pb: false,
                    // Only an object root has fields to drop.
                    reduced: false,
                    ..ctx.emit
                },
                ..ctx
            };
            let schema = self.finish_object(ctx, ebase, kbase, canon_base, pb_base);
            return Ok((i, schema));
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
        let schema = ctx.emit.schema.then(|| Schema {
            items: items.map(Box::new),
            ..Schema::leaf(types::ORDERED_LIST)
        });
        Ok((i, schema))
    }

    fn object(&mut self, nodes: &[Node<'_>], at: usize, len: usize, ctx: Ctx<'m>) -> Walked {
        let canon_base = self.sinks.canon.len();
        let pb_base = self.sinks.pb.len();
        let ebase = self.sinks.entries.len();
        let kbase = self.sinks.keys.len();
        if ctx.emit.compact {
            self.sinks.compact.push(b'{');
        }
        self.sinks.canon.push(b'{');
        let mut i = at + 1;
        for n in 0..len {
            let Node::String(name) = nodes[i] else {
                return Err("invalid JSON: object key is not a string".to_string());
            };
            i += 1;
            let Sinks {
                canon,
                compact,
                keys,
                ..
            } = &mut *self.sinks;
            let key = keys.len()..keys.len() + name.len();
            keys.push_str(name);
            if n > 0 {
                canon.push(b',');
            }
            let cs = canon.len();
            write_json_str(canon, name);
            canon.push(b':');
            if ctx.emit.compact {
                if n > 0 {
                    compact.push(b',');
                }
                compact.extend_from_slice(&canon[cs..]);
            }
            let decode = if ctx.root {
                self.merges
                    .and_then(|m| m.get(name))
                    .filter(|m| m.decodes())
            } else {
                None
            };
            let ps = self.sinks.pb.len();
            let (next, schema) = self.value(nodes, i, ctx.child(ctx.emit, decode))?;
            i = next;
            let canon = cs..self.sinks.canon.len();
            let pb = ps..self.sinks.pb.len();
            self.sinks.entries.push(Entry {
                key,
                canon,
                pb,
                schema,
            });
        }
        if ctx.emit.compact {
            self.sinks.compact.push(b'}');
        }
        self.sinks.canon.push(b'}');
        Ok((
            i,
            self.finish_object(ctx, ebase, kbase, canon_base, pb_base),
        ))
    }

    /// Finishes an object whose entries are `entries[ebase..]` and whose canonical bytes
    /// (`{"k":v,…}` in document order) start at `canon_base`: puts them in canonical order
    /// (unless they already are), writes the `Struct`, builds the schema.
    fn finish_object(
        &mut self,
        ctx: Ctx<'_>,
        ebase: usize,
        kbase: usize,
        canon_base: usize,
        pb_base: usize,
    ) -> Option<Schema> {
        let merges = self.merges;
        let Sinks {
            canon,
            reduced,
            pb: pbuf,
            keys,
            entries,
            order,
            scratch,
            shapes,
            ..
        } = &mut *self.sinks;
        let es = &mut entries[ebase..];
        let key = |e: &Entry| &keys[e.key.clone()];

        // Canonical order: keep the last of equal keys (`JSON.parse`), drop `__proto__`.
        // This object's keys are `keys[kbase..]` (children truncated theirs): if they match
        // the last object at this depth, reuse its order.
        if shapes.len() <= ctx.depth {
            shapes.resize_with(ctx.depth + 1, Shape::default);
        }
        let shape = &mut shapes[ctx.depth];
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
        if let Some(m) = merges.filter(|_| ctx.root && ctx.emit.reduced) {
            if order.iter().any(|&i| m.ignores(key(&es[i]))) {
                reduced.push(b'{');
                for &i in order.iter().filter(|&&i| !m.ignores(key(&es[i]))) {
                    if reduced.len() > 1 {
                        reduced.push(b',');
                    }
                    reduced.extend_from_slice(&canon[es[i].canon.clone()]);
                }
                reduced.push(b'}');
            }
        }
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

        if ctx.emit.pb {
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
            if ctx.root {
                pbuf.extend_from_slice(scratch);
            } else {
                pb::put_len_prefixed(pbuf, 5, scratch);
            }
        }

        let merges = if ctx.root { merges } else { None };
        let schema = ctx.emit.schema.then(|| {
            let properties = order
                .iter()
                .map(|&i| {
                    let e = &mut es[i];
                    let mut schema = e.schema.take().unwrap_or_else(|| Schema::leaf(types::NULL));
                    let name = keys[e.key.clone()].to_string();
                    if let Some(merge) = merges.and_then(|m| m.get_shared(&name)) {
                        schema.merge = Some(Arc::clone(merge));
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

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Emit = Emit {
        compact: true,
        pb: true,
        schema: true,
        reduced: false,
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
        assert_eq!(
            canon("[20000000000000000000,-0,-0.0]"),
            "[20000000000000000000,0,0]"
        );
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
    fn numbers_match_serde_json_parsing_and_js_formatting() {
        // simd-json must parse exactly like a correctly-rounding parser.
        let literals = [
            "0",
            "-0",
            "1",
            "-1",
            "0.1",
            "1.37",
            "2.5e-3",
            "1e21",
            "1e-7",
            "0.000001",
            "123456789012345678",
            "9007199254740993",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775809",
            "5e-324",
            "1.7976931348623157e308",
            "2.2250738585072014e-308",
            "0.30000000000000004",
            "3.141592653589793238462643383279",
            "1e22",
            "123e-20",
            "4.35",
            "0.1e1",
        ];
        for lit in literals {
            let ours = canon(lit);
            let expected: f64 = serde_json::from_str::<f64>(lit).unwrap();
            let mut e = Vec::new();
            super::super::number::write_js_number(&mut e, expected);
            assert_eq!(ours, String::from_utf8(e).unwrap(), "{lit}");
        }
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
        let e = walk(b"{\"a\":", &mut s, ALL, None).unwrap_err();
        assert!(e.starts_with("invalid JSON"), "{e}");
        let deep = "[".repeat(100_000);
        let e = walk(deep.as_bytes(), &mut s, ALL, None).unwrap_err();
        assert!(e.starts_with("nested deeper than 128"), "{e}");
        let ok_deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(walk(ok_deep.as_bytes(), &mut s, ALL, None).is_ok());
        let e = walk(b"\"\\ud800\"", &mut s, ALL, None).unwrap_err();
        assert!(e.contains("surrogate"), "{e}");
        let e = walk(b"\"\xff\"", &mut s, ALL, None).unwrap_err();
        assert!(e.contains("UTF-8"), "{e}");
        let e = walk(b"[1] x", &mut s, ALL, None).unwrap_err();
        assert!(e.starts_with("invalid JSON"), "{e}");
        assert!(walk(b"", &mut s, ALL, None).is_err());
        assert!(walk(b"NaN", &mut s, ALL, None).is_err());
        // Beyond f64 range (JS would read Infinity and print null): refused, not guessed.
        let e = walk(b"[1e400]", &mut s, ALL, None).unwrap_err();
        assert!(e.contains("number"), "{e}");
    }

    #[test]
    fn buffers_are_reused_safely_across_walks() {
        let mut s = Sinks::default();
        for doc in [r#"{"a":"x\"y"}"#, r#"[1,2,3]"#, r#"{"b":{"c":[true]}}"#] {
            s.canon.clear();
            walk(doc.as_bytes(), &mut s, ALL, None).unwrap();
            let fresh = canon(doc);
            assert_eq!(String::from_utf8(s.canon.clone()).unwrap(), fresh);
        }
    }
}
