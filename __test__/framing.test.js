'use strict'
// Framing on the JS thread: pooled segment buffers (reused only after the native side has
// answered for their batch, trimmed when idle), strings written with a one-byte-per-unit
// first try that must fall back correctly for multi-byte text at any position, and the
// `threads` option (the spans of a batch spread over a native pool).

const test = require('node:test')
const assert = require('node:assert/strict')
const { setTimeout: sleep } = require('node:timers/promises')

const { OffloopExporter } = require('..')
const { BatchWriter, SegmentPool } = require('../lib/frame.js')
const { SDKS, makeProvider, tmpDir, readJsonl, pgAttributes, createSpans } = require('./support/otel.js')

const sdk = SDKS[0]

const exportSpans = (exporter, spans) => new Promise((resolve) => exporter.export(spans, resolve))

test('SegmentPool keeps whole segments up to its cap and empties when idle', async () => {
  const pool = new SegmentPool({ segmentBytes: 1024, maxBytes: 3 * 1024, idleMs: 50 })
  const a = pool.take()
  const b = pool.take()
  assert.equal(a.length, 1024)
  assert.notEqual(a.buffer, b.buffer)
  // Segments are views of the first bytes of pooled buffers; other buffers are not kept.
  pool.give([a.subarray(0, 100), b.subarray(0, 1024), Buffer.alloc(1024).subarray(8), Buffer.alloc(2048)])
  assert.equal(pool.free.length, 2)
  const again = pool.take()
  assert.ok(again.buffer === a.buffer || again.buffer === b.buffer, 'a given segment is reused')
  assert.equal(again.length, 1024)
  pool.give([again, pool.take(), pool.take(), pool.take(), pool.take()])
  assert.equal(pool.free.length, 3, 'never more than maxBytes')
  await sleep(200)
  assert.equal(pool.free.length, 0, 'emptied after idleMs without use')
})

test('BatchWriter: multi-byte strings straddling segment ends are written whole', () => {
  // Every kind of character width, at every offset near a segment's end.
  const samples = ['a', 'é', '✓', '😀', 'x'.repeat(5) + '😀'.repeat(3), 'é'.repeat(300), '✓'.repeat(700)]
  const pool = new SegmentPool({ segmentBytes: 4096, maxBytes: 1 << 20 })
  const writer = new BatchWriter(undefined, pool)
  const expected = []
  for (let pad = 0; pad < 64; pad++) {
    for (const s of samples) {
      const value = '.'.repeat(pad) + s
      expected.push(value)
      writer.add({
        spanContext: () => ({ traceId: '0'.repeat(31) + '1', spanId: '0'.repeat(15) + '1' }),
        kind: 2,
        status: { code: 0 },
        startTime: [1, 0],
        duration: [0, 1],
        name: 'n',
        attributes: { s: value },
        instrumentationScope: { name: 'scope' },
      })
    }
  }
  const segments = writer.finish()
  assert.ok(segments.length > 10, `small segments force many seals (${segments.length})`)
  // Read back the one string attribute of each span frame.
  const got = []
  for (const seg of segments) {
    assert.equal(seg.toString('latin1', 0, 4), 'OFL1')
    const count = seg.readUInt32LE(4)
    let pos = 8
    for (let i = 0; i < count; i++) {
      const len = seg.readUInt32LE(pos)
      const end = pos + 4 + len
      let p = pos + 4
      const str = () => {
        const n = seg.readUInt32LE(p)
        const s = seg.toString('utf8', p + 4, p + 4 + n)
        p += 4 + n
        return s
      }
      str(), str(), str() // ids
      p += 2 + 8 + 4 + 8 + 4 // kind, status, start, duration
      str(), str(), str() // name, status message, scope
      assert.equal(seg.readUInt32LE(p), 1)
      p += 4
      assert.equal(str(), 's')
      assert.equal(seg[p], 1) // T_STRING
      p += 1
      got.push(str())
      assert.equal(p, end)
      pos = end
    }
  }
  assert.equal(got.length, expected.length)
  assert.deepEqual(got, expected)
})

test('exporter: pooled segments are reused across batches and every batch is recorded exactly', async (t) => {
  const dir = tmpDir(t)
  const exporter = new OffloopExporter({ directory: dir })
  t.after(() => exporter.shutdown())
  const provider = makeProvider(sdk, [])
  t.after(() => provider.shutdown())
  const tracer = provider.getTracer('tusk-drift-sdk')
  const unicode = JSON.stringify({ note: 'naïve ✓ 😀 '.repeat(2000) })
  const batches = []
  for (let b = 0; b < 4; b++) {
    batches.push(createSpans(tracer, 96, (i) => ({ ...pgAttributes(b * 1000 + i, { rows: 40 }), ...(i % 7 === 0 ? { 'td.outputValue': unicode } : {}) }), { perTrace: 16 }))
  }
  const reused = []
  for (const spans of batches) {
    const before = exporter._segments.free.length
    const r = await exportSpans(exporter, spans)
    assert.equal(r.code, 0, r.error && r.error.message)
    reused.push(before)
  }
  assert.ok(reused.slice(1).every((n) => n > 0), `later batches start with pooled segments (${reused})`)
  const lines = readJsonl(dir).map((x) => x.line)
  assert.equal(lines.length, 4 * 96)
  const byId = new Map(lines.map((l) => [l.spanId, l]))
  for (const spans of batches) {
    for (const s of spans) {
      const line = byId.get(s.spanContext().spanId)
      assert.ok(line, 'every span is written')
      assert.deepEqual(line.outputValue, JSON.parse(s.attributes['td.outputValue']))
    }
  }
})

test('exporter: a batch in flight keeps its segments; concurrent exports do not share buffers', async (t) => {
  const dir = tmpDir(t)
  const exporter = new OffloopExporter({ directory: dir, workers: 1 })
  t.after(() => exporter.shutdown())
  const provider = makeProvider(sdk, [])
  t.after(() => provider.shutdown())
  const tracer = provider.getTracer('tusk-drift-sdk')
  const all = []
  const pending = []
  for (let b = 0; b < 6; b++) {
    const spans = createSpans(tracer, 64, (i) => pgAttributes(b * 1000 + i, { rows: 200 }), { perTrace: 8 })
    all.push(...spans)
    pending.push(exportSpans(exporter, spans))
  }
  for (const r of await Promise.all(pending)) assert.equal(r.code, 0, r.error && r.error.message)
  const lines = readJsonl(dir).map((x) => x.line)
  assert.equal(lines.length, all.length)
  const byId = new Map(lines.map((l) => [l.spanId, l]))
  for (const s of all) assert.deepEqual(byId.get(s.spanContext().spanId).outputValue, JSON.parse(s.attributes['td.outputValue']))
})

test('threads option: validated, and one thread records the same lines as many', async (t) => {
  assert.throws(() => new OffloopExporter({ threads: 0 }), /threads must be a positive number/)
  assert.throws(() => new OffloopExporter({ threads: 'two' }), /threads must be a positive number/)
  const provider = makeProvider(sdk, [])
  t.after(() => provider.shutdown())
  const spans = createSpans(provider.getTracer('tusk-drift-sdk'), 200, (i) => pgAttributes(i, { rows: 20 }), { perTrace: 10 })
  const lines = []
  for (const threads of [1, 4]) {
    const dir = tmpDir(t)
    const exporter = new OffloopExporter({ directory: dir, threads })
    const r = await exportSpans(exporter, spans)
    assert.equal(r.code, 0, r.error && r.error.message)
    await exporter.shutdown()
    lines.push(readJsonl(dir).map((x) => x.line).sort((a, b) => (a.spanId < b.spanId ? -1 : 1)))
  }
  assert.equal(lines[0].length, 200)
  assert.deepEqual(lines[1], lines[0])
})
