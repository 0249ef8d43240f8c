//! Inferred JSON schemas (`tusk.drift.core.v1.JsonSchema`).
//!
//! Inference follows the JS reference (reference §2.4): objects list every property, arrays
//! take `items` from element 0 only, and top-level properties named in the schema merges get
//! the merge object's keys copied onto them verbatim. The canonical JSON form below is what
//! the schema hash covers, and what the JSONL record stores.

use std::collections::HashMap;
use std::sync::Arc;

use tusk_drift_schemas::tusk::drift::core::v1 as pb;

use crate::json::escape::write_json_str;
use crate::json::keys::cmp_js_keys;
use crate::merges::Merge;

/// `JsonSchemaType` codes.
pub mod types {
    /// Numbers.
    pub const NUMBER: i32 = 1;
    /// Strings.
    pub const STRING: i32 = 2;
    /// Booleans.
    pub const BOOLEAN: i32 = 3;
    /// `null`.
    pub const NULL: i32 = 4;
    /// Objects.
    pub const OBJECT: i32 = 6;
    /// Arrays.
    pub const ORDERED_LIST: i32 = 7;
}

/// One schema node.
#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    /// A `JsonSchemaType` code (see [`types`]).
    pub ty: i32,
    /// Object properties, in canonical (JS) key order, without duplicates.
    pub properties: Vec<(String, Schema)>,
    /// Array element schema (from element 0).
    pub items: Option<Box<Schema>>,
    /// The merge applied to this node (top-level properties only).
    pub merge: Option<Arc<Merge>>,
}

impl Schema {
    /// A leaf node of type `ty`.
    pub fn leaf(ty: i32) -> Schema {
        Schema {
            ty,
            properties: Vec::new(),
            items: None,
            merge: None,
        }
    }

    /// Canonical JSON: sorted keys, camelCase merge keys, JS number formatting. This is what
    /// the schema hash covers (identical to the reference's `JSON.stringify(sortKeys(schema))`).
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        match &self.merge {
            // Almost every node: the keys are fixed and already in canonical order.
            None => self.write_plain(self.properties.iter(), out),
            Some(merge) => self.write_merged(merge, out),
        }
    }

    /// The canonical JSON of this (root) schema without the properties `drop` names: the
    /// schema of the value without those fields, for the reduced schema hash.
    pub fn write_canonical_without(&self, drop: impl Fn(&str) -> bool, out: &mut Vec<u8>) {
        debug_assert!(self.merge.is_none(), "merges apply below the root only");
        self.write_plain(self.properties.iter().filter(|(k, _)| !drop(k)), out);
    }

    /// A node without a merge: the keys are fixed and already in canonical order.
    fn write_plain<'a>(
        &self,
        props: impl Iterator<Item = &'a (String, Schema)>,
        out: &mut Vec<u8>,
    ) {
        out.push(b'{');
        if let Some(items) = &self.items {
            out.extend_from_slice(b"\"items\":");
            items.write_canonical(out);
            out.push(b',');
        }
        out.extend_from_slice(b"\"properties\":");
        Self::write_properties(props, out);
        out.extend_from_slice(b",\"type\":");
        out.extend_from_slice(itoa::Buffer::new().format(self.ty).as_bytes());
        out.push(b'}');
    }

    fn write_properties<'a>(props: impl Iterator<Item = &'a (String, Schema)>, out: &mut Vec<u8>) {
        out.push(b'{');
        for (j, (name, s)) in props.enumerate() {
            if j > 0 {
                out.push(b',');
            }
            write_json_str(out, name);
            out.push(b':');
            s.write_canonical(out);
        }
        out.push(b'}');
    }

    /// A top-level property with a merge: the generated keys, overridden by the merge
    /// object's keys (JS `{...generated, ...merge}`), in canonical order.
    fn write_merged(&self, merge: &Merge, out: &mut Vec<u8>) {
        let mut fields: Vec<(&str, Field<'_>)> = Vec::with_capacity(6);
        if let Some(items) = &self.items {
            fields.push(("items", Field::Schema(items)));
        }
        fields.push(("properties", Field::Properties(&self.properties)));
        fields.push(("type", Field::Int(self.ty)));
        for (k, raw) in &merge.verbatim {
            match fields.iter_mut().find(|(name, _)| name == k) {
                Some(slot) => slot.1 = Field::Raw(raw),
                None => fields.push((k.as_str(), Field::Raw(raw))),
            }
        }
        fields.retain(|(k, _)| *k != "__proto__");
        fields.sort_by(|a, b| cmp_js_keys(a.0, b.0));
        out.push(b'{');
        for (i, (k, f)) in fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_json_str(out, k);
            out.push(b':');
            match f {
                Field::Schema(s) => s.write_canonical(out),
                Field::Int(n) => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
                Field::Raw(raw) => out.extend_from_slice(raw),
                Field::Properties(props) => Self::write_properties(props.iter(), out),
            }
        }
        out.push(b'}');
    }

    /// Canonical JSON as a `String`.
    pub fn to_canonical_json(&self) -> String {
        let mut out = Vec::new();
        self.write_canonical(&mut out);
        String::from_utf8(out).expect("canonical JSON is UTF-8")
    }

    /// The protobuf message. Merge fields are carried when they are in range of the enums.
    pub fn to_proto(&self) -> pb::JsonSchema {
        let merge = self.merge.as_deref();
        pb::JsonSchema {
            r#type: self.ty,
            properties: self
                .properties
                .iter()
                .map(|(k, s)| (k.clone(), s.to_proto()))
                .collect::<HashMap<_, _>>(),
            items: self.items.as_ref().map(|s| Box::new(s.to_proto())),
            encoding: merge
                .and_then(|m| m.encoding)
                .and_then(|e| i32::try_from(e).ok()),
            decoded_type: merge
                .and_then(|m| m.decoded_type)
                .and_then(|e| i32::try_from(e).ok()),
            match_importance: merge.and_then(|m| m.match_importance),
        }
    }
}

enum Field<'a> {
    Schema(&'a Schema),
    Properties(&'a [(String, Schema)]),
    Int(i32),
    Raw(&'a [u8]),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_matches_reference_tv1_schema() {
        let s = Schema {
            ty: types::OBJECT,
            properties: vec![
                ("text".into(), Schema::leaf(types::STRING)),
                (
                    "values".into(),
                    Schema {
                        items: Some(Box::new(Schema::leaf(types::NUMBER))),
                        ..Schema::leaf(types::ORDERED_LIST)
                    },
                ),
            ],
            items: None,
            merge: None,
        };
        assert_eq!(
            s.to_canonical_json(),
            r#"{"properties":{"text":{"properties":{},"type":2},"values":{"items":{"properties":{},"type":1},"properties":{},"type":7}},"type":6}"#
        );
    }
}
