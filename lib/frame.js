'use strict'
// Span frames: the byte layout of crates/offloop/src/frame.rs (see its module docs).
// Strings are written as UTF-8 straight into a growing buffer; JSON attribute strings are
// copied as they are, never parsed or re-stringified on the JS thread.

const MAGIC = Buffer.from('OFL1', 'latin1')

const T_STRING = 1
const T_NUMBER = 2
const T_BOOL = 3
const T_STRING_ARRAY = 4
const T_NUMBER_ARRAY = 5
const T_BOOL_ARRAY = 6
const T_JSON = 7
const T_ILL_FORMED = 8

// Attributes whose value is JSON text: a lone surrogate there cannot become valid UTF-8, so the
// span is flagged and the native side reports it instead of silently hashing U+FFFD.
const JSON_ATTRIBUTES = new Set([
  'td.inputValue',
  'td.outputValue',
  'td.inputSchemaMerges',
  'td.outputSchemaMerges',
  'td.metadata',
  'td.transformMetadata',
])

const hasIsWellFormed = typeof String.prototype.isWellFormed === 'function'

class FrameWriter {
  constructor(capacity = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(capacity)
    this.pos = 0
    // Where the span being written starts. Offsets inside a span are kept relative to it,
    // because a BatchWriter may move the unfinished span to a new segment.
    this.spanStart = 0
  }

  ensure(extra) {
    const need = this.pos + extra
    if (need <= this.buf.length) return
    let size = this.buf.length * 2
    while (size < need) size *= 2
    const next = Buffer.allocUnsafe(size)
    this.buf.copy(next, 0, 0, this.pos)
    this.buf = next
  }

  u8(v) {
    this.ensure(1)
    this.buf[this.pos++] = v
  }

  u32(v) {
    this.ensure(4)
    this.buf.writeUInt32LE(v >>> 0, this.pos)
    this.pos += 4
  }

  f64(v) {
    this.ensure(8)
    this.buf.writeDoubleLE(v, this.pos)
    this.pos += 8
  }

  str(s) {
    // At most 3 UTF-8 bytes per UTF-16 code unit: reserve, write once, then patch the length.
    this.ensure(4 + s.length * 3)
    const n = s.length === 0 ? 0 : this.buf.write(s, this.pos + 4, 'utf8')
    this.buf.writeUInt32LE(n, this.pos)
    this.pos += 4 + n
  }

  // One span body (without its length prefix).
  span(span) {
    const ctx = span.spanContext()
    this.str(ctx.traceId || '')
    this.str(ctx.spanId || '')
    this.str(parentSpanId(span))
    this.u8(uint8(span.kind))
    this.u8(uint8(span.status && span.status.code))
    const start = span.startTime || [0, 0]
    const duration = span.duration || [0, 0]
    this.f64(start[0])
    this.u32(start[1])
    this.f64(duration[0])
    this.u32(duration[1])
    this.str(String(span.name ?? ''))
    this.str(String((span.status && span.status.message) || ''))
    this.str(scopeName(span))
    const attributes = span.attributes || {}
    const keys = Object.keys(attributes)
    let count = 0
    const countAt = this.pos - this.spanStart
    this.u32(0)
    for (const key of keys) {
      const value = attributes[key]
      if (value === undefined) continue
      this.str(key)
      this.value(key, value)
      count++
    }
    this.buf.writeUInt32LE(count, this.spanStart + countAt)
  }

  // A frame for a span whose fields could not be read: whatever ids can be read, and the
  // reason in the `offloop.invalidSpan` attribute.
  invalidSpan(span, err) {
    let ids = {}
    try {
      ids = (span && typeof span.spanContext === 'function' && span.spanContext()) || {}
    } catch {}
    this.str(typeof ids.traceId === 'string' ? ids.traceId : '')
    this.str(typeof ids.spanId === 'string' ? ids.spanId : '')
    this.str('')
    this.u8(255)
    this.u8(255)
    this.f64(0)
    this.u32(0)
    this.f64(0)
    this.u32(0)
    this.str('')
    this.str('')
    this.str('')
    this.u32(1)
    this.str('offloop.invalidSpan')
    this.u8(T_STRING)
    this.str(`the span object could not be read: ${(err && err.message) || String(err)}`)
  }

  value(key, v) {
    switch (typeof v) {
      case 'string':
        if (hasIsWellFormed && JSON_ATTRIBUTES.has(key) && !v.isWellFormed()) {
          this.u8(T_ILL_FORMED)
          this.str(v.toWellFormed())
        } else {
          this.u8(T_STRING)
          this.str(v)
        }
        return
      case 'number':
        this.u8(T_NUMBER)
        this.f64(v)
        return
      case 'boolean':
        this.u8(T_BOOL)
        this.u8(v ? 1 : 0)
        return
      default:
        break
    }
    if (Array.isArray(v)) {
      const kind = arrayKind(v)
      if (kind === 'string') {
        this.u8(T_STRING_ARRAY)
        this.u32(v.length)
        for (const s of v) this.str(s)
        return
      }
      if (kind === 'number') {
        this.u8(T_NUMBER_ARRAY)
        this.u32(v.length)
        for (const n of v) this.f64(n)
        return
      }
      if (kind === 'boolean') {
        this.u8(T_BOOL_ARRAY)
        this.u32(v.length)
        for (const b of v) this.u8(b ? 1 : 0)
        return
      }
    }
    // Anything else (arrays with nulls, mixed arrays, values OTel would not accept).
    let json
    try {
      json = JSON.stringify(v)
    } catch {
      json = undefined
    }
    this.u8(T_JSON)
    this.str(json === undefined ? 'null' : json)
  }
}

function arrayKind(arr) {
  if (arr.length === 0) return 'string'
  const t = typeof arr[0]
  if (t !== 'string' && t !== 'number' && t !== 'boolean') return null
  for (let i = 1; i < arr.length; i++) if (typeof arr[i] !== t) return null
  return t
}

function uint8(v) {
  return Number.isInteger(v) && v >= 0 && v <= 255 ? v : 255
}

// sdk-trace-base 2.x: parentSpanContext; 1.x: parentSpanId.
function parentSpanId(span) {
  if (span.parentSpanContext) return span.parentSpanContext.spanId || ''
  return span.parentSpanId || ''
}

// sdk-trace-base 2.x: instrumentationScope; 1.x: instrumentationLibrary.
function scopeName(span) {
  const scope = span.instrumentationScope || span.instrumentationLibrary
  return (scope && scope.name) || ''
}

// Builds one batch as segments: each segment is a complete batch buffer ("OFL1", count,
// length-prefixed span bodies). When a segment reaches `segmentBytes`, the next span starts a
// new one instead of the buffer doubling, so no single call ever copies a whole batch (a
// 512 x 37 KB batch is ~19 MB; copying that at once would stall the loop for milliseconds).
class BatchWriter extends FrameWriter {
  constructor(segmentBytes = 2 * 1024 * 1024) {
    super(Math.min(segmentBytes, 256 * 1024))
    this.segmentBytes = segmentBytes
    this.segments = []
    this.begin(this.buf)
  }

  begin(buf) {
    this.buf = buf
    MAGIC.copy(this.buf, 0)
    this.pos = 8
    this.spanStart = 8
    this.count = 0
  }

  ensure(extra) {
    const need = this.pos + extra
    if (need <= this.buf.length) return
    if (this.count > 0 && need > this.segmentBytes) {
      // Seal the complete spans; move only the unfinished span to a fresh segment.
      const partial = this.buf.subarray(this.spanStart, this.pos)
      this.buf.writeUInt32LE(this.count, 4)
      this.segments.push(this.buf.subarray(0, this.spanStart))
      const next = Buffer.allocUnsafe(Math.max(this.segmentBytes, 2 * (8 + partial.length + extra)))
      partial.copy(next, 8)
      const moved = partial.length
      this.begin(next)
      this.pos = 8 + moved
      return
    }
    super.ensure(extra)
  }

  add(span) {
    this.spanStart = this.pos
    this.u32(0)
    try {
      this.span(span)
    } catch (err) {
      // A span object the shim cannot read fails alone: its frame carries the reason and the
      // native side reports it for that span; the rest of the batch goes on.
      this.pos = this.spanStart + 4
      this.invalidSpan(span, err)
    }
    this.buf.writeUInt32LE(this.pos - this.spanStart - 4, this.spanStart)
    this.count++
    this.spanStart = this.pos
  }

  // The batch as an array of segment buffers.
  finish() {
    this.buf.writeUInt32LE(this.count, 4)
    this.segments.push(this.buf.subarray(0, this.pos))
    return this.segments
  }
}

// Serializes one span for the processor, reusing one scratch buffer (the native side copies).
class SpanWriter extends FrameWriter {
  frame(span) {
    this.pos = 0
    this.span(span)
    return this.buf.subarray(0, this.pos)
  }
}

module.exports = { BatchWriter, SpanWriter }
