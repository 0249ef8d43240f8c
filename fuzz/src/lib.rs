//! Helpers shared by the fuzz targets.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Any JSON value, validated like `serde_json::Value` (strings decoded, so lone surrogate
/// escapes are rejected; nesting limited to 128) but without `Value`'s special case for the
/// `raw_value` feature's magic key `$serde_json::private::RawValue` (an object starting with
/// that key is valid JSON; `Value` refuses it when the feature is on, which it is here).
pub struct Valid;

impl<'de> Deserialize<'de> for Valid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Valid, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Valid;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Valid, E> {
                Ok(Valid)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Valid, E> {
                Ok(Valid)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Valid, E> {
                Ok(Valid)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Valid, E> {
                Ok(Valid)
            }
            fn visit_str<E>(self, _: &str) -> Result<Valid, E> {
                Ok(Valid)
            }
            fn visit_unit<E>(self) -> Result<Valid, E> {
                Ok(Valid)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Valid, A::Error> {
                while a.next_element::<Valid>()?.is_some() {}
                Ok(Valid)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Valid, A::Error> {
                while m.next_entry::<String, Valid>()?.is_some() {}
                Ok(Valid)
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether `bytes` are one JSON value (and nothing else but whitespace).
pub fn is_json(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Valid>(bytes).is_ok()
}
