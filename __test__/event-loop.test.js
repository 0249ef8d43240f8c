'use strict'
// The event loop stays free while a large batch is recorded (behavioural, no timing
// thresholds): other callbacks keep running between handing the spans over and the result,
// and the native side did the work (the lines are on disk).

const test = require('node:test')
const assert = require('node:assert/strict')

const { OffloopExporter, OffloopSpanProcessor } = require('..')
const { SDKS, makeProvider, tmpDir, countLines, pgAttributes, pgOutput, createSpans, makeReadableSpans, exportAsync } = require('./support/otel.js')

const SPANS = 512
const ROWS = 200 // 200 rows × 8 mixed columns ≈ 37 KB of td.outputValue per span
const MIN_TICKS = 5

// Eight distinct large outputs, shared by the spans (the strings are built once).
const OUTPUTS = Array.from({ length: 8 }, (_, k) => JSON.stringify(pgOutput(k + 1, ROWS)))

function bigAttributes(i) {
  return { ...pgAttributes(i), 'td.outputValue': OUTPUTS[i % OUTPUTS.length] }
}

/**
 * Counts setImmediate and setTimeout(0) callbacks until stop() is called; `whileBusy` counts
 * the setImmediate callbacks that ran while `busy()` was true (native work in flight).
 */
function startTicker(busy) {
  const counts = { immediate: 0, timeout: 0, whileBusy: 0 }
  let running = true
  const onImmediate = () => {
    if (!running) return
    counts.immediate++
    if (busy()) counts.whileBusy++
    setImmediate(onImmediate)
  }
  const onTimeout = () => {
    if (!running) return
    counts.timeout++
    setTimeout(onTimeout, 0)
  }
  setImmediate(onImmediate)
  setTimeout(onTimeout, 0)
  return {
    stop() {
      running = false
      return { ...counts }
    },
  }
}

test('the payloads are the size the test claims', () => {
  for (const o of OUTPUTS) {
    const bytes = Buffer.byteLength(o)
    assert.ok(bytes > 30000 && bytes < 45000, `outputValue is ${bytes} B`)
    assert.equal(Object.keys(JSON.parse(o).rows[0]).length, 8)
  }
})

test(`OffloopExporter: callbacks keep running while ${SPANS} × ~37 KB spans are exported`, async (t) => {
  const dir = tmpDir(t)
  const spans = makeReadableSpans(SDKS[0], SPANS, bigAttributes, { perTrace: 32 })
  assert.equal(spans.length, SPANS)
  const exporter = new OffloopExporter({ directory: dir })
  t.after(() => exporter.shutdown())

  const ticker = startTicker(() => exporter.stats().spansInFlight > 0)
  const result = await exportAsync(exporter, spans)
  const ticks = ticker.stop()

  assert.equal(result.code, 0, `export result: ${result.error && result.error.message}`)
  assert.equal(countLines(dir), SPANS, 'every span was recorded by the native pipeline')
  assert.equal(exporter.stats().spansWritten, SPANS)
  t.diagnostic(`setImmediate ticks: ${ticks.immediate} (${ticks.whileBusy} with the batch in flight), setTimeout(0) ticks: ${ticks.timeout}`)
  assert.ok(ticks.immediate >= MIN_TICKS, `setImmediate callbacks between export() and its result: ${ticks.immediate}`)
  assert.ok(ticks.whileBusy >= MIN_TICKS, `setImmediate callbacks while the batch was in flight natively: ${ticks.whileBusy}`)
  assert.ok(ticks.timeout >= 1, `setTimeout(0) callbacks between export() and its result: ${ticks.timeout}`)
})

test(`OffloopSpanProcessor: callbacks keep running while ${SPANS} ended ~37 KB spans are flushed`, async (t) => {
  const dir = tmpDir(t)
  const sdk = SDKS[0]
  // No batch forms before forceFlush(): the delay is long and the batch size above the count,
  // so all native work happens between forceFlush() and its resolution.
  const processor = new OffloopSpanProcessor({ directory: dir, scheduledDelayMillis: 600000, maxExportBatchSize: 4 * SPANS })
  const provider = makeProvider(sdk, [processor])
  t.after(() => provider.shutdown())

  createSpans(provider.getTracer('tusk-drift-sdk'), SPANS, bigAttributes, { perTrace: 32 })
  const before = processor.stats()
  assert.equal(before.spansWritten, 0, 'nothing written before the flush')
  assert.equal(countLines(dir), 0)

  const ticker = startTicker(() => processor.stats().spansInFlight > 0)
  await provider.forceFlush()
  const ticks = ticker.stop()

  assert.equal(countLines(dir), SPANS, 'every span was recorded by the native pipeline')
  const st = processor.stats()
  assert.equal(st.spansWritten, SPANS)
  assert.equal(st.spansInFlight, 0)
  t.diagnostic(`setImmediate ticks: ${ticks.immediate} (${ticks.whileBusy} with spans in flight), setTimeout(0) ticks: ${ticks.timeout}`)
  assert.ok(ticks.immediate >= MIN_TICKS, `setImmediate callbacks between forceFlush() and its resolution: ${ticks.immediate}`)
  assert.ok(ticks.whileBusy >= MIN_TICKS, `setImmediate callbacks while the spans were in flight natively: ${ticks.whileBusy}`)
  assert.ok(ticks.timeout >= 1, `setTimeout(0) callbacks between forceFlush() and its resolution: ${ticks.timeout}`)
})
