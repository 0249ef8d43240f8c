'use strict'
// Recording: the replay engine. Loads a recordings directory natively (off the JS thread) and
// answers outbound calls from it with the exporter's own hashing code.

const path = require('node:path')
const { binding } = require('./native.js')

const HASH_ALGORITHMS = ['blake3', 'sha256']

const optionalString = (request, name) => {
  const v = request[name]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') throw new TypeError(`offloop: request.${name} must be a string, got ${typeof v}`)
  return v
}

// The native arguments: [traceId, packageName, name, submoduleName, inputValue (JSON text),
// inputSchemaMerges (JSON text), isPreAppStart]. The result comes back as one JSON text.
function nativeArgs(request) {
  if (request === null || typeof request !== 'object') throw new TypeError('offloop: findMock needs a request object')
  let inputValue = request.inputValue
  if (typeof inputValue !== 'string') {
    inputValue = inputValue === undefined ? undefined : JSON.stringify(inputValue)
    if (inputValue === undefined) throw new TypeError('offloop: request.inputValue must be a JSON string or a JSON-able value')
  }
  let merges = request.inputSchemaMerges
  if (merges === null) merges = undefined
  else if (merges !== undefined && typeof merges !== 'string') merges = JSON.stringify(merges)
  const traceId = request.traceId || request.testId || undefined
  return [
    traceId === undefined ? undefined : String(traceId),
    optionalString(request, 'packageName'),
    optionalString(request, 'name'),
    optionalString(request, 'submoduleName'),
    inputValue,
    merges,
    request.isPreAppStart === true,
  ]
}

class Recording {
  /** Use Recording.open() or Recording.fromHandle(). */
  constructor(native) {
    if (!(native instanceof binding.NativeRecording)) throw new TypeError('offloop: use Recording.open(directory) or Recording.fromHandle(handle)')
    this._native = native
  }

  // Loads every *trace*.jsonl / *trace*.pb file in `directory` on the native blocking pool.
  static async open(directory, options = {}) {
    if (typeof directory !== 'string' || directory === '') throw new TypeError('offloop: Recording.open needs a directory')
    if (options === null || typeof options !== 'object') throw new TypeError('offloop: options must be an object')
    const { hashAlgorithm = 'blake3', maxSkippedReasons } = options
    if (!HASH_ALGORITHMS.includes(hashAlgorithm)) {
      throw new TypeError(`offloop: hashAlgorithm must be one of ${HASH_ALGORITHMS.join(', ')}, got ${String(hashAlgorithm)}`)
    }
    const native = await binding.NativeRecording.open(path.resolve(directory), { hashAlgorithm, maxSkippedReasons })
    return new Recording(native)
  }

  // The same native recording, from any worker thread of this process (see handle()).
  static fromHandle(handle) {
    if (!Number.isInteger(handle) || handle < 1) throw new TypeError('offloop: Recording.fromHandle needs a handle from recording.handle()')
    return new Recording(binding.NativeRecording.fromHandle(handle))
  }

  handle() {
    return this._native.handle()
  }

  // Hash levels only, synchronous.
  findMock(request) {
    return JSON.parse(this._native.findMock(...nativeArgs(request)))
  }

  // The whole cascade, similarity ranking included, on the native pool.
  async findMockAsync(request) {
    return JSON.parse(await this._native.findMockAsync(...nativeArgs(request)))
  }

  stats() {
    const s = this._native.stats()
    const matchesByType = {}
    for (const { matchType, count } of s.matchesByType) matchesByType[matchType] = count
    const matchesByPriority = {}
    s.matchesByPriority.forEach((n, p) => {
      if (n > 0) matchesByPriority[p] = n
    })
    return {
      files: s.files,
      traces: s.traces,
      spans: s.spans,
      skippedLines: s.skippedLines,
      skipped: s.skipped,
      duplicateSpans: s.duplicateSpans,
      loadMs: s.loadMs,
      hashAlgorithm: s.hashAlgorithm,
      matches: s.matches,
      matchesByType,
      matchesByPriority,
      misses: s.misses,
    }
  }

  // A recorded span's recomputed and stored hashes and its file:line; null if unknown.
  describeSpan(traceId, spanId) {
    return this._native.describeSpan(String(traceId), String(spanId)) ?? null
  }
}

module.exports = { Recording }
