//! JSON handling shared by the record and replay sides: one tokenizer pass (serde_json) that
//! emits every form a payload needs without building a tree.

pub mod escape;
pub mod keys;
pub mod number;
pub(crate) mod pb;
pub(crate) mod walk;
