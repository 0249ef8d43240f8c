'use strict'
// The contenders of the Node benchmarks: what users run today, and offloop.
//
// Each contender: { name, describe, family, otel: 'v1'|'v2', kind: 'exporter'|'processor',
//                   create({ dir, sinkUrl }) -> instance }
//   exporter instance:  { export(spans, cb), shutdown(), result() }
//   processor instance: { onStart(), onEnd(span), forceFlush(), shutdown(), result() }
//   result() -> Promise<{ written, failed, workers, bytesOut, errors[] }> (after shutdown)
// `otel` is the sdk-trace-base major the benchmark makes spans with (Tusk's SDK ran on 1.x;
// its exporters also accept 2.x spans through tuskView()).

const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..', '..')
const TUSK_TRACER_NAME = 'tusk-drift-sdk'

const CONTENDERS = {
  'offloop-blake3': {
    describe: 'OffloopExporter (hashAlgorithm blake3), JSONL files',
    family: 'offloop',
    otel: 'v2',
    kind: 'exporter',
    create: ({ dir }) => offloopExporter(dir, 'blake3'),
  },
  'offloop-sha256': {
    describe: 'OffloopExporter (hashAlgorithm sha256: Tusk-compatible hashes), JSONL files',
    family: 'offloop',
    otel: 'v2',
    kind: 'exporter',
    create: ({ dir }) => offloopExporter(dir, 'sha256'),
  },
  'offloop-processor': {
    describe: 'OffloopSpanProcessor (blake3; batching in native code), JSONL files',
    family: 'offloop',
    otel: 'v2',
    kind: 'processor',
    create: ({ dir }) => offloopProcessor(dir),
  },
  'otlp-http-json': {
    describe: '@opentelemetry/exporter-trace-otlp-http (OTLP/HTTP JSON) to a sink on 127.0.0.1',
    family: 'otlp',
    otel: 'v2',
    kind: 'exporter',
    create: ({ sinkUrl }) => otlpExporter('@opentelemetry/exporter-trace-otlp-http', sinkUrl),
  },
  'otlp-http-proto': {
    describe: '@opentelemetry/exporter-trace-otlp-proto (OTLP/HTTP protobuf) to a sink on 127.0.0.1',
    family: 'otlp',
    otel: 'v2',
    kind: 'exporter',
    create: ({ sinkUrl }) => otlpExporter('@opentelemetry/exporter-trace-otlp-proto', sinkUrl),
  },
  'tusk-js-0.1.27': {
    describe: 'Tusk Drift JS SDK 0.1.27 as installed: SpanTransformer on all spans, then appendFileSync per span',
    family: 'tusk',
    otel: 'v1',
    kind: 'exporter',
    create: ({ dir }) => tuskExporter(dir, { transform: 'js', chunked: false }),
  },
  'tusk-js-chunked': {
    describe: 'Tusk JS after the incident fix (v0.1.43): SpanTransformer in chunks of 20 + setImmediate, async appendFile per trace',
    family: 'tusk',
    otel: 'v1',
    kind: 'exporter',
    create: ({ dir }) => tuskExporter(dir, { transform: 'js', chunked: true }),
  },
  'tusk-core-0.1.8': {
    describe: '@use-tusk/drift-core-node per span as the Tusk SDK (>= 0.1.43) calls it: 2x processExportPayload + buildSpanProtoBytes, chunks of 20, async appendFile per trace',
    family: 'tusk',
    otel: 'v1',
    kind: 'exporter',
    create: ({ dir }) => tuskExporter(dir, { transform: 'core', chunked: true }),
  },
}

// ---------------------------------------------------------------------------
// offloop
// ---------------------------------------------------------------------------

function offloopExporter(dir, hashAlgorithm) {
  const { OffloopExporter } = require(ROOT)
  const errors = []
  const exporter = new OffloopExporter({
    directory: dir,
    hashAlgorithm,
    onReport: (r) => {
      if (r.failed || r.dropped || r.rejected) {
        errors.push(r.rejected || `${r.failed} failed, ${r.dropped} dropped: ${r.errors.slice(0, 2).map((e) => e.message).join('; ')}`)
      }
    },
  })
  return {
    export: (spans, cb) => exporter.export(spans, cb),
    shutdown: () => exporter.shutdown(),
    stats: () => exporter.stats(),
    result: async () => offloopResult(exporter.stats(), dir, errors),
  }
}

function offloopProcessor(dir, options = {}) {
  const { OffloopSpanProcessor } = require(ROOT)
  const processor = new OffloopSpanProcessor({ directory: dir, hashAlgorithm: 'blake3', ...options })
  return {
    onStart: () => {},
    onEnd: (span) => processor.onEnd(span),
    forceFlush: () => processor.forceFlush(),
    shutdown: () => processor.shutdown(),
    stats: () => processor.stats(),
    processor,
    result: async () => offloopResult(processor.stats(), dir, []),
  }
}

function offloopResult(s, dir, errors) {
  return {
    written: s.spansWritten,
    failed: s.spansFailed,
    dropped: s.spansDropped,
    workers: s.workers,
    bytesOut: dirBytes(dir),
    errors,
  }
}

// ---------------------------------------------------------------------------
// OpenTelemetry OTLP/HTTP exporters, to the local sink (lib/sink-server.js)
// ---------------------------------------------------------------------------

function otlpExporter(pkg, sinkUrl) {
  if (!sinkUrl) throw new Error(`${pkg}: no sink URL`)
  const { OTLPTraceExporter } = require(pkg)
  const exporter = new OTLPTraceExporter({ url: `${sinkUrl}/v1/traces`, timeoutMillis: 120_000 })
  let written = 0
  let failed = 0
  const errors = []
  let before
  const ready = sinkStats(sinkUrl).then((s) => (before = s))
  return {
    export: (spans, cb) =>
      exporter.export(spans, (result) => {
        if (result.code === 0) written += spans.length
        else {
          failed += spans.length
          errors.push(result.error ? result.error.message : 'FAILED')
        }
        cb(result)
      }),
    shutdown: () => exporter.shutdown(),
    result: async () => {
      await ready
      const after = await sinkStats(sinkUrl)
      return { written, failed, workers: 0, bytesOut: after.bytes - before.bytes, errors }
    },
  }
}

function sinkStats(sinkUrl) {
  return new Promise((resolve, reject) => {
    http
      .get(`${sinkUrl}/stats`, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c) => (body += c))
        res.on('end', () => resolve(JSON.parse(body)))
      })
      .on('error', reject)
  })
}

// ---------------------------------------------------------------------------
// Tusk Drift export paths (tusk-drift-spec.md §2.2, §2.3, §2.5–2.7, §3.1)
// ---------------------------------------------------------------------------

/** A 1.x-shaped view of a 2.x ReadableSpan (Tusk's SDK reads instrumentationLibrary, parentSpanId). */
function tuskView(span) {
  if (span.instrumentationLibrary) return span
  return {
    name: span.name,
    kind: span.kind,
    attributes: span.attributes,
    spanContext: () => span.spanContext(),
    parentSpanId: span.parentSpanContext ? span.parentSpanContext.spanId : undefined,
    instrumentationLibrary: span.instrumentationScope,
    status: span.status,
    startTime: span.startTime,
    duration: span.duration,
  }
}

/**
 * The Tusk export path around a transform. The SDK does not export its TdSpanExporter or
 * adapters, so their logic is re-created here from the spec; the transforms are the real code:
 *   transform 'js':   SpanTransformer.transformSpanToCleanJSON of the installed
 *                     @use-tusk/drift-node-sdk (0.1.27, pure JS), via __test__/support/tusk-reference.js
 *   transform 'core': @use-tusk/drift-core-node called per span as SDK >= 0.1.31 does (coreTransform)
 *   chunked=false: TdSpanExporter.export + FilesystemSpanAdapter of 0.1.27 (synchronous map over
 *     the transform, then fs.appendFileSync per span, OTel kind in the line).
 *   chunked=true: the v0.1.43 fix (ae6054d): transform in chunks of 20 with `await setImmediate`
 *     in between; one fs/promises.appendFile per trace file, lines joined, proto kind.
 */
function tuskExporter(dir, { transform, chunked }) {
  let toClean
  if (transform === 'js') {
    const { loadTuskJs, tuskJsUnavailableReason } = require(path.join(ROOT, '__test__', 'support', 'tusk-reference.js'))
    const tusk = loadTuskJs()
    if (!tusk) throw new Error(`Tusk JS SDK unavailable: ${tuskJsUnavailableReason()}`)
    toClean = (s) => tusk.SpanTransformer.transformSpanToCleanJSON(s, undefined)
  } else {
    const core = require('@use-tusk/drift-core-node')
    toClean = (s) => coreTransform(core, s, undefined)
  }
  const MAX_SPAN_BYTES = 1024 * 1024
  const blocked = new Set()
  const traceFiles = new Map()
  fs.mkdirSync(dir, { recursive: true })
  let written = 0

  const fileFor = (traceId) => {
    let file = traceFiles.get(traceId)
    if (!file) {
      file = path.join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}_trace_${traceId}.jsonl`)
      traceFiles.set(traceId, file)
    }
    return file
  }

  // TdSpanExporter.export: keep Tusk's spans, then one order-dependent filter pass.
  const filter = (spans) =>
    spans
      .map(tuskView)
      .filter((s) => s.instrumentationLibrary.name === TUSK_TRACER_NAME)
      .filter((s) => {
        const traceId = s.spanContext().traceId
        if (blocked.has(traceId)) return false
        if (s.kind === 1 /* SERVER */ && s.status.code === 2 /* ERROR */) {
          blocked.add(traceId)
          return false
        }
        const size =
          Buffer.byteLength(s.attributes['td.inputValue'] || '', 'utf8') +
          Buffer.byteLength(s.attributes['td.outputValue'] || '', 'utf8') +
          50000
        if (size > MAX_SPAN_BYTES) {
          blocked.add(traceId)
          return false
        }
        return true
      })

  function exportSync(spans, cb) {
    let clean
    try {
      clean = filter(spans).map(toClean)
    } catch (error) {
      cb({ code: 1, error })
      return
    }
    // FilesystemSpanAdapter.exportSpans (0.1.27) is an async function without awaits: all synchronous.
    const adapter = async () => {
      for (const span of clean) {
        fs.appendFileSync(fileFor(span.traceId), JSON.stringify(span) + '\n', 'utf8')
        written++
      }
    }
    adapter().then(() => cb({ code: 0 }), (error) => cb({ code: 1, error }))
  }

  async function exportChunked(spans) {
    const kept = filter(spans)
    const clean = []
    for (let i = 0; i < kept.length; i += 20) {
      for (const s of kept.slice(i, i + 20)) clean.push(toClean(s))
      if (i + 20 < kept.length) await new Promise((resolve) => setImmediate(resolve))
    }
    const byFile = new Map()
    for (const span of clean) {
      const file = fileFor(span.traceId)
      if (!byFile.has(file)) byFile.set(file, [])
      // The adapter does not strip protoSpanBytes (spec §3.1): with the Rust core it lands in
      // the line as {"type":"Buffer","data":[…]}.
      byFile.get(file).push(JSON.stringify({ ...span, kind: span.kind + 1 })) // OTel -> proto SpanKind
    }
    for (const [file, lines] of byFile) {
      await fs.promises.appendFile(file, lines.join('\n') + '\n', 'utf8')
      written += lines.length
    }
  }

  return {
    export: chunked
      ? (spans, cb) => exportChunked(spans).then(() => cb({ code: 0 }), (error) => cb({ code: 1, error }))
      : exportSync,
    shutdown: async () => {},
    result: async () => ({ written, failed: 0, workers: 0, bytesOut: dirBytes(dir), errors: [] }),
  }
}

// SpanTransformer.transformSpanToCleanJSON with the Rust core loaded (spec §2.3, §2.5, §2.7):
// per payload JSON.parse(attribute) -> JSON.stringify -> processExportPayload (merge keys
// snake_cased) -> JSON.parse(normalizedJson, decodedSchemaJson) with schema keys camelCased;
// then buildSpanProtoBytes with everything stringified again (schema keys snake_cased).
function coreTransform(core, span, environment) {
  const a = span.attributes
  const input = corePayload(core, JSON.parse(a['td.inputValue']), a['td.inputSchemaMerges'] ? JSON.parse(a['td.inputSchemaMerges']) : undefined)
  const output = a['td.outputValue']
    ? corePayload(core, JSON.parse(a['td.outputValue']), a['td.outputSchemaMerges'] ? JSON.parse(a['td.outputSchemaMerges']) : undefined)
    : corePayload(core, {}, undefined)
  const metadata = a['td.metadata'] ? JSON.parse(a['td.metadata']) : undefined
  const ctx = span.spanContext()
  const clean = {
    traceId: ctx.traceId,
    spanId: ctx.spanId,
    parentSpanId: span.parentSpanId || '',
    name: a['td.name'],
    packageName: a['td.packageName'] || 'unknown',
    instrumentationName: a['td.instrumentationName'] || `tusk-instrumentation-${span.instrumentationLibrary.name}`,
    submoduleName: a['td.submodule'] || '',
    packageType: a['td.packageType'] || undefined,
    environment,
    inputValue: input.value,
    outputValue: output.value,
    inputSchema: input.schema,
    outputSchema: output.schema,
    inputSchemaHash: input.schemaHash,
    outputSchemaHash: output.schemaHash,
    inputValueHash: input.valueHash,
    outputValueHash: output.valueHash,
    kind: span.kind,
    status: { code: span.status.code === 1 ? 1 : 2, message: span.status.message || '' },
    isPreAppStart: a['td.isPreAppStart'] === true,
    timestamp: { seconds: span.startTime[0], nanos: span.startTime[1] },
    duration: { seconds: span.duration[0], nanos: span.duration[1] },
    isRootSpan: span.kind === 1,
    metadata,
  }
  clean.protoSpanBytes = core.buildSpanProtoBytes({
    traceId: clean.traceId,
    spanId: clean.spanId,
    parentSpanId: clean.parentSpanId,
    name: clean.name || '',
    packageName: clean.packageName,
    instrumentationName: clean.instrumentationName,
    submoduleName: clean.submoduleName,
    packageType: clean.packageType || 0,
    environment,
    kind: span.kind + 1,
    inputSchemaJson: JSON.stringify(snakeSchema(input.schema)),
    outputSchemaJson: JSON.stringify(snakeSchema(output.schema)),
    inputSchemaHash: input.schemaHash,
    outputSchemaHash: output.schemaHash,
    inputValueHash: input.valueHash,
    outputValueHash: output.valueHash,
    statusCode: clean.status.code,
    statusMessage: clean.status.message,
    isPreAppStart: clean.isPreAppStart,
    isRootSpan: clean.isRootSpan,
    timestampSeconds: clean.timestamp.seconds,
    timestampNanos: clean.timestamp.nanos,
    durationSeconds: clean.duration.seconds,
    durationNanos: clean.duration.nanos,
    metadataJson: metadata === undefined ? undefined : JSON.stringify(metadata),
    inputValueJson: JSON.stringify(input.value),
    outputValueJson: JSON.stringify(output.value),
  })
  return clean
}

const SNAKE = { decodedType: 'decoded_type', matchImportance: 'match_importance' }
const CAMEL = { decoded_type: 'decodedType', match_importance: 'matchImportance' }

function corePayload(core, data, merges) {
  let mergesJson
  if (merges) {
    const snake = {}
    for (const [k, m] of Object.entries(merges)) snake[k] = renameKeys(m, SNAKE)
    mergesJson = JSON.stringify(snake)
  }
  const r = core.processExportPayload(JSON.stringify(data), mergesJson)
  return {
    value: JSON.parse(r.normalizedJson),
    schema: mapSchema(JSON.parse(r.decodedSchemaJson), CAMEL),
    valueHash: r.decodedValueHash,
    schemaHash: r.decodedSchemaHash,
  }
}

const snakeSchema = (schema) => mapSchema(schema, SNAKE)

function renameKeys(obj, names) {
  const out = {}
  for (const [k, v] of Object.entries(obj)) out[names[k] || k] = v
  return out
}

function mapSchema(schema, names) {
  if (!schema || typeof schema !== 'object') return schema
  const out = renameKeys(schema, names)
  if (schema.properties) {
    out.properties = {}
    for (const [k, v] of Object.entries(schema.properties)) out.properties[k] = mapSchema(v, names)
  }
  if (schema.items) out.items = mapSchema(schema.items, names)
  return out
}

// ---------------------------------------------------------------------------

function dirBytes(dir) {
  if (!fs.existsSync(dir)) return 0
  let n = 0
  for (const f of fs.readdirSync(dir)) n += fs.statSync(path.join(dir, f)).size
  return n
}

/** `sdk-trace-base` of the given major. */
function otelSdk(otel) {
  return otel === 'v1' ? require('@opentelemetry/sdk-trace-base-v1') : require('@opentelemetry/sdk-trace-base')
}

module.exports = { CONTENDERS, TUSK_TRACER_NAME, tuskView, offloopProcessor, otelSdk, dirBytes }
