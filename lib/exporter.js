'use strict'
// OffloopExporter: an OpenTelemetry SpanExporter whose pipeline runs natively.

const { BatchWriter, SegmentPool } = require('./frame.js')
const { createNative } = require('./native.js')
const { reportError, warnSpanErrors, SUCCESS, FAILED } = require('./result.js')

// Longest stretch of JS-thread work while framing a batch before yielding to the event loop.
const SLICE_BUDGET_MS = 1

const yieldToLoop = () => new Promise((resolve) => setImmediate(resolve))

class OffloopExporter {
  constructor(options = {}) {
    this._native = createNative(options)
    this._onReport = typeof options.onReport === 'function' ? options.onReport : undefined
    this._pending = new Set()
    this._isShutdown = false
    this._shutdownPromise = undefined
    // Frame buffers kept for reuse: at most the queue budget (the native side accepts no more
    // than that at once anyway), none after 10 s without exports.
    this._segments = new SegmentPool({ maxBytes: options.maxQueueBytes ?? 64 * 1024 * 1024 })
  }

  // SpanExporter.export: frames the spans in ~1 ms slices, then one native call.
  export(spans, resultCallback) {
    if (this._isShutdown) {
      settle(resultCallback, { code: FAILED, error: new Error('offloop: export() after shutdown(); the spans were not recorded') })
      return
    }
    // A full queue refuses the batch before any framing work or memory is spent on it.
    const refused = this._native.refuseIfFull(spans.length)
    // Tracked until the native side answers, so forceFlush()/shutdown() called right after
    // export() cannot overtake a batch that is still being framed.
    const pending = refused ? Promise.resolve(refused) : this._exportFramed(spans)
    this._pending.add(pending)
    pending
      .finally(() => this._pending.delete(pending))
      .then(
        (report) => {
          if (this._onReport) safeCall(this._onReport, report)
          else warnSpanErrors(report)
          const error = reportError(report)
          settle(resultCallback, error ? { code: FAILED, error } : { code: SUCCESS })
        },
        (error) => settle(resultCallback, { code: FAILED, error }),
      )
  }

  // Frames the batch; pooled segments go back to the pool once the native side has answered
  // (it reads them in place until then). A small batch's own buffer is not held here at all.
  _exportFramed(spans) {
    const pool = this._segments
    return frameBatch(spans, pool).then((segments) => {
      const pending = this._native.export(segments)
      if (!pool.pooled(segments)) return pending
      return pending.finally(() => pool.give(segments))
    })
  }

  // Waits for every batch handed to export() before this call.
  async forceFlush() {
    await Promise.allSettled([...this._pending])
    await this._native.flush()
  }

  shutdown() {
    if (!this._shutdownPromise) {
      this._isShutdown = true
      this._shutdownPromise = (async () => {
        await Promise.allSettled([...this._pending])
        await this._native.shutdown()
      })()
    }
    return this._shutdownPromise
  }

  stats() {
    return this._native.stats()
  }
}

async function frameBatch(spans, pool = undefined) {
  const writer = new BatchWriter(undefined, pool)
  let sliceStart = performance.now()
  for (let i = 0; i < spans.length; i++) {
    writer.add(spans[i])
    if (performance.now() - sliceStart >= SLICE_BUDGET_MS && i + 1 < spans.length) {
      await yieldToLoop()
      sliceStart = performance.now()
    }
  }
  return writer.finish()
}

// A throwing resultCallback must not become an unhandled rejection in the host app.
function settle(resultCallback, result) {
  try {
    resultCallback(result)
  } catch (err) {
    process.emitWarning(`offloop: the export result callback threw: ${err && err.message}`, { code: 'OFFLOOP_CALLBACK_ERROR' })
  }
}

function safeCall(fn, arg) {
  try {
    fn(arg)
  } catch (err) {
    process.emitWarning(`offloop: onReport threw: ${err && err.message}`)
  }
}

module.exports = { OffloopExporter, frameBatch }
