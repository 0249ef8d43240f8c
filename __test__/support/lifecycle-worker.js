'use strict'
// A worker_threads body for reliability-lifecycle.test.js: loads the addon in the worker and
// uses it in one of several ways, then reports to the parent (which may terminate it at any
// point, including while native work is in flight).
//
// workerData: { root, dir, mode, id }
//   use        export + processor spans, flush, shutdown, report what was written; then idle
//              with live objects until terminated or until it exits by itself (`exit: true`)
//   midflight  start a large export whose onBatch never settles, report 'busy' at once
//   queued     end spans into a processor with a long delay (queued natively), report 'busy'
//   panic      __panicForTesting('sync') and ('pool') inside the worker, report the errors
//   idle       create an exporter and a processor, report 'ready'

const { parentPort, workerData } = require('node:worker_threads')
const fs = require('node:fs')
const path = require('node:path')

const { root, dir, mode, id } = workerData
const { OffloopExporter, OffloopSpanProcessor } = require(root)
const binding = require(path.join(root, 'binding.js'))
const { fakeSpan, traceIdOf } = require('./reliability.js')

const spans = (count, base) => Array.from({ length: count }, (_, i) => fakeSpan(base + i, { traceId: traceIdOf(id * 1000 + Math.floor(i / 8)) }))

async function main() {
  if (mode === 'use') {
    const exporter = new OffloopExporter({ directory: dir, onReport: () => {} })
    const processor = new OffloopSpanProcessor({ directory: dir, scheduledDelayMillis: 5 })
    const batches = []
    let delivered = 0
    const withSink = new OffloopExporter({ onBatch: async (b) => void (delivered += b.length) })
    const result = await new Promise((resolve) => exporter.export(spans(64, id * 100_000), resolve))
    for (const s of spans(32, id * 100_000 + 500)) processor.onEnd(s)
    batches.push(await new Promise((resolve) => withSink.export(spans(16, id * 100_000 + 900), resolve)))
    await Promise.all([exporter.forceFlush(), processor.forceFlush(), withSink.forceFlush()])
    const lines = fs.readdirSync(dir).reduce((n, f) => n + fs.readFileSync(path.join(dir, f), 'utf8').split('\n').length - 1, 0)
    const stats = [exporter.stats(), processor.stats(), withSink.stats()]
    await Promise.all([exporter.shutdown(), processor.shutdown()])
    globalThis.keep = withSink // left alive: must not keep the worker from exiting
    parentPort.postMessage({ done: true, code: result.code, sinkCode: batches[0].code, lines, delivered, stats })
  } else if (mode === 'midflight') {
    const exporter = new OffloopExporter({ directory: dir, onBatch: () => new Promise(() => {}), onReport: () => {} })
    exporter.export(spans(512, id * 100_000), () => {})
    exporter.export(spans(512, id * 100_000 + 1000), () => {})
    globalThis.keep = exporter
    parentPort.postMessage({ busy: true })
  } else if (mode === 'queued') {
    const processor = new OffloopSpanProcessor({ directory: dir, scheduledDelayMillis: 60_000, onBatch: () => {} })
    for (const s of spans(300, id * 100_000)) processor.onEnd(s)
    processor.forceFlush() // a flush in flight on the blocking pool
    globalThis.keep = processor
    parentPort.postMessage({ busy: true })
  } else if (mode === 'panic') {
    let sync
    try {
      binding.__panicForTesting('sync')
    } catch (e) {
      sync = { isError: e instanceof Error, message: e.message }
    }
    const pool = binding.__panicForTesting('pool')
    parentPort.postMessage({ done: true, sync, pool: { failed: pool.failed, message: pool.errors[0] && pool.errors[0].message } })
  } else {
    globalThis.keep = [new OffloopExporter({ directory: dir }), new OffloopSpanProcessor({ directory: dir })]
    parentPort.postMessage({ ready: true })
  }
}

main().catch((e) => parentPort.postMessage({ error: String(e && e.stack) }))
