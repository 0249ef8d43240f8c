'use strict'
// OffloopExporter under real OpenTelemetry SDKs (2.x and 1.x), BatchSpanProcessor and
// SimpleSpanProcessor: JSONL lines, length-delimited protobuf files (decoded with the
// protobuf-ts code of @use-tusk/drift-schemas, not ours) and onBatch ExportSpansRequests.

const test = require('node:test')
const assert = require('node:assert/strict')

const { OffloopExporter } = require('..')
const { Span } = require('@use-tusk/drift-schemas/core/span')
const { Struct } = require('@use-tusk/drift-schemas/google/protobuf/struct')
const { ExportSpansRequest } = require('@use-tusk/drift-schemas/backend/span_export_service')
const { SDKS, makeProvider, tmpDir, readJsonl, readPbFiles, pgAttributes, createSpans, parentId } = require('./support/otel.js')

const SPANS = 512
const PER_TRACE = 32
const ENVIRONMENT = 'ci'
const HEX64 = /^[0-9a-f]{64}$/

const CLEAN_SPAN_KEYS = [
  'traceId', 'spanId', 'parentSpanId', 'name', 'packageName', 'instrumentationName', 'submoduleName',
  'packageType', 'environment', 'inputValue', 'outputValue', 'inputSchema', 'outputSchema',
  'inputSchemaHash', 'outputSchemaHash', 'inputValueHash', 'outputValueHash', 'kind', 'status',
  'isPreAppStart', 'timestamp', 'duration', 'isRootSpan', 'metadata',
].sort()

const HASH_KEYS = ['inputSchemaHash', 'outputSchemaHash', 'inputValueHash', 'outputValueHash']

// OTel SpanStatusCode → proto StatusCode, as the reference maps it: only OK stays OK.
const protoStatus = (otelCode) => (otelCode === 1 ? 1 : 2)

function assertStats(exporter, label) {
  const s = exporter.stats()
  assert.equal(s.spansInFlight, 0, `${label}: spansInFlight after flush`)
  assert.equal(s.spansReceived, s.spansWritten + s.spansDropped + s.spansFailed, `${label}: received = written + dropped + failed (${JSON.stringify(s)})`)
  assert.equal(s.spansReceived, SPANS, `${label}: spansReceived`)
  assert.equal(s.spansWritten, SPANS, `${label}: spansWritten (${JSON.stringify(s)})`)
}

for (const sdk of SDKS) {
  for (const processorName of ['BatchSpanProcessor', 'SimpleSpanProcessor']) {
    test(`${sdk.label} ${processorName}: ${SPANS} Tusk pg spans → JSONL, proto files and onBatch requests`, async (t) => {
      const jsonlDir = tmpDir(t)
      const protoDir = tmpDir(t)
      const requests = []
      const jsonlExporter = new OffloopExporter({ directory: jsonlDir, environment: ENVIRONMENT })
      const protoExporter = new OffloopExporter({ directory: protoDir, format: 'proto', environment: ENVIRONMENT })
      const batchExporter = new OffloopExporter({
        environment: ENVIRONMENT,
        serviceId: 'svc-offloop-test',
        sdkInstanceId: 'instance-1',
        onBatch: (buf) => {
          assert.ok(Buffer.isBuffer(buf), 'onBatch receives a Buffer')
          requests.push(ExportSpansRequest.fromBinary(buf))
        },
      })
      const exporters = [jsonlExporter, protoExporter, batchExporter]
      const processors = exporters.map((e) => new sdk.mod[processorName](e))
      const provider = makeProvider(sdk, processors)
      t.after(() => provider.shutdown())

      const spans = createSpans(provider.getTracer('tusk-drift-sdk'), SPANS, (i) => pgAttributes(i), { perTrace: PER_TRACE })
      assert.equal(spans.length, SPANS)
      await provider.forceFlush()
      for (const e of exporters) await e.forceFlush()

      const bySpanId = new Map(spans.map((s) => [s.spanContext().spanId, s]))
      assert.equal(bySpanId.size, SPANS, 'SDK span ids are unique')
      const traceIds = new Set(spans.map((s) => s.spanContext().traceId))

      // ---- JSONL -------------------------------------------------------------------------
      const entries = readJsonl(jsonlDir)
      assert.equal(entries.length, SPANS, 'JSONL lines across all trace files')
      const files = new Set(entries.map((e) => e.file))
      assert.equal(files.size, traceIds.size, 'one file per trace')
      const lineBySpanId = new Map()
      for (const { file, fileTraceId, line } of entries) {
        assert.deepEqual(Object.keys(line).sort(), CLEAN_SPAN_KEYS, `CleanSpanData keys of ${line.spanId}`)
        const span = bySpanId.get(line.spanId)
        assert.ok(span, `line spanId ${line.spanId} is an SDK span id`)
        assert.ok(!lineBySpanId.has(line.spanId), `span ${line.spanId} written once`)
        lineBySpanId.set(line.spanId, line)
        const attrs = span.attributes
        assert.equal(line.traceId, span.spanContext().traceId)
        assert.equal(fileTraceId, line.traceId, `${file} holds only its trace`)
        assert.equal(line.parentSpanId, parentId(span))
        assert.equal(line.name, attrs['td.name'])
        assert.equal(line.packageName, 'pg')
        assert.equal(line.packageType, 4)
        assert.equal(line.instrumentationName, 'PgInstrumentation')
        assert.equal(line.submoduleName, 'query')
        assert.equal(line.environment, ENVIRONMENT)
        assert.deepEqual(line.inputValue, JSON.parse(attrs['td.inputValue']))
        assert.deepEqual(line.outputValue, JSON.parse(attrs['td.outputValue']))
        assert.deepEqual(line.metadata, JSON.parse(attrs['td.metadata']))
        assert.equal(line.inputSchema.type, 6)
        assert.equal(line.inputSchema.properties.values.matchImportance, 0, 'td.inputSchemaMerges applied')
        assert.equal(line.outputSchema.type, 6)
        for (const k of HASH_KEYS) assert.match(line[k], HEX64, k)
        assert.equal(line.kind, span.kind + 1, 'kind is the proto SpanKind (OTel + 1)')
        assert.deepEqual(line.status, { code: protoStatus(span.status.code), message: span.status.message || '' })
        assert.equal(line.isPreAppStart, attrs['td.isPreAppStart'])
        assert.equal(line.isRootSpan, span.kind === 1)
        assert.deepEqual(line.timestamp, { seconds: span.startTime[0], nanos: span.startTime[1] })
        assert.deepEqual(line.duration, { seconds: span.duration[0], nanos: span.duration[1] })
      }
      assert.equal(lineBySpanId.size, SPANS)

      // ---- proto files, decoded with @use-tusk/drift-schemas --------------------------------
      const pbFiles = readPbFiles(protoDir)
      assert.equal(pbFiles.length, traceIds.size, 'one .pb file per trace')
      let decoded = 0
      for (const { file, fileTraceId, messages } of pbFiles) {
        for (const bytes of messages) {
          const m = Span.fromBinary(bytes)
          decoded++
          const line = lineBySpanId.get(m.spanId)
          assert.ok(line, `${file}: proto span ${m.spanId} is one of the recorded spans`)
          const span = bySpanId.get(m.spanId)
          assert.equal(m.traceId, fileTraceId)
          assert.equal(m.traceId, line.traceId)
          assert.equal(m.parentSpanId, line.parentSpanId)
          assert.equal(m.name, line.name)
          assert.equal(m.packageName, 'pg')
          assert.equal(m.packageType, 4)
          assert.equal(m.submoduleName, 'query')
          assert.equal(m.environment, ENVIRONMENT)
          for (const k of HASH_KEYS) assert.equal(m[k], line[k], `proto ${k} equals the JSONL one`)
          assert.equal(m.kind, span.kind + 1)
          assert.equal(m.status.code, protoStatus(span.status.code))
          assert.equal(m.isPreAppStart, span.attributes['td.isPreAppStart'])
          assert.equal(m.isRootSpan, span.kind === 1)
          assert.equal(m.timestamp.seconds, BigInt(span.startTime[0]))
          assert.equal(m.timestamp.nanos, span.startTime[1])
          assert.deepEqual(Struct.toJson(m.inputValue), JSON.parse(span.attributes['td.inputValue']), 'input_value Struct')
          assert.deepEqual(Struct.toJson(m.outputValue), JSON.parse(span.attributes['td.outputValue']), 'output_value Struct')
          assert.deepEqual(Struct.toJson(m.metadata), JSON.parse(span.attributes['td.metadata']), 'metadata Struct')
          assert.deepEqual(JSON.parse(JSON.stringify(m.inputSchema)), line.inputSchema, 'input_schema equals the JSONL inputSchema')
          assert.deepEqual(JSON.parse(JSON.stringify(m.outputSchema)), line.outputSchema, 'output_schema equals the JSONL outputSchema')
        }
      }
      assert.equal(decoded, SPANS, 'length-delimited Span messages across the .pb files')

      // ---- onBatch ExportSpansRequest ------------------------------------------------------
      assert.ok(requests.length >= 1, 'onBatch was called')
      const requested = new Map()
      for (const req of requests) {
        assert.equal(req.observableServiceId, 'svc-offloop-test')
        assert.equal(req.environment, ENVIRONMENT)
        assert.equal(req.sdkInstanceId, 'instance-1')
        assert.match(req.sdkVersion, /^offloop\//)
        for (const s of req.spans) {
          assert.ok(!requested.has(s.spanId), `span ${s.spanId} delivered once`)
          requested.set(s.spanId, s)
        }
      }
      assert.equal(requested.size, SPANS, 'spans across the ExportSpansRequests')
      for (const [spanId, s] of requested) {
        const line = lineBySpanId.get(spanId)
        assert.ok(line, `request span ${spanId} is one of the recorded spans`)
        assert.equal(s.traceId, line.traceId)
        for (const k of HASH_KEYS) assert.equal(s[k], line[k], `request ${k} equals the JSONL one`)
        assert.deepEqual(Struct.toJson(s.inputValue), line.inputValue)
      }

      assertStats(jsonlExporter, 'jsonl exporter')
      assertStats(protoExporter, 'proto exporter')
      assertStats(batchExporter, 'onBatch exporter')
    })
  }
}
