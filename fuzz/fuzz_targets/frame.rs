//! The span frame decoder on arbitrary bytes: `split_batch` and `decode_span` never panic or
//! allocate from a bogus count, and whatever decodes re-encodes to a frame that decodes to the
//! same span (compared as bytes, so NaN times compare equal).
#![no_main]

use libfuzzer_sys::fuzz_target;
use offloop::frame::{decode_span, split_batch, BatchWriter, SpanFrame};

fn encode(span: &SpanFrame<'_>) -> Vec<u8> {
    let mut w = BatchWriter::new();
    w.push(span);
    w.finish()
}

fn check_span(body: &[u8]) {
    let Ok(span) = decode_span(body) else { return };
    // One span re-encoded: header (4 magic + 4 count) + 4 length + body.
    let once = encode(&span);
    let (count, spans) = split_batch(&once).expect("a BatchWriter batch splits");
    assert_eq!(count, 1);
    let again = decode_span(spans[0].as_ref().expect("located")).expect("re-encoded span decodes");
    assert_eq!(encode(&again), once, "decode ∘ encode is stable");
    assert!(
        span.attrs.len() <= body.len() / 6,
        "attribute count bounded by the frame"
    );
}

fuzz_target!(|data: &[u8]| {
    // The bytes as a whole batch…
    if let Ok((count, spans)) = split_batch(data) {
        assert!(spans.len() <= count as usize);
        assert!(spans.len() <= data.len() / 4 + 1);
        for s in spans.iter().flatten() {
            check_span(s);
        }
    }
    // …and as one span body.
    check_span(data);
});
