'use strict'
// Shared helpers for the offloop test suite: real OpenTelemetry SDKs (2.x and 1.x), Tusk span
// attributes, temporary recordings directories and readers for what the exporter writes.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const api = require('@opentelemetry/api')

const ROOT = path.resolve(__dirname, '..', '..')

function sdkVersion(pkg) {
  return require(path.join(ROOT, 'node_modules', pkg, 'package.json')).version
}

// Both SDK majors. 2.x takes processors only through `spanProcessors`; 1.x has
// `addSpanProcessor` throughout (1.30 also accepts `spanProcessors`), so 1.x uses the method
// every 1.x release has.
const SDKS = [
  { pkg: '@opentelemetry/sdk-trace-base', mod: require('@opentelemetry/sdk-trace-base') },
  { pkg: '@opentelemetry/sdk-trace-base-v1', mod: require('@opentelemetry/sdk-trace-base-v1') },
].map((s) => {
  const version = sdkVersion(s.pkg)
  return { ...s, version, major: Number(version.split('.')[0]), label: `sdk-trace-base ${version}` }
})

function makeProvider(sdk, processors) {
  if (sdk.major >= 2) return new sdk.mod.BasicTracerProvider({ spanProcessors: processors })
  const provider = new sdk.mod.BasicTracerProvider()
  if (typeof provider.addSpanProcessor === 'function') {
    for (const p of processors) provider.addSpanProcessor(p)
    return provider
  }
  return new sdk.mod.BasicTracerProvider({ spanProcessors: processors })
}

/** A fresh directory, removed when the test ends. */
function tmpDir(t, prefix = 'offloop-test-') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

const TRACE_FILE = /^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(-\d{1,9})?Z_trace_([0-9a-f]{32})\.(jsonl|pb)$/

/**
 * Every JSONL line in `dir`: [{ file, fileTraceId, line }]. Throws on a file name that is not
 * `<ISO>_trace_<traceId>.jsonl` or a line that does not parse.
 */
function readJsonl(dir) {
  const out = []
  for (const file of fs.readdirSync(dir).sort()) {
    const m = TRACE_FILE.exec(file)
    if (!m || m[3] !== 'jsonl') throw new Error(`unexpected file in recordings directory: ${file}`)
    const text = fs.readFileSync(path.join(dir, file), 'utf8')
    if (text.length > 0 && !text.endsWith('\n')) throw new Error(`${file} does not end with a newline`)
    const lines = text.split('\n')
    lines.pop()
    lines.forEach((l, i) => {
      let line
      try {
        line = JSON.parse(l)
      } catch (e) {
        throw new Error(`${file}:${i + 1} is not JSON: ${e.message}`)
      }
      out.push({ file, fileTraceId: m[2], line })
    })
  }
  return out
}

/** Number of JSONL lines in `dir` (0 if it does not exist). */
function countLines(dir) {
  if (!fs.existsSync(dir)) return 0
  let n = 0
  for (const file of fs.readdirSync(dir)) {
    if (!file.endsWith('.jsonl')) continue
    const text = fs.readFileSync(path.join(dir, file), 'utf8')
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) n++
  }
  return n
}

/** Reads one unsigned varint at `pos`: [value, nextPos]. */
function readVarint(buf, pos) {
  let value = 0
  let mul = 1
  for (let i = 0; i < 10; i++) {
    if (pos >= buf.length) throw new Error(`truncated varint at offset ${pos}`)
    const b = buf[pos++]
    value += (b & 0x7f) * mul
    if ((b & 0x80) === 0) return [value, pos]
    mul *= 128
  }
  throw new Error('varint longer than 10 bytes')
}

/** Splits a length-delimited (varint) stream into message buffers. */
function splitDelimited(buf) {
  const out = []
  let pos = 0
  while (pos < buf.length) {
    const [len, at] = readVarint(buf, pos)
    if (at + len > buf.length) throw new Error(`message at ${pos} claims ${len} bytes, ${buf.length - at} left`)
    out.push(buf.subarray(at, at + len))
    pos = at + len
  }
  return out
}

/** Every `.pb` file in `dir`: [{ file, fileTraceId, messages: Buffer[] }]. */
function readPbFiles(dir) {
  return fs
    .readdirSync(dir)
    .sort()
    .map((file) => {
      const m = TRACE_FILE.exec(file)
      if (!m || m[3] !== 'pb') throw new Error(`unexpected file in recordings directory: ${file}`)
      return { file, fileTraceId: m[2], messages: splitDelimited(fs.readFileSync(path.join(dir, file))) }
    })
}

// ---------------------------------------------------------------------------------------------
// Tusk span content

/** `n` pg result rows with 8 mixed columns (~185 B each as JSON). */
function pgRows(seed, n) {
  const rows = []
  for (let r = 0; r < n; r++) {
    const k = seed * 1000 + r
    rows.push({
      id: k,
      uuid: `${k.toString(16).padStart(8, '0')}-9b1e`,
      name: `User ${k} Ünï 名前`,
      email: `user${k}@example.com`,
      created_at: new Date(Date.UTC(2024, 0, 1) + k * 60000).toISOString(),
      is_active: k % 3 !== 0,
      balance: k % 7 === 0 ? null : Math.round(k * 13.37 * 100) / 100,
      tags: ['a', String(k % 11)],
    })
  }
  return rows
}

function pgOutput(seed, rowCount) {
  return {
    command: 'SELECT',
    rowCount,
    rows: pgRows(seed, rowCount),
  }
}

/** The Tusk attributes of a recorded pg query. */
function pgAttributes(i, { rows = 3 } = {}) {
  return {
    'td.name': `pg.query #${i}`,
    'td.packageName': 'pg',
    'td.packageType': 4,
    'td.instrumentationName': 'PgInstrumentation',
    'td.submodule': 'query',
    'td.inputValue': JSON.stringify({
      text: 'SELECT id, name, email FROM users WHERE id = $1 AND org = $2',
      values: [i, `org-${i % 5}`],
      clientType: 'pool',
    }),
    'td.outputValue': JSON.stringify(pgOutput(i, rows)),
    'td.inputSchemaMerges': JSON.stringify({ values: { matchImportance: 0 } }),
    'td.metadata': JSON.stringify({ connection: { host: 'db', port: 5432 }, seq: i }),
    'td.isPreAppStart': i % 4 === 0,
  }
}

const OTEL_KINDS = [0, 2, 3, 4] // child kinds: INTERNAL, CLIENT, PRODUCER, CONSUMER

/**
 * Creates `count` spans with `tracer`, in traces of `perTrace` spans (a SERVER root and
 * children of mixed kinds and statuses), each span getting `attrs(i)`. Returns the ended SDK
 * spans in creation order.
 */
function createSpans(tracer, count, attrs, { perTrace = 32 } = {}) {
  const spans = []
  let root
  let rootCtx
  for (let i = 0; i < count; i++) {
    const first = i % perTrace === 0
    if (first) {
      root = tracer.startSpan(`root ${i}`, { kind: api.SpanKind.SERVER }, api.ROOT_CONTEXT)
      root.setAttributes(attrs(i))
      root.setStatus({ code: api.SpanStatusCode.OK })
      rootCtx = api.trace.setSpan(api.ROOT_CONTEXT, root)
      spans.push(root)
    } else {
      const s = tracer.startSpan(`child ${i}`, { kind: OTEL_KINDS[i % OTEL_KINDS.length] }, rootCtx)
      s.setAttributes(attrs(i))
      if (i % 5 === 1) s.setStatus({ code: api.SpanStatusCode.OK })
      else if (i % 5 === 2) s.setStatus({ code: api.SpanStatusCode.ERROR, message: `failed ${i}` })
      s.end()
      spans.push(s)
    }
    const last = i === count - 1 || (i + 1) % perTrace === 0
    if (last) root.end() // the root ends after its children, like a real request
  }
  return spans
}

/** Ended ReadableSpans made by a real provider (captured with the SDK's InMemorySpanExporter). */
function makeReadableSpans(sdk, count, attrs, options) {
  const mem = new sdk.mod.InMemorySpanExporter()
  const provider = makeProvider(sdk, [new sdk.mod.SimpleSpanProcessor(mem)])
  createSpans(provider.getTracer('tusk-drift-sdk'), count, attrs, options)
  const spans = mem.getFinishedSpans().slice()
  mem.reset()
  return spans
}

function parentId(span) {
  if (span.parentSpanContext) return span.parentSpanContext.spanId
  return span.parentSpanId || ''
}

/** OffloopExporter.export as a promise of its ExportResult. */
function exportAsync(exporter, spans) {
  return new Promise((resolve) => exporter.export(spans, resolve))
}

module.exports = {
  ROOT,
  SDKS,
  makeProvider,
  tmpDir,
  readJsonl,
  countLines,
  readVarint,
  splitDelimited,
  readPbFiles,
  pgRows,
  pgOutput,
  pgAttributes,
  createSpans,
  makeReadableSpans,
  parentId,
  exportAsync,
}
