//! # offloop
//!
//! The span export pipeline of record/replay tracing, without a JavaScript event loop in the
//! way: parse → normalize → apply schema merges → infer schema → hash (BLAKE3, or SHA-256 for
//! byte-for-byte parity with the Tusk Drift JS SDK) → encode `tusk.drift.core.v1.Span`
//! protobuf and Tusk-style JSONL → write recordings.
//!
//! This crate has no Node.js dependency; `offloop-node` is a thin napi-rs binding over it.
//!
//! ```
//! use offloop::{hash_payload, HashAlgorithm};
//!
//! let p = hash_payload(
//!     br#"{"text":"SELECT $1","values":[42]}"#,
//!     Some(br#"{"values":{"matchImportance":0}}"#),
//!     HashAlgorithm::Sha256,
//! )
//! .unwrap();
//! // The Tusk JS reference (`JsonSchemaHelper`) gives the same hashes.
//! assert_eq!(p.value_hash, "2c3e9a035824dff185a0ffad5b044307bf2d123f487c8afb4bdbd7ac57d87c20");
//! assert_eq!(p.schema_hash, "bd8d7c8de7c78412b3c53258af006fa1cf43b101ef549899a8e388950a5a190f");
//! ```
#![deny(missing_docs)]

pub mod base64;
pub mod hash;
pub mod json;
pub mod merges;
pub mod payload;
pub mod schema;

pub use hash::HashAlgorithm;
pub use merges::Merges;
pub use payload::{hash_payload, Payload};
pub use schema::Schema;
pub mod dispatch;
pub mod error;
pub mod exporter;
pub mod filter;
pub mod frame;
pub mod processor;
pub mod record;
pub mod replay;
pub mod sink;

pub use error::{SpanError, Stage};
pub use exporter::{BatchResult, Exporter, ExporterConfig, Rejected, StatsSnapshot, Ticket};
pub use processor::{Processor, ProcessorConfig};
pub use sink::fs::Format;
