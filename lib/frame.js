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
    // Written once, then the length is patched in front. Most text is ASCII: first try with
    // room for one byte per UTF-16 code unit plus 4 spare. A write that stopped short of the
    // room by 4 bytes or more was complete (a truncated one stops only when the next
    // character, at most 4 bytes, no longer fits); otherwise reserve the worst case, 3 bytes
    // per code unit, and write again. Reserving 3× up front would seal 2 MiB segments at ~70%.
    const len = s.length
    this.ensure(8 + len)
    let room = this.buf.length - this.pos - 4
    let n = len === 0 ? 0 : this.buf.write(s, this.pos + 4, room, 'utf8')
    if (n > room - 4) {
      this.ensure(4 + len * 3)
      room = this.buf.length - this.pos - 4
      n = this.buf.write(s, this.pos + 4, room, 'utf8')
    }
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
const SEGMENT_BYTES = 2 * 1024 * 1024

// Segment buffers kept for the next batches. A fresh 2 MiB buffer is fresh memory: the first
// write into each of its pages faults (the kernel maps and zeroes it), which made framing cost
// ~30 µs per 38 KB span instead of ~4 µs, and its external memory drives V8 into collections.
// Segments come back once the native side has answered for their batch (it reads them in
// place until then). The pool keeps at most `maxBytes`, and is emptied when unused for
// `idleMs`, so an idle exporter holds no memory.
class SegmentPool {
  constructor({ segmentBytes = SEGMENT_BYTES, maxBytes = 32 * 1024 * 1024, idleMs = 10_000 } = {}) {
    this.segmentBytes = segmentBytes
    this.max = Math.max(0, Math.floor(maxBytes / segmentBytes))
    this.idleMs = idleMs
    this.free = []
    this.timer = undefined
    this.used = false
  }

  take() {
    this.used = true
    return this.free.pop() || Buffer.allocUnsafeSlow(this.segmentBytes)
  }

  // True when some segment of a batch is one of the pool's (the others are not kept).
  pooled(segments) {
    return segments.some((seg) => seg.byteOffset === 0 && seg.buffer.byteLength === this.segmentBytes)
  }

  // Returns the segments of a batch the native side is done with (only whole, pool-sized
  // buffers; a segment is a view of its buffer's first bytes).
  give(segments) {
    for (const seg of segments) {
      if (seg.byteOffset === 0 && seg.buffer.byteLength === this.segmentBytes && this.free.length < this.max) {
        this.free.push(Buffer.from(seg.buffer, 0, this.segmentBytes))
      }
    }
    if (this.free.length > 0 && this.timer === undefined) this.armTrim()
  }

  armTrim() {
    this.used = false
    this.timer = setTimeout(() => {
      this.timer = undefined
      if (!this.used) this.free.length = 0
      else if (this.free.length > 0) this.armTrim()
    }, this.idleMs)
    this.timer.unref()
  }
}

class BatchWriter extends FrameWriter {
  // A batch starts in a buffer of its own of at most 256 KiB and, with a pool, moves to pooled
  // segments once it outgrows it: an export of one span holds no 2 MiB segment while it waits
  // in the queue. (A buffer that large is mapped for itself and unmapped when collected, so
  // many small exports in flight leave no fragmented heap behind.)
  constructor(segmentBytes = SEGMENT_BYTES, pool = undefined) {
    super(Math.min(pool ? pool.segmentBytes : segmentBytes, 256 * 1024))
    this.segmentBytes = pool ? pool.segmentBytes : segmentBytes
    this.pool = pool
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
    const old = this.buf
    if (this.count > 0 && need > this.segmentBytes) {
      // Seal the complete spans; move only the unfinished span to a fresh segment.
      const partial = old.subarray(this.spanStart, this.pos)
      old.writeUInt32LE(this.count, 4)
      this.segments.push(old.subarray(0, this.spanStart))
      const size = 8 + partial.length + extra
      const next = this.pool && size <= this.segmentBytes ? this.pool.take() : Buffer.allocUnsafe(Math.max(this.segmentBytes, 2 * size))
      partial.copy(next, 8)
      const moved = partial.length
      this.begin(next)
      this.pos = 8 + moved
    } else if (this.pool && old.length < this.segmentBytes && need <= this.segmentBytes) {
      this.buf = this.pool.take()
      old.copy(this.buf, 0, 0, this.pos)
    } else {
      super.ensure(extra)
    }
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

module.exports = { BatchWriter, SpanWriter, SegmentPool }
