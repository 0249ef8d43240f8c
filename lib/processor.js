'use strict'
// OffloopSpanProcessor: a drop-in for BatchSpanProcessor. Each span is framed as it ends and
// handed over in one small synchronous call; queueing, batching, timers and the queue limit
// live in native code, so no batch ever exists on the JS thread.

const { SpanWriter } = require('./frame.js')
const { createNative } = require('./native.js')
const { warnSpanErrors } = require('./result.js')

class OffloopSpanProcessor {
  constructor(options = {}) {
    const delay = options.scheduledDelayMillis
    const size = options.maxExportBatchSize
    if (delay !== undefined && !(Number.isFinite(delay) && delay > 0)) {
      throw new TypeError(`offloop: scheduledDelayMillis must be a positive number, got ${String(delay)}`)
    }
    if (size !== undefined && !(Number.isInteger(size) && size > 0)) {
      throw new TypeError(`offloop: maxExportBatchSize must be a positive integer, got ${String(size)}`)
    }
    if (options.onReport !== undefined && typeof options.onReport !== 'function') {
      throw new TypeError('offloop: onReport must be a function')
    }
    // Every batch's report, so a span the native side rejects is reported (its field and the
    // problem), not only counted: to onReport, or as a rate-limited process warning.
    const userOnReport = options.onReport
    const onReport = (report) => {
      if (!userOnReport) return warnSpanErrors(report)
      try {
        userOnReport(report)
      } catch (err) {
        process.emitWarning(`offloop: onReport threw: ${err && err.message}`)
      }
    }
    this._native = createNative(
      options,
      {
        processor: true,
        scheduledDelayMillis: delay,
        maxExportBatchSize: size,
      },
      onReport,
    )
    this._writer = new SpanWriter(64 * 1024)
    this._shutdownPromise = undefined
  }

  onStart() {}

  onEnd(span) {
    let frame
    try {
      frame = this._writer.frame(span)
    } catch (err) {
      // Not a span we can read (its spanContext() throws, a buffer cannot be allocated): it is
      // reported, never thrown into the span.end() that called us.
      warnUnframable(err)
      return
    }
    // After shutdown the native side refuses and counts the span as failed.
    this._native.enqueue(frame)
  }

  async forceFlush() {
    await this._native.flush()
  }

  shutdown() {
    if (!this._shutdownPromise) this._shutdownPromise = this._native.shutdown().then(() => undefined)
    return this._shutdownPromise
  }

  stats() {
    return this._native.stats()
  }
}

// The first 5, then every 100th.
let unframable = 0
function warnUnframable(err) {
  unframable++
  if (unframable > 5 && unframable % 100 !== 0) return
  process.emitWarning(`offloop: onEnd could not read a span (${unframable} so far); it was not recorded: ${err && err.message}`, {
    code: 'OFFLOOP_SPAN_ERROR',
  })
}

module.exports = { OffloopSpanProcessor }
