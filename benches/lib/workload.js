'use strict'
// Seeded, deterministic pg-style span workload (shared by the benchmarks and the demo).
//
// Data layer (no OpenTelemetry needed):
//   const wl = createWorkload({ seed: 1, rows: 200, queriesPerTrace: 20 })
//   wl.query(t, q)       -> { sql, params, result, durationMs }   (trace t, query q; pure function of seed/t/q)
//   wl.queryAttributes(t, q) -> Tusk td.* attributes of that pg.query span
//   wl.trace(t)          -> { index, request, response, queries: [query…] }
//   wl.traceAttributes(t) -> { root: {…td.*}, queries: [{…td.*}, …] }
// Builders for real data (the demo's HTTP handler uses these on live requests):
//   pgQueryAttributes({ sql, params, result }), httpServerAttributes({ request, response })
// OpenTelemetry layer (works with sdk-trace-base 1.x and 2.x tracers):
//   startServerSpan / endServerSpan / emitQuerySpan  (building blocks, for async code)
//   emitTrace(tracer, wl, t) / emitTraces(tracer, wl, { traces })  (synchronous, returns ended spans)
//   SeededIdGenerator: reproducible trace/span ids for a provider's `idGenerator` option.
// Plain records (no OpenTelemetry needed):
//   plainSpans(wl, { traces })  -> spans as { traceId, spanId, …, attributes }; printed as JSON by
//   `node benches/lib/workload.js --dump --rows=N --traces=K` for the Rust criterion benches.
//
// Everything is a pure function of (seed, traceIndex, queryIndex): any trace can be produced
// without producing the ones before it, in any process, with identical bytes.

// The OpenTelemetry layer loads @opentelemetry/api on first use, so the data layer (and the
// `--dump` CLI below, which feeds the Rust criterion benches) needs no node_modules.
let otelApi
const otel = () => (otelApi ||= require('@opentelemetry/api'))

/** Instrumentation scope name the Tusk SDK uses (its exporter keeps only these spans). */
const TUSK_TRACER_NAME = 'tusk-drift-sdk'

const DEFAULTS = Object.freeze({
  seed: 1,
  rows: 200,
  queriesPerTrace: 20,
})

// ---------------------------------------------------------------------------
// PRNG
// ---------------------------------------------------------------------------

/** mulberry32: () => float in [0, 1). */
function mulberry32(seed) {
  let a = seed >>> 0
  return function rng() {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Mixes integers into one 32-bit seed (murmur3 finalizer per step). */
function mixSeed(...parts) {
  let h = 0x9e3779b9
  for (const p of parts) {
    h ^= p >>> 0
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
    h ^= h >>> 16
  }
  return h >>> 0
}

const intIn = (rng, lo, hi) => lo + Math.floor(rng() * (hi - lo + 1)) // inclusive
const pick = (rng, arr) => arr[Math.floor(rng() * arr.length)]

// ---------------------------------------------------------------------------
// Row data
// ---------------------------------------------------------------------------

const WORDS = (
  'order invoice payment refund shipment customer account balance pending settled ' +
  'priority express standard return warehouse north south east west annual monthly ' +
  'premium basic trial renewal discount coupon review approved rejected draft final ' +
  'blue green red large small medium bundle single package delivery pickup update'
).split(' ')
const TAGS = ['vip', 'b2b', 'b2c', 'promo', 'retry', 'manual', 'api', 'import', 'beta', 'legacy']
const CHANNELS = ['web', 'ios', 'android', 'partner', 'email', 'pos']
const REGIONS = ['us-east', 'us-west', 'eu-central', 'ap-south']

/** Space-separated words, exactly `len` characters (len >= 1). */
function text(rng, len) {
  let s = pick(rng, WORDS)
  while (s.length < len) s += ' ' + pick(rng, WORDS)
  return s.slice(0, len).trimEnd().padEnd(len, 'x')
}

const BASE_TIME_MS = Date.UTC(2024, 0, 1) // fixed so dates are deterministic

// Column layout of every generated result set (pg `fields` entries; 8 mixed-type columns).
// dataTypeID: int4 23, float8 701, text 25, bool 16, timestamptz 1184, jsonb 3802.
const COLUMNS = Object.freeze([
  { name: 'id', dataTypeID: 23, dataTypeSize: 4 },
  { name: 'acct', dataTypeID: 23, dataTypeSize: 4 },
  { name: 'amt', dataTypeID: 701, dataTypeSize: 8 },
  { name: 'descr', dataTypeID: 25, dataTypeSize: -1 },
  { name: 'active', dataTypeID: 16, dataTypeSize: 1 },
  { name: 'note', dataTypeID: 25, dataTypeSize: -1 },
  { name: 'ts', dataTypeID: 1184, dataTypeSize: 8 },
  { name: 'meta', dataTypeID: 3802, dataTypeSize: -1 },
])

function fieldsFor(tableID) {
  return COLUMNS.map((c, i) => ({
    name: c.name,
    tableID,
    columnID: i + 1,
    dataTypeID: c.dataTypeID,
    dataTypeSize: c.dataTypeSize,
    dataTypeModifier: -1,
    format: 'text',
  }))
}

/**
 * One row: ints, float, a 20–100 char string (skewed short, mean ~40), boolean, nullable
 * string (75% null), ISO date, nested JSON (object with an array).
 * ~185 bytes of JSON on average, so 200 rows + fields ≈ 37 KiB (38 kB) of td.outputValue.
 */
function genRow(rng, id) {
  const r = rng()
  return {
    id,
    acct: intIn(rng, 1000, 9999),
    amt: Math.round(rng() * 1e5) / 100,
    descr: text(rng, 20 + Math.floor(81 * r * r * r)),
    active: rng() < 0.8,
    note: rng() < 0.75 ? null : text(rng, intIn(rng, 5, 30)),
    ts: new Date(BASE_TIME_MS + Math.floor(rng() * 365 * 86400e3)).toISOString(),
    meta: { tags: rng() < 0.5 ? [] : [pick(rng, TAGS)], ch: pick(rng, CHANNELS) },
  }
}

// ---------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------

const TABLES = ['orders', 'invoices', 'payments', 'shipments', 'accounts', 'line_items', 'refunds', 'events']
const COLUMN_LIST = COLUMNS.map((c) => c.name).join(', ')

function genQuery(rng, rows) {
  const tableIdx = Math.floor(rng() * TABLES.length)
  const table = TABLES[tableIdx]
  const accountId = intIn(rng, 1000, 99999)
  const since = new Date(BASE_TIME_MS + Math.floor(rng() * 180 * 86400e3)).toISOString()
  const status = pick(rng, ['active', 'pending', 'settled'])
  const sql =
    `SELECT ${COLUMN_LIST} FROM ${table} ` +
    `WHERE acct = $1 AND ts >= $2 AND status = $3 ` +
    `ORDER BY ts DESC LIMIT $4`
  const firstId = intIn(rng, 1, 900_000)
  const resultRows = new Array(rows)
  for (let i = 0; i < rows; i++) resultRows[i] = genRow(rng, firstId + i)
  return {
    sql,
    params: [accountId, since, status, rows],
    result: {
      command: 'SELECT',
      rowCount: rows,
      oid: null,
      rows: resultRows,
      fields: fieldsFor(16384 + tableIdx),
    },
    // What a real pool round trip might take; used for span timings and the demo's delays.
    durationMs: 0.3 + rng() * 2.7,
  }
}

// ---------------------------------------------------------------------------
// Tusk td.* attributes
// ---------------------------------------------------------------------------

const PG_INPUT_SCHEMA_MERGES = JSON.stringify({ values: { matchImportance: 0 } })
const HTTP_INPUT_SCHEMA_MERGES = JSON.stringify({ headers: { matchImportance: 0 } })
// body: { encoding: BASE64, decodedType: JSON }
const HTTP_OUTPUT_SCHEMA_MERGES = JSON.stringify({ body: { encoding: 1, decodedType: 1 }, headers: { matchImportance: 0 } })
const PG_METADATA = JSON.stringify({ database: 'app', host: '127.0.0.1', port: 5432, clientType: 'client' })

/**
 * Attributes of a `pg.query` CLIENT span as the Tusk PgInstrumentation records it.
 * @param {{sql: string, params?: unknown[], result: object}} q  result = pg Result-like
 *   `{command, rowCount, oid, rows, fields}`
 */
function pgQueryAttributes({ sql, params = [], result }) {
  return {
    'td.name': 'pg.query',
    'td.packageName': 'pg',
    'td.packageType': 4, // PackageType.PG
    'td.instrumentationName': 'PgInstrumentation',
    'td.submodule': 'query',
    'td.inputValue': JSON.stringify({ text: sql, values: params, clientType: 'client' }),
    'td.inputSchemaMerges': PG_INPUT_SCHEMA_MERGES,
    'td.outputValue': JSON.stringify({
      command: result.command,
      rowCount: result.rowCount,
      oid: result.oid,
      rows: result.rows || [],
      fields: result.fields || [],
    }),
    'td.metadata': PG_METADATA,
  }
}

/**
 * Attributes of an inbound HTTP SERVER span as the Tusk HttpInstrumentation records it.
 * @param {{request: {method, url, target, headers, httpVersion?, remoteAddress?, remotePort?},
 *          response: {statusCode, statusMessage?, headers, body?: Buffer|string}}} o
 */
function httpServerAttributes({ request, response }) {
  const headers = { ...request.headers }
  delete headers['accept-encoding']
  const attrs = {
    'td.name': request.target,
    'td.packageName': 'http',
    'td.packageType': 1, // PackageType.HTTP
    'td.instrumentationName': 'HttpInstrumentation',
    'td.submodule': request.method,
    'td.inputValue': JSON.stringify({
      method: request.method,
      url: request.url,
      target: request.target,
      headers,
      httpVersion: request.httpVersion || '1.1',
      remoteAddress: request.remoteAddress,
      remotePort: request.remotePort,
    }),
    'td.inputSchemaMerges': HTTP_INPUT_SCHEMA_MERGES,
  }
  if (response) {
    const out = { statusCode: response.statusCode, statusMessage: response.statusMessage || 'OK', headers: response.headers || {} }
    if (response.body !== undefined && response.body !== null) {
      const buf = Buffer.isBuffer(response.body) ? response.body : Buffer.from(String(response.body))
      out.body = buf.toString('base64')
      out.bodySize = buf.length
    }
    attrs['td.outputValue'] = JSON.stringify(out)
    attrs['td.outputSchemaMerges'] = HTTP_OUTPUT_SCHEMA_MERGES
  }
  return attrs
}

/** The JSON body the simulated endpoint answers with (small summary of its query results). */
function responseBodyFor(traceIndex, queries) {
  return JSON.stringify({
    trace: traceIndex,
    queries: queries.length,
    rows: queries.reduce((n, q) => n + q.result.rowCount, 0),
    total: Math.round(queries.reduce((s, q) => s + q.result.rows[0].amt, 0) * 100) / 100,
  })
}

// ---------------------------------------------------------------------------
// Workload
// ---------------------------------------------------------------------------

/**
 * @param {{seed?: number, rows?: number, queriesPerTrace?: number}} [options]
 *   seed: any 32-bit integer (default 1); rows: rows per query result (default 200);
 *   queriesPerTrace: pg.query spans per trace (default 20).
 */
function createWorkload(options = {}) {
  const opts = { ...DEFAULTS, ...options }
  for (const k of ['rows', 'queriesPerTrace']) {
    if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new TypeError(`workload: ${k} must be a positive integer`)
  }
  if (!Number.isInteger(opts.seed)) throw new TypeError('workload: seed must be an integer')
  const { seed, rows, queriesPerTrace } = opts

  function query(traceIndex, queryIndex) {
    return genQuery(mulberry32(mixSeed(seed, traceIndex, queryIndex, 0x51)), rows)
  }

  function request(traceIndex) {
    const rng = mulberry32(mixSeed(seed, traceIndex, 0x4854))
    const accountId = intIn(rng, 1000, 99999)
    const target = `/api/accounts/${accountId}/activity?region=${pick(rng, REGIONS)}`
    return {
      method: 'GET',
      url: `http://127.0.0.1:8080${target}`,
      target,
      headers: { host: '127.0.0.1:8080', 'user-agent': 'offloop-workload/1', accept: 'application/json', 'x-request-id': `req-${seed}-${traceIndex}` },
      httpVersion: '1.1',
      remoteAddress: '127.0.0.1',
      remotePort: intIn(rng, 40000, 60000),
    }
  }

  function traceData(traceIndex) {
    const queries = []
    for (let q = 0; q < queriesPerTrace; q++) queries.push(query(traceIndex, q))
    const body = responseBodyFor(traceIndex, queries)
    return {
      index: traceIndex,
      request: request(traceIndex),
      response: {
        statusCode: 200,
        statusMessage: 'OK',
        headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
        body,
      },
      queries,
    }
  }

  function traceAttributes(traceIndex) {
    const t = traceData(traceIndex)
    return {
      root: httpServerAttributes({ request: t.request, response: t.response }),
      queries: t.queries.map(pgQueryAttributes),
      durationsMs: t.queries.map((q) => q.durationMs),
    }
  }

  return Object.freeze({
    options: Object.freeze({ seed, rows, queriesPerTrace }),
    query,
    queryAttributes: (traceIndex, queryIndex) => pgQueryAttributes(query(traceIndex, queryIndex)),
    request,
    trace: traceData,
    traceAttributes,
  })
}

// ---------------------------------------------------------------------------
// OpenTelemetry spans
// ---------------------------------------------------------------------------

/**
 * Starts a SERVER root span. Set its output later with endServerSpan().
 * @returns {{span, context}} context: the parent context for child spans.
 */
function startServerSpan(tracer, attributes, { startTime, parentContext = otel().context.active() } = {}) {
  const span = tracer.startSpan(
    attributes['td.name'] || 'http.server',
    { kind: otel().SpanKind.SERVER, attributes, startTime, root: true },
    parentContext,
  )
  return { span, context: otel().trace.setSpan(parentContext, span) }
}

/** Adds output attributes, sets status OK (ERROR for >= 300 like Tusk does) and ends the span. */
function endServerSpan(span, outputAttributes, { statusCode = 200, endTime } = {}) {
  if (outputAttributes) span.setAttributes(outputAttributes)
  const { SpanStatusCode } = otel()
  span.setStatus(statusCode >= 300 ? { code: SpanStatusCode.ERROR, message: `HTTP ${statusCode}` } : { code: SpanStatusCode.OK })
  span.end(endTime)
  return span
}

/** Creates and ends one CLIENT span (status OK) under parentContext. Returns the ended span. */
function emitQuerySpan(tracer, parentContext, attributes, { startTime, endTime } = {}) {
  const span = tracer.startSpan(attributes['td.name'] || 'pg.query', { kind: otel().SpanKind.CLIENT, attributes, startTime }, parentContext)
  span.setStatus({ code: otel().SpanStatusCode.OK })
  span.end(endTime)
  return span
}

/**
 * Synchronously emits trace `traceIndex` of `workload`: a SERVER root with
 * `queriesPerTrace` CLIENT pg.query children, timed back to back from `startTimeMs`.
 * @returns {object[]} the ended spans in end order (children first, root last) - ReadableSpans.
 */
function emitTrace(tracer, workload, traceIndex, { startTimeMs = Date.now() } = {}) {
  const attrs = workload.traceAttributes(traceIndex)
  const { root, queries, durationsMs } = attrs
  const { 'td.outputValue': outputValue, 'td.outputSchemaMerges': outputMerges, ...rootInput } = root
  const server = startServerSpan(tracer, rootInput, { startTime: startTimeMs, parentContext: otel().context.active() })
  const spans = []
  let t = startTimeMs + 0.2
  for (let i = 0; i < queries.length; i++) {
    const end = t + durationsMs[i]
    spans.push(emitQuerySpan(tracer, server.context, queries[i], { startTime: t, endTime: end }))
    t = end + 0.05
  }
  spans.push(endServerSpan(server.span, { 'td.outputValue': outputValue, 'td.outputSchemaMerges': outputMerges }, { endTime: t + 0.2 }))
  return spans
}

/**
 * Emits `traces` traces (indices startIndex…startIndex+traces-1).
 * @returns {object[]} all ended spans, in end order.
 */
function emitTraces(tracer, workload, { traces, startIndex = 0, startTimeMs = Date.now() } = {}) {
  if (!Number.isInteger(traces) || traces < 0) throw new TypeError('emitTraces: traces must be a non-negative integer')
  const out = []
  for (let i = 0; i < traces; i++) {
    const spans = emitTrace(tracer, workload, startIndex + i, { startTimeMs: startTimeMs + i * 100 })
    for (const s of spans) out.push(s)
  }
  return out
}

/** Number of traces needed for at least `spans` spans (each trace = queriesPerTrace + 1 spans). */
function tracesForSpans(workload, spans) {
  return Math.ceil(spans / (workload.options.queriesPerTrace + 1))
}

/**
 * Reproducible ids for BasicTracerProvider's `idGenerator` option (1.x and 2.x).
 * Ids depend on the seed and the call order only.
 */
class SeededIdGenerator {
  constructor(seed = 1) {
    this._rng = mulberry32(mixSeed(seed, 0x1d))
  }

  _hex(bytes) {
    let s = ''
    for (let i = 0; i < bytes; i += 4) s += ((this._rng() * 4294967296) >>> 0).toString(16).padStart(8, '0')
    s = s.slice(0, bytes * 2)
    return /^0+$/.test(s) ? '1'.padStart(bytes * 2, '0') : s // all-zero ids are invalid
  }

  generateTraceId() {
    return this._hex(16)
  }

  generateSpanId() {
    return this._hex(8)
  }
}

// ---------------------------------------------------------------------------
// Plain spans (no OpenTelemetry): for the Rust criterion benches
// ---------------------------------------------------------------------------

const hrTime = (ms) => [Math.floor(ms / 1000), Math.round((ms % 1000) * 1e6) % 1e9]

/**
 * The spans of traces startIndex…startIndex+traces-1 as plain records, in end order (children
 * first, root last), with the attributes emitTrace() gives them:
 * `{ traceId, spanId, parentSpanId, kind, statusCode, startTime, duration, name, scope, attributes }`
 * (OTel kind/status numbers, times as [seconds, nanos], ids from SeededIdGenerator(seed)).
 */
function plainSpans(workload, { traces = 1, startIndex = 0 } = {}) {
  const ids = new SeededIdGenerator(workload.options.seed)
  const out = []
  for (let i = 0; i < traces; i++) {
    const t = startIndex + i
    const { root, queries, durationsMs } = workload.traceAttributes(t)
    const traceId = ids.generateTraceId()
    const rootId = ids.generateSpanId()
    const t0 = BASE_TIME_MS + t * 100
    let at = t0 + 0.2
    for (let q = 0; q < queries.length; q++) {
      out.push({
        traceId, spanId: ids.generateSpanId(), parentSpanId: rootId, kind: 2, statusCode: 1,
        startTime: hrTime(at), duration: hrTime(durationsMs[q]), name: 'pg.query', scope: TUSK_TRACER_NAME,
        attributes: queries[q],
      })
      at += durationsMs[q] + 0.05
    }
    out.push({
      traceId, spanId: rootId, parentSpanId: '', kind: 1, statusCode: 1,
      startTime: hrTime(t0), duration: hrTime(at + 0.2 - t0), name: root['td.name'], scope: TUSK_TRACER_NAME,
      attributes: root,
    })
  }
  return out
}

module.exports = {
  TUSK_TRACER_NAME,
  DEFAULTS,
  COLUMNS,
  mulberry32,
  mixSeed,
  createWorkload,
  pgQueryAttributes,
  httpServerAttributes,
  responseBodyFor,
  startServerSpan,
  endServerSpan,
  emitQuerySpan,
  emitTrace,
  emitTraces,
  tracesForSpans,
  SeededIdGenerator,
  plainSpans,
}

// CLI: `node benches/lib/workload.js --dump [--rows=200] [--traces=1] [--seed=1] [--queries=20]`
// prints `{ options, spans: plainSpans(...) }` as JSON (the Rust criterion benches read it).
if (require.main === module) {
  const args = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, '').split('=')))
  if (!('dump' in args)) {
    console.error('usage: node benches/lib/workload.js --dump [--rows=200] [--traces=1] [--seed=1] [--queries=20]')
    process.exit(2)
  }
  const num = (k, d) => (args[k] === undefined ? d : Number(args[k]))
  const wl = createWorkload({ seed: num('seed', DEFAULTS.seed), rows: num('rows', DEFAULTS.rows), queriesPerTrace: num('queries', DEFAULTS.queriesPerTrace) })
  process.stdout.write(JSON.stringify({ options: wl.options, spans: plainSpans(wl, { traces: num('traces', 1) }) }))
}
