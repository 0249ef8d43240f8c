//! String arguments of the per-call replay path, read with less work than napi-rs's `String`.
//!
//! `findMock` takes six strings per call. napi-rs's `String` conversion asks V8 for the UTF-8
//! length first (a scan of the whole string), then zero-fills a buffer of that size and copies
//! into it, and `Option<String>` asks the value's type before all that. [`OptText`] asks for the
//! UTF-16 length instead (V8 stores it: no scan), writes into an uninitialized buffer of the
//! largest size the text can need, and learns "not a string" from the write's status. In
//! `perf`, the type checks, the UTF-8 length scan and the zero-fill were ~7% of a native
//! `findMock` call; the UTF-8 validity check kept here runs at memory speed.

use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;

/// An optional string argument: `undefined` and `null` read as `None`; anything else that is
/// not a string is an error naming what it was.
pub struct OptText(pub Option<String>);

/// A required string argument.
pub struct Text(pub String);

impl TypeName for OptText {
    fn type_name() -> &'static str {
        "string | undefined | null"
    }

    fn value_type() -> ValueType {
        ValueType::String
    }
}

impl TypeName for Text {
    fn type_name() -> &'static str {
        "string"
    }

    fn value_type() -> ValueType {
        ValueType::String
    }
}

impl FromNapiValue for OptText {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        let mut units = 0usize;
        // SAFETY: env and value come from napi for this call; a null buffer asks for the length.
        let status =
            unsafe { sys::napi_get_value_string_utf16(env, value, ptr::null_mut(), 0, &mut units) };
        if status == sys::Status::napi_string_expected {
            let mut kind = 0;
            // SAFETY: as above.
            check_status!(unsafe { sys::napi_typeof(env, value, &mut kind) })?;
            return match kind {
                sys::ValueType::napi_undefined | sys::ValueType::napi_null => Ok(OptText(None)),
                _ => Err(Error::new(
                    Status::StringExpected,
                    format!("expected a string, got {}", type_name(kind)),
                )),
            };
        }
        check_status!(status)?;
        // A UTF-16 unit takes at most 3 bytes of UTF-8 (a surrogate pair, 2 units, takes 4), so
        // this never truncates; +1 for the terminating NUL napi writes.
        let capacity = units * 3 + 1;
        let mut bytes = Vec::<u8>::with_capacity(capacity);
        let mut written = 0usize;
        // SAFETY: `bytes` has `capacity` writable bytes; napi writes at most that many and
        // reports how many text bytes it wrote (the NUL not counted).
        check_status!(unsafe {
            sys::napi_get_value_string_utf8(
                env,
                value,
                bytes.as_mut_ptr().cast(),
                capacity,
                &mut written,
            )
        })?;
        // SAFETY: napi initialized the first `written` bytes.
        unsafe { bytes.set_len(written) };
        // A large text should not hold 3× its size while the request lives.
        if bytes.capacity() > 64 * 1024 && bytes.capacity() > 2 * written {
            bytes.shrink_to_fit();
        }
        // V8 writes well-formed UTF-8 (lone surrogates become U+FFFD); checked all the same, as
        // `String` must be valid (the check runs at memory speed on these short texts).
        String::from_utf8(bytes)
            .map(|s| OptText(Some(s)))
            .map_err(|e| Error::new(Status::StringExpected, e.to_string()))
    }
}

/// `typeof`'s word for a napi value type (napi-rs names BigInt only with its `napi6` feature).
fn type_name(kind: sys::napi_valuetype) -> &'static str {
    match kind {
        sys::ValueType::napi_undefined => "undefined",
        sys::ValueType::napi_null => "null",
        sys::ValueType::napi_boolean => "boolean",
        sys::ValueType::napi_number => "number",
        sys::ValueType::napi_string => "string",
        sys::ValueType::napi_symbol => "symbol",
        sys::ValueType::napi_object => "object",
        sys::ValueType::napi_function => "function",
        sys::ValueType::napi_external => "external",
        9 => "bigint",
        _ => "a value of unknown type",
    }
}

impl FromNapiValue for Text {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        // SAFETY: the caller's contract, passed on.
        match unsafe { OptText::from_napi_value(env, value) }?.0 {
            Some(s) => Ok(Text(s)),
            None => Err(Error::new(
                Status::StringExpected,
                "expected a string, got undefined or null".to_string(),
            )),
        }
    }
}
