//! Per-span errors, returned as data: a batch with one bad span still writes the others.

use std::fmt;

/// Where in the pipeline a span was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The span's frame could not be decoded.
    Frame,
    /// Ids, kind, status or times are invalid.
    Validate,
    /// Dropped by a filter (oversized span, errored server span, blocked trace).
    Filter,
    /// `td.inputValue` or its schema merges.
    Input,
    /// `td.outputValue` or its schema merges.
    Output,
    /// `td.metadata` or another attribute.
    Attributes,
    /// The sink (file system or callback) failed.
    Sink,
    /// The exporter was shut down before the span could be accepted.
    Shutdown,
}

impl Stage {
    /// Lower-case name, as reported to JS.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Frame => "frame",
            Stage::Validate => "validate",
            Stage::Filter => "filter",
            Stage::Input => "input",
            Stage::Output => "output",
            Stage::Attributes => "attributes",
            Stage::Sink => "sink",
            Stage::Shutdown => "shutdown",
        }
    }
}

/// One span that was not written, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanError {
    /// Position of the span in its batch.
    pub index: u32,
    /// The span's trace id as given (possibly invalid; truncated for display).
    pub trace_id: String,
    /// The span's id as given (possibly invalid; truncated for display).
    pub span_id: String,
    /// The stage that stopped it.
    pub stage: Stage,
    /// What was wrong, naming the field: `td.inputValue: invalid JSON: …`.
    pub message: String,
    /// True when the span was dropped by policy (filters), false when it failed.
    pub dropped: bool,
}

impl fmt::Display for SpanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "span {} (trace {}, span {}) [{}]: {}",
            self.index,
            self.trace_id,
            self.span_id,
            self.stage.name(),
            self.message
        )
    }
}

impl std::error::Error for SpanError {}

/// Shortens and escapes an id from input for use in messages.
pub(crate) fn display_id(id: &str) -> String {
    const MAX: usize = 64;
    let mut s: String = id.chars().take(MAX).flat_map(char::escape_debug).collect();
    if id.chars().count() > MAX {
        s.push('…');
    }
    s
}
