'use strict'
// Bad spans fail alone: one batch of 512 under a real SDK with a few broken spans; each broken
// span gets an error entry naming the field, everything else is written.

const test = require('node:test')
const assert = require('node:assert/strict')

const { OffloopExporter, hashPayload } = require('..')
const { SDKS, makeProvider, tmpDir, readJsonl, pgAttributes, createSpans } = require('./support/otel.js')

const SPANS = 512
const PER_TRACE = 8
const MAX_SPAN_BYTES = 60000

// Each broken span is a child (never the root) of its own trace, so the oversized span's trace
// block cannot take other test spans with it: its trace's later spans are the only collateral,
// and they are accounted for below.
const BAD = {
  // index → [attributes to override, expectation]
  9: [{ 'td.inputValue': '{"text":"SELECT 1",' }, { stage: 'input', field: 'td.inputValue', message: /invalid JSON/i, dropped: false }],
  // A real lone surrogate in a JS string (not the escape sequence).
  17: [{ 'td.inputValue': '{"a":"\ud800"}' }, { stage: 'input', field: 'td.inputValue', message: /surrogate|UTF-16|UTF-8/, dropped: false }],
  33: [{ 'td.outputValue': JSON.stringify({ rows: ['x'.repeat(MAX_SPAN_BYTES)] }) }, { stage: 'filter', field: null, message: /maxSpanBytes|too large/i, dropped: true }],
  41: [{ 'td.inputSchemaMerges': '{"values":{"matchImportance":0}' }, { stage: 'input', field: 'td.inputSchemaMerges', message: /invalid JSON/i, dropped: false }],
  49: [{ 'td.inputSchemaMerges': '["values"]' }, { stage: 'input', field: 'td.inputSchemaMerges', message: /object|expected/i, dropped: false }],
  57: [{ 'td.outputValue': '{"rows":[1,2' }, { stage: 'output', field: 'td.outputValue', message: /invalid JSON/i, dropped: false }],
  65: [{ 'td.outputValue': '{"b":"x\udc00y"}' }, { stage: 'output', field: 'td.outputValue', message: /surrogate|UTF-16|UTF-8/, dropped: false }],
}
const OVERSIZED = 33

test(`${SDKS[0].label} BatchSpanProcessor: bad spans in a batch of ${SPANS} fail alone, with a report naming the field`, async (t) => {
  const sdk = SDKS[0]
  const dir = tmpDir(t)
  const reports = []
  const exporter = new OffloopExporter({ directory: dir, maxSpanBytes: MAX_SPAN_BYTES, onReport: (r) => reports.push(r) })
  const provider = makeProvider(sdk, [new sdk.mod.BatchSpanProcessor(exporter, { maxExportBatchSize: SPANS, maxQueueSize: 2 * SPANS })])
  t.after(() => provider.shutdown())

  const spans = createSpans(
    provider.getTracer('tusk-drift-sdk'),
    SPANS,
    (i) => ({ ...pgAttributes(i), ...(BAD[i] ? BAD[i][0] : {}) }),
    { perTrace: PER_TRACE },
  )
  await provider.forceFlush()
  await exporter.forceFlush()

  assert.equal(reports.length, 1, 'the SDK handed over one batch (the premise of this test)')
  const report = reports[0]
  assert.equal(report.spans, SPANS)

  const badIds = new Map(Object.keys(BAD).map((i) => [spans[i].spanContext().spanId, Number(i)]))
  const errorsById = new Map(report.errors.map((e) => [e.spanId, e]))

  for (const [spanId, i] of badIds) {
    const expect = BAD[i][1]
    const e = errorsById.get(spanId)
    assert.ok(e, `span #${i} (${JSON.stringify(BAD[i][0]).slice(0, 60)}) has an error entry`)
    assert.ok(Number.isInteger(e.index) && e.index >= 0 && e.index < SPANS, 'index is a batch position')
    assert.equal(e.traceId, spans[i].spanContext().traceId)
    assert.equal(e.stage, expect.stage, `span #${i} stage (${e.message})`)
    assert.equal(e.dropped, expect.dropped, `span #${i} dropped flag`)
    if (expect.field) assert.ok(e.message.startsWith(`${expect.field}:`), `span #${i} message names ${expect.field}: ${e.message}`)
    assert.match(e.message, expect.message, `span #${i} message`)
  }

  // The oversized span blocks its trace: its later siblings (and its root, which ends last) are
  // dropped as "trace is blocked". Every other span is written.
  const oversizedTrace = spans[OVERSIZED].spanContext().traceId
  const collateral = new Set()
  for (const e of report.errors) {
    if (badIds.has(e.spanId)) continue
    assert.equal(e.traceId, oversizedTrace, `unexpected error for a good span: ${JSON.stringify(e)}`)
    assert.equal(e.stage, 'filter')
    assert.equal(e.dropped, true)
    assert.match(e.message, /blocked/)
    collateral.add(e.spanId)
  }
  const blockedSiblings = spans.filter((s, i) => i > OVERSIZED && s.spanContext().traceId === oversizedTrace).map((s) => s.spanContext().spanId)
  // The root of that trace (index 32) ends after its children, so it is in the batch after them.
  blockedSiblings.push(spans[Math.floor(OVERSIZED / PER_TRACE) * PER_TRACE].spanContext().spanId)
  assert.deepEqual([...collateral].sort(), blockedSiblings.sort(), 'only later spans of the oversized trace are dropped with it')

  const expectedWritten = SPANS - badIds.size - collateral.size
  const failedCount = [...badIds.values()].filter((i) => !BAD[i][1].dropped).length
  assert.equal(report.written, expectedWritten, 'report.written')
  assert.equal(report.failed, failedCount, 'report.failed')
  assert.equal(report.dropped, 1 + collateral.size, 'report.dropped')

  const lines = readJsonl(dir)
  assert.equal(lines.length, expectedWritten, 'JSONL lines written')
  const written = new Set(lines.map((l) => l.line.spanId))
  for (const s of spans) {
    const id = s.spanContext().spanId
    assert.equal(written.has(id), !badIds.has(id) && !collateral.has(id), `span ${id} written iff good`)
  }

  const st = exporter.stats()
  assert.equal(st.spansInFlight, 0)
  assert.equal(st.spansReceived, st.spansWritten + st.spansDropped + st.spansFailed)
  assert.equal(st.spansWritten, expectedWritten)
  assert.equal(st.spansFailed, failedCount)
})

test('hashPayload: invalid UTF-8 at the Rust boundary throws an error mentioning UTF-8', () => {
  const bytes = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]) // {"a":"\xff"}
  assert.throws(() => hashPayload(bytes), (err) => {
    assert.ok(err instanceof Error)
    assert.match(err.message, /UTF-8/)
    return true
  })
  // The same text as valid UTF-8 hashes fine (the failure is about the byte, not the shape).
  assert.match(hashPayload(Buffer.from('{"a":"\u00ff"}', 'utf8')).valueHash, /^[0-9a-f]{64}$/)
})

test('hashPayload: invalid JSON and invalid merges throw naming the problem', () => {
  assert.throws(() => hashPayload('{"a":'), /invalid JSON/i)
  assert.throws(() => hashPayload('{"a":1}', { schemaMerges: '{"a":' }), /JSON/i)
})
