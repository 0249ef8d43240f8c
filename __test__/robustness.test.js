'use strict'
// The shim's own failure modes: an unreadable span object, a throwing result callback, an
// onBatch that never settles. Each must fail alone, visibly, without hanging or crashing.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { OffloopExporter } = require('..')

function tmpDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'offloop-robust-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

function span(i, attributes = {}) {
  return {
    name: 'pg.query',
    kind: 2,
    spanContext: () => ({ traceId: 'ab'.repeat(16), spanId: (i + 1).toString(16).padStart(16, '0') }),
    startTime: [1700000000, 0],
    duration: [0, 1000],
    status: { code: 1 },
    attributes: { 'td.inputValue': JSON.stringify({ i }), ...attributes },
  }
}

function exportOnce(exporter, spans) {
  return new Promise((resolve) => exporter.export(spans, resolve))
}

function countLines(dir) {
  return fs
    .readdirSync(dir)
    .map((f) => fs.readFileSync(path.join(dir, f), 'utf8').split('\n').filter(Boolean).length)
    .reduce((a, b) => a + b, 0)
}

test('an unreadable span object fails alone, with the reason, and the batch is written', async (t) => {
  const dir = tmpDir(t)
  const reports = []
  const exporter = new OffloopExporter({ directory: dir, onReport: (r) => reports.push(r) })
  const broken = span(1)
  Object.defineProperty(broken, 'attributes', {
    get() {
      throw new Error('attributes exploded')
    },
  })
  const result = await exportOnce(exporter, [span(0), broken, span(2)])
  await exporter.shutdown()
  assert.equal(result.code, 0)
  assert.equal(countLines(dir), 2)
  const [report] = reports
  assert.equal(report.failed, 1)
  assert.equal(report.errors[0].index, 1)
  assert.equal(report.errors[0].stage, 'frame')
  assert.match(report.errors[0].message, /span object could not be read: attributes exploded/)
  assert.equal(report.errors[0].spanId, '0000000000000002')
})

test('a kind that is not a SpanKind number is named as such', async (t) => {
  const reports = []
  const exporter = new OffloopExporter({ directory: tmpDir(t), onReport: (r) => reports.push(r) })
  await exportOnce(exporter, [{ ...span(0), kind: 'SERVER' }])
  await exporter.shutdown()
  assert.match(reports[0].errors[0].message, /^kind: missing or not an OpenTelemetry SpanKind/)
})

test('a throwing result callback is reported as a warning, not an unhandled rejection', async (t) => {
  const exporter = new OffloopExporter({ directory: tmpDir(t) })
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  t.after(() => process.off('warning', onWarning))
  let called = 0
  exporter.export([span(0)], () => {
    called++
    throw new Error('callback bug')
  })
  await exporter.forceFlush()
  await new Promise((resolve) => setImmediate(resolve))
  await exporter.shutdown()
  assert.equal(called, 1)
  assert.ok(warnings.some((w) => /result callback threw: callback bug/.test(w.message)), 'warned')
})

test('an onBatch that never settles fails its batch after exportTimeoutMillis; flush returns', async () => {
  const exporter = new OffloopExporter({ onBatch: () => new Promise(() => {}), exportTimeoutMillis: 200 })
  const result = await exportOnce(exporter, [span(0), span(1)])
  await exporter.forceFlush()
  assert.equal(result.code, 1)
  assert.match(result.error.message, /onBatch did not settle within exportTimeoutMillis \(200 ms\)/)
  const s = exporter.stats()
  assert.equal(s.spansFailed, 2)
  assert.equal(s.spansInFlight, 0)
  await exporter.shutdown()
})
