'use strict'
// OffloopSpanProcessor: a drop-in for BatchSpanProcessor. Each span is framed as it ends and
// handed over in one small synchronous call; queueing, batching, timers and the queue limit
// live in native code, so no batch ever exists on the JS thread.

const { SpanWriter } = require('./frame.js')
const { createNative } = require('./native.js')

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
    this._native = createNative(options, {
      processor: true,
      scheduledDelayMillis: delay,
      maxExportBatchSize: size,
    })
    this._writer = new SpanWriter(64 * 1024)
    this._shutdownPromise = undefined
  }

  onStart() {}

  onEnd(span) {
    // After shutdown the native side refuses and counts the span as failed.
    this._native.enqueue(this._writer.frame(span))
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

module.exports = { OffloopSpanProcessor }
