'use strict'
// OffloopSpanProcessor under real providers (sdk-trace-base 2.x and 1.x).

const test = require('node:test')
const assert = require('node:assert/strict')

const { OffloopSpanProcessor } = require('..')
const { ExportSpansRequest } = require('@use-tusk/drift-schemas/backend/span_export_service')
const { SDKS, makeProvider, tmpDir, readJsonl, pgAttributes, createSpans, parentId } = require('./support/otel.js')

const SPANS = 1000
const BATCH = 512

for (const sdk of SDKS) {
  test(`${sdk.label}: ${SPANS} spans ended → provider.forceFlush() → ${SPANS} lines, batches of at most ${BATCH}`, async (t) => {
    const dir = tmpDir(t)
    const requests = []
    const processor = new OffloopSpanProcessor({
      directory: dir,
      maxExportBatchSize: BATCH,
      onBatch: (buf) => {
        requests.push(ExportSpansRequest.fromBinary(buf).spans.map((s) => s.spanId))
      },
    })
    const provider = makeProvider(sdk, [processor])
    t.after(() => provider.shutdown())

    const spans = createSpans(provider.getTracer('tusk-drift-sdk'), SPANS, (i) => pgAttributes(i), { perTrace: 50 })
    await provider.forceFlush()

    const entries = readJsonl(dir)
    assert.equal(entries.length, SPANS, 'JSONL lines')
    const bySpanId = new Map(spans.map((s) => [s.spanContext().spanId, s]))
    const seen = new Set()
    for (const { line, fileTraceId } of entries) {
      const span = bySpanId.get(line.spanId)
      assert.ok(span, `line ${line.spanId} is an SDK span`)
      assert.ok(!seen.has(line.spanId), `span ${line.spanId} written once`)
      seen.add(line.spanId)
      assert.equal(line.traceId, span.spanContext().traceId)
      assert.equal(fileTraceId, line.traceId)
      assert.equal(line.parentSpanId, parentId(span))
      assert.equal(line.kind, span.kind + 1)
      assert.deepEqual(line.inputValue, JSON.parse(span.attributes['td.inputValue']))
    }

    const st = processor.stats()
    assert.ok(st.batches >= Math.ceil(SPANS / BATCH), `stats().batches = ${st.batches}`)
    assert.equal(st.spansReceived, SPANS)
    assert.equal(st.spansWritten, SPANS)
    assert.equal(st.spansInFlight, 0)
    assert.equal(st.spansReceived, st.spansWritten + st.spansDropped + st.spansFailed)

    // Batch sizes, seen through onBatch (one ExportSpansRequest per batch).
    assert.equal(requests.length, st.batches, 'one onBatch call per batch')
    const sizes = requests.map((r) => r.length)
    assert.ok(sizes.every((n) => n >= 1 && n <= BATCH), `batch sizes ${sizes.join(', ')}`)
    assert.equal(sizes.reduce((a, b) => a + b, 0), SPANS)
    assert.equal(new Set(requests.flat()).size, SPANS)
  })
}

test('OffloopSpanProcessor: spans ended after shutdown() are refused and counted, not written', async (t) => {
  const dir = tmpDir(t)
  const processor = new OffloopSpanProcessor({ directory: dir })
  const provider = makeProvider(SDKS[0], [processor])
  createSpans(provider.getTracer('tusk-drift-sdk'), 5, pgAttributes)
  await processor.shutdown()
  // Keep ending spans through the processor directly (the provider may stop calling it).
  const late = createSpans(makeProvider(SDKS[0], []).getTracer('tusk-drift-sdk'), 3, pgAttributes)
  for (const s of late) processor.onEnd(s)
  await processor.forceFlush()
  assert.equal(readJsonl(dir).length, 5)
  const st = processor.stats()
  assert.equal(st.spansReceived, 8)
  assert.equal(st.spansWritten, 5)
  assert.equal(st.spansFailed, 3)
  assert.equal(st.spansInFlight, 0)
})
