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

// Instrumentations pass the same merges object with every call: its JSON text is kept per
// object (a merges object is not expected to change once handed over).
const mergesText = new WeakMap()

function mergesJson(merges) {
  if (merges === undefined || merges === null) return undefined
  if (typeof merges === 'string') return merges
  if (typeof merges !== 'object') throw new TypeError(`offloop: request.inputSchemaMerges must be an object or JSON text, got ${typeof merges}`)
  let text = mergesText.get(merges)
  if (text === undefined) {
    text = JSON.stringify(merges)
    mergesText.set(merges, text)
  }
  return text
}

function checkRequest(request) {
  if (request === null || typeof request !== 'object') throw new TypeError('offloop: findMock needs a request object')
}

function inputJson(request) {
  const v = request.inputValue
  if (typeof v === 'string') return v
  const text = v === undefined ? undefined : JSON.stringify(v)
  if (text === undefined) throw new TypeError('offloop: request.inputValue must be a JSON string or a JSON-able value')
  return text
}

function traceIdOf(request) {
  const t = request.traceId || request.testId || undefined
  return t === undefined ? undefined : String(t)
}

// One native call with positional arguments (cheaper to read than an object's properties):
// traceId, packageName, name, submoduleName, inputValue (JSON text), inputSchemaMerges (JSON
// text), isPreAppStart. The result comes back as one JSON text.
function callNative(fn, native, request) {
  checkRequest(request)
  return fn.call(
    native,
    traceIdOf(request),
    optionalString(request, 'packageName'),
    optionalString(request, 'name'),
    optionalString(request, 'submoduleName'),
    inputJson(request),
    mergesJson(request.inputSchemaMerges),
    request.isPreAppStart === true,
  )
}

// The cascade's levels by `priority * 2 + reused`: their names come from the native side once
// instead of with every match.
let levels
function levelOf(priority, reused) {
  if (levels === undefined) {
    levels = []
    for (const l of binding.NativeRecording.matchLevels()) levels[l.priority * 2 + (l.reused ? 1 : 0)] = l
  }
  return levels[priority * 2 + (reused ? 1 : 0)]
}

// The native result is a positional JSON array (crates/offloop-node/src/replay.rs,
// result_json): parsing values without keys and building the object here is cheaper than
// parsing an object.
function fromNative(text) {
  const a = JSON.parse(text)
  if (a[0] === 0) return { found: false, reason: a[1], requestHashes: { valueHash: a[2], schemaHash: a[3] } }
  const level = levelOf(a[9], a[10])
  const r = {
    found: true,
    outputValue: a[1],
    traceId: a[5],
    spanId: a[6],
    name: a[7],
    packageName: a[8],
    matchType: level.matchType,
    matchTypeCode: level.matchTypeCode,
    matchScope: level.matchScope,
    priority: a[9],
    reused: a[10],
    // Sent only when it adds to the level's wording (a ranked match's scores).
    description: a[11] ?? level.description,
    topCandidates: a[13],
    // The schema hash only when a schema level computed it (see RequestHashes).
    requestHashes: a[15] === null ? { valueHash: a[14] } : { valueHash: a[14], schemaHash: a[15] },
  }
  if (a[2] !== null) r.metadata = a[2][0]
  if (a[3] !== null) r.timestamp = { seconds: a[3], nanos: a[4] }
  if (a[12] !== null) r.similarityScore = a[12]
  return r
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
    return fromNative(callNative(this._native.findMock, this._native, request))
  }

  // The whole cascade, similarity ranking included, on the native pool.
  async findMockAsync(request) {
    return fromNative(await callNative(this._native.findMockAsync, this._native, request))
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
