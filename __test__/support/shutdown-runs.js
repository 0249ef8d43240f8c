'use strict'
// Randomized shutdown runs: spans handed over at random moments (synchronously, after a
// microtask, an event-loop turn or a timer, while earlier batches are still being framed or
// written), forceFlush()/shutdown() called at a random point, then the recordings checked:
// every span accepted before the call is in the files exactly once, nothing after it is.
// Used by __test__/reliability-shutdown.test.js (hundreds of runs) and scripts/shutdown-soak.js
// (thousands).
//
// Each run returns a list of problems ([] when it passed) and its counts.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const api = require('@opentelemetry/api')

const { OffloopExporter, OffloopSpanProcessor } = require('../..')
const { SDKS, makeProvider } = require('./otel.js')
const { fakeSpan, spanIdCounts, accountingError, rng: makeRng } = require('./reliability.js')

const FAILED = 1
const BIG_OUTPUT = JSON.stringify({ rows: Array.from({ length: 150 }, (_, i) => ({ id: i, name: `row ${i}`, ok: i % 2 === 0 })) })

const immediate = () => new Promise((resolve) => setImmediate(resolve))
const timeout = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** A random pause: none, a microtask, an event-loop turn or a short timer. */
function pause(r) {
  const k = r.int(5)
  if (k === 0) return undefined
  if (k === 1) return Promise.resolve()
  if (k === 2) return immediate()
  return timeout(r.int(3))
}

function tmp() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'offloop-shutdown-'))
}

/** Problems with `ids` (accepted before the call) in `counts` at the moment it resolved. */
function checkOnDisk(what, ids, counts, problems) {
  let missing = 0
  let duplicated = 0
  for (const id of ids) {
    const n = counts.get(id) || 0
    if (n === 0) missing++
    else if (n > 1) duplicated++
  }
  if (missing) problems.push(`${what}: ${missing} of ${ids.length} accepted spans missing from the files`)
  if (duplicated) problems.push(`${what}: ${duplicated} spans written more than once`)
}

/** OffloopExporter.export() called directly, shutdown() (and maybe forceFlush()) at random points. */
async function exportRun(seed, runIndex) {
  const r = makeRng(seed)
  const dir = tmp()
  const problems = []
  try {
    const exporter = new OffloopExporter({ directory: dir, workers: 1 + r.int(2), onReport: () => {} })
    const batches = 1 + r.int(6)
    const shutdownAt = r.int(batches + 1)
    const flushAt = r() < 0.5 ? r.int(batches + 1) : -1
    const accepted = []
    const refused = []
    const callbacks = []
    let shutdown
    let flushCheck
    let n = runIndex * 100_000
    for (let k = 0; k <= batches; k++) {
      if (k === flushAt && !shutdown) {
        const before = accepted.slice()
        // Later batches may be being written while the files are read.
        flushCheck = exporter
          .forceFlush()
          .then(() => checkOnDisk('forceFlush()', before, spanIdCounts(dir, { writing: true }), problems))
          .catch((e) => problems.push(`forceFlush(): ${e.message}`))
        if (r() < 0.5) await flushCheck
      }
      if (k === shutdownAt) shutdown = exporter.shutdown()
      if (k === batches) break
      const size = r.pick([1, 2, 7, 33, 128, 300])
      const big = r() < 0.15
      const spans = Array.from({ length: size }, () => fakeSpan(n++, big ? { output: BIG_OUTPUT } : {}))
      const ids = spans.map((s) => s.spanContext().spanId)
      ;(shutdown ? refused : accepted).push(...ids)
      const after = !!shutdown
      callbacks.push(
        new Promise((resolve) =>
          exporter.export(spans, (result) => resolve({ after, result })),
        ),
      )
      await pause(r)
    }
    if (!shutdown) shutdown = exporter.shutdown()
    await shutdown
    const counts = spanIdCounts(dir)
    checkOnDisk('shutdown()', accepted, counts, problems)
    const leaked = refused.filter((id) => counts.has(id)).length
    if (leaked) problems.push(`${leaked} spans exported after shutdown() were written`)
    if (flushCheck) await flushCheck
    for (const { after, result } of await Promise.all(callbacks)) {
      if (after && (result.code !== FAILED || !/shut ?down/i.test(result.error && result.error.message))) {
        problems.push(`export after shutdown(): expected FAILED with a shutdown reason, got ${JSON.stringify({ code: result.code, error: result.error && result.error.message })}`)
      }
      if (!after && result.code !== 0) problems.push(`export before shutdown() failed: ${result.error && result.error.message}`)
    }
    const s = exporter.stats()
    if (accountingError(s)) problems.push(accountingError(s))
    if (s.spansInFlight !== 0) problems.push(`spansInFlight ${s.spansInFlight} after shutdown()`)
    if (s.spansWritten !== accepted.length) problems.push(`spansWritten ${s.spansWritten} !== accepted ${accepted.length}`)
    await exporter.shutdown() // twice is safe
    return { problems, accepted: accepted.length, refused: refused.length }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * Spans ended in a real provider at random moments, provider.shutdown() at a random point.
 * `kind`: 'bsp' (OffloopExporter under the SDK's BatchSpanProcessor) or 'processor'
 * (OffloopSpanProcessor).
 */
async function providerRun(kind, seed) {
  const r = makeRng(seed)
  const dir = tmp()
  const problems = []
  try {
    const sdk = SDKS[r.int(SDKS.length)]
    let processor
    let exporter
    if (kind === 'bsp') {
      exporter = new OffloopExporter({ directory: dir, workers: 1 + r.int(2), onReport: () => {} })
      processor = new sdk.mod.BatchSpanProcessor(exporter, {
        maxExportBatchSize: r.pick([4, 32, 256]),
        scheduledDelayMillis: 1 + r.int(10),
        maxQueueSize: 100_000,
      })
    } else {
      processor = new OffloopSpanProcessor({
        directory: dir,
        workers: 1 + r.int(2),
        maxExportBatchSize: r.pick([1, 16, 100, 512]),
        scheduledDelayMillis: 1 + r.int(10),
      })
    }
    const provider = makeProvider(sdk, [processor])
    const tracer = provider.getTracer('tusk-drift-sdk')
    const ended = []
    const bursts = 1 + r.int(6)
    const shutdownAt = r.int(bursts + 1)
    let shutdown
    for (let b = 0; b <= bursts; b++) {
      if (b === shutdownAt) {
        shutdown = provider.shutdown()
        break
      }
      const size = r.pick([1, 5, 40, 150])
      const big = r() < 0.15
      // One trace per burst (a root and its children), like a request.
      const root = tracer.startSpan(`request ${b}`, { kind: api.SpanKind.SERVER }, api.ROOT_CONTEXT)
      const ctx = api.trace.setSpan(api.ROOT_CONTEXT, root)
      for (let i = 0; i < size; i++) {
        const span = i === size - 1 ? root : tracer.startSpan(`op ${i}`, { kind: r.pick([0, 2, 3, 4]) }, ctx)
        span.setAttributes({
          'td.inputValue': JSON.stringify({ b, i }),
          'td.outputValue': big ? BIG_OUTPUT : '{"ok":true}',
        })
        span.setStatus({ code: api.SpanStatusCode.OK })
        span.end()
        ended.push(span.spanContext().spanId)
      }
      await pause(r)
    }
    if (!shutdown) shutdown = provider.shutdown()
    // A span handed straight to the processor right after shutdown() was called (the native
    // flush has not started yet) is refused and counted failed, never written.
    const late = fakeSpan(999_999 + r.int(1000))
    if (kind === 'processor') {
      await Promise.resolve() // provider.shutdown() calls processor.shutdown() in a microtask (1.x)
      processor.onEnd(late)
    }
    await shutdown
    const counts = spanIdCounts(dir)
    checkOnDisk(`${kind} provider.shutdown()`, ended, counts, problems)
    const stats = (exporter || processor).stats()
    if (accountingError(stats)) problems.push(accountingError(stats))
    if (stats.spansInFlight !== 0) problems.push(`spansInFlight ${stats.spansInFlight} after shutdown()`)
    if (stats.spansWritten !== ended.length) problems.push(`spansWritten ${stats.spansWritten} !== ended ${ended.length}`)
    if (kind === 'processor') {
      if (counts.has(late.spanContext().spanId)) problems.push('a span ended after shutdown() was written')
      if (stats.spansFailed !== 1) problems.push(`the span ended after shutdown() is counted failed: ${JSON.stringify(stats)}`)
    }
    await (exporter || processor).shutdown() // twice is safe
    return { problems, accepted: ended.length, refused: kind === 'processor' ? 1 : 0 }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** Run `i` of a sequence: the mode rotates, the seed derives from `baseSeed`. */
async function run(i, baseSeed) {
  const seed = (baseSeed + i * 7919) >>> 0
  const mode = ['export', 'processor', 'bsp', 'export', 'processor'][i % 5]
  const res = mode === 'export' ? await exportRun(seed, i) : await providerRun(mode, seed)
  return { ...res, mode, seed }
}

module.exports = { run, exportRun, providerRun }
