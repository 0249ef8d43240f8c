//! `tusk.drift.backend.v1.ExportSpansRequest` framing.
//!
//! Spans are already encoded, so the request is assembled by prefixing each with field 5's
//! tag and length instead of decoding and re-encoding them (reference §4.5).

use prost::Message;
use tusk_drift_schemas::tusk::drift::backend::v1::ExportSpansRequest;

use crate::json::pb::put_len_prefixed;

/// The request's header fields.
#[derive(Clone, Debug, Default)]
pub struct RequestHeader {
    /// `observable_service_id`.
    pub observable_service_id: String,
    /// `environment`.
    pub environment: String,
    /// `sdk_version`.
    pub sdk_version: String,
    /// `sdk_instance_id`.
    pub sdk_instance_id: String,
}

/// Encodes an `ExportSpansRequest` holding `spans` (each an encoded `Span`).
pub fn encode<'a>(header: &RequestHeader, spans: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let head = ExportSpansRequest {
        observable_service_id: header.observable_service_id.clone(),
        environment: header.environment.clone(),
        sdk_version: header.sdk_version.clone(),
        sdk_instance_id: header.sdk_instance_id.clone(),
        spans: Vec::new(),
    };
    let mut buf = head.encode_to_vec();
    for span in spans {
        put_len_prefixed(&mut buf, 5, span);
    }
    buf
}
