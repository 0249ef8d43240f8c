//! Where recorded spans go: files ([`fs`]) and encoded export requests ([`request`]) that the
//! binding hands to a JS callback.

pub mod fs;
pub mod request;
