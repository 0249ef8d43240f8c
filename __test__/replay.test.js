'use strict'
// Replay: recordings written by the real exporter (and by the real Tusk JS SpanTransformer)
// are loaded by Recording and every outbound call is answered from them, hashed by the same
// native code that recorded it.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Worker } = require('node:worker_threads')

const { OffloopExporter, Recording, hashPayload } = require('..')
const ref = require('./support/tusk-reference.js')
const { contentAttributes } = require('./support/record-run.js')
const { ROOT, SDKS, makeProvider, tmpDir, readJsonl, createSpans, makeReadableSpans } = require('./support/otel.js')

const ALGOS = ['blake3', 'sha256']
const PROPERTY_COUNT = 2500

/** Records `content[i]` as span i through OffloopExporter under a real BatchSpanProcessor. */
async function record(t, content, { format = 'jsonl', hashAlgorithm = 'blake3', perTrace = 16, dir = tmpDir(t) } = {}) {
  const sdk = SDKS[0]
  const exporter = new OffloopExporter({ directory: dir, format, hashAlgorithm })
  const processor = new sdk.mod.BatchSpanProcessor(exporter, { maxQueueSize: 100_000, maxExportBatchSize: 512 })
  const provider = makeProvider(sdk, [processor])
  const spans = createSpans(provider.getTracer('tusk-drift-sdk'), content.length, (i) => content[i], { perTrace })
  await provider.forceFlush()
  await provider.shutdown()
  const stats = exporter.stats()
  assert.equal(stats.spansWritten, content.length, `every span recorded: ${JSON.stringify(stats)}`)
  return { dir, spans }
}

/** The replay request an instrumentation would make for a recorded span. */
function requestFor(span) {
  const a = span.attributes
  return {
    traceId: span.spanContext().traceId,
    name: a['td.name'],
    packageName: a['td.packageName'],
    inputValue: a['td.inputValue'],
    inputSchemaMerges: a['td.inputSchemaMerges'],
    isPreAppStart: a['td.isPreAppStart'] === true,
  }
}

/** (trace, value hash) pairs recorded more than once: any of those spans is a right answer. */
function duplicates(spans) {
  const seen = new Map()
  for (const s of spans) {
    const a = s.attributes
    const key = `${s.spanContext().traceId}/${hashPayload(a['td.inputValue'], { schemaMerges: a['td.inputSchemaMerges'] }).valueHash}`
    seen.set(key, (seen.get(key) || 0) + 1)
  }
  return (s) => {
    const a = s.attributes
    return seen.get(`${s.spanContext().traceId}/${hashPayload(a['td.inputValue'], { schemaMerges: a['td.inputSchemaMerges'] }).valueHash}`) > 1
  }
}

function assertAllMatchByValueHash(rec, spans) {
  const dup = duplicates(spans)
  const failures = []
  for (const span of spans) {
    const r = rec.findMock(requestFor(span))
    if (!r.found) failures.push(`${span.spanContext().spanId}: ${r.reason}`)
    else if (r.priority !== 1 || r.matchType !== 'INPUT_VALUE_HASH' || r.matchScope !== 'TRACE') failures.push(`${span.spanContext().spanId}: ${r.description}`)
    else if (!dup(span)) {
      if (r.spanId !== span.spanContext().spanId) failures.push(`${span.spanContext().spanId}: got ${r.spanId}`)
      const out = span.attributes['td.outputValue']
      assert.deepStrictEqual(r.outputValue, out ? JSON.parse(out) : {})
    }
  }
  assert.deepEqual(failures, [])
}

for (const format of ['jsonl', 'proto']) {
  for (const hashAlgorithm of ALGOS) {
    test(`record → replay (${format}, ${hashAlgorithm}): every call matches at the value-hash level`, async (t) => {
      const content = contentAttributes()
      const { dir, spans } = await record(t, content, { format, hashAlgorithm })
      const rec = await Recording.open(dir, { hashAlgorithm })
      const st = rec.stats()
      assert.equal(st.spans, content.length)
      assert.equal(st.skippedLines, 0)
      assert.equal(st.hashAlgorithm, hashAlgorithm)
      assertAllMatchByValueHash(rec, spans)
      assert.equal(rec.stats().matchesByType.INPUT_VALUE_HASH, content.length)
      assert.equal(rec.stats().matchesByPriority[1], content.length)
      // The other digest works too: hashes are recomputed at load, not read from the files.
      const other = await Recording.open(dir, { hashAlgorithm: ALGOS.find((a) => a !== hashAlgorithm) })
      assertAllMatchByValueHash(other, spans)
    })
  }
}

for (const hashAlgorithm of ALGOS) {
  test(`record-time hashes equal replay-time hashes on ${PROPERTY_COUNT} generated payloads (${hashAlgorithm})`, async (t) => {
    const rng = ref.mulberry32(hashAlgorithm === 'sha256' ? 97 : 98)
    const content = []
    let withMerges = 0
    for (let i = 0; i < PROPERTY_COUNT; i++) {
      const { value, merges } = ref.genMerges(rng, ref.genPayload(rng))
      const attrs = { 'td.name': `gen ${i}`, 'td.packageName': 'http', 'td.inputValue': JSON.stringify(value), 'td.outputValue': JSON.stringify({ i }) }
      if (merges) {
        attrs['td.inputSchemaMerges'] = JSON.stringify(merges)
        withMerges++
      }
      content.push(attrs)
    }
    assert.ok(withMerges > PROPERTY_COUNT / 2)
    const { dir, spans } = await record(t, content, { hashAlgorithm, perTrace: 50 })
    const lines = new Map(readJsonl(dir).map(({ line }) => [line.spanId, line]))
    const rec = await Recording.open(dir, { hashAlgorithm })
    assert.equal(rec.stats().spans, PROPERTY_COUNT)
    const failures = []
    for (const span of spans) {
      const { traceId, spanId } = span.spanContext()
      const line = lines.get(spanId)
      const req = requestFor(span)
      // The request as an object (the shim stringifies it) must hash like the recorded text.
      req.inputValue = JSON.parse(req.inputValue)
      const r = rec.findMock(req)
      const hp = hashPayload(span.attributes['td.inputValue'], { hashAlgorithm, schemaMerges: span.attributes['td.inputSchemaMerges'] })
      const loaded = rec.describeSpan(traceId, spanId)
      const problems = []
      if (r.requestHashes.valueHash !== line.inputValueHash) problems.push('findMock value hash')
      // A value-level match never walks the request's schema; a miss reports both hashes.
      if ('schemaHash' in r.requestHashes) problems.push('findMock walked the schema for a value-level match')
      const missed = rec.findMock({ ...req, traceId: 'not-a-recorded-trace' })
      if (missed.found) problems.push('a request of an unknown trace matched')
      if (missed.requestHashes.valueHash !== line.inputValueHash) problems.push('findMock (miss) value hash')
      if (missed.requestHashes.schemaHash !== line.inputSchemaHash) problems.push('findMock (miss) schema hash')
      if (hp.valueHash !== line.inputValueHash || hp.schemaHash !== line.inputSchemaHash) problems.push('hashPayload')
      if (loaded.inputValueHash !== line.inputValueHash) problems.push('value hash recomputed at load')
      if (loaded.inputSchemaHash !== line.inputSchemaHash) problems.push('schema hash recomputed at load (merges recovered from the schema)')
      if (!r.found || r.matchType !== 'INPUT_VALUE_HASH' || r.matchScope !== 'TRACE') problems.push(`match: ${r.description || r.reason}`)
      if (problems.length) failures.push(`${spanId}: ${problems.join(', ')}\n  value=${span.attributes['td.inputValue'].slice(0, 200)}\n  merges=${span.attributes['td.inputSchemaMerges']}`)
    }
    assert.equal(failures.length, 0, failures.slice(0, 10).join('\n'))
  })
}

test('Tusk JS recordings (SpanTransformer + FilesystemSpanAdapter layout) load and match', async (t) => {
  const js = ref.loadTuskJs()
  if (!js) return t.skip(`Tusk JS reference unavailable: ${ref.tuskJsUnavailableReason()}`)
  const content = contentAttributes()
  const spans = makeReadableSpans(SDKS[1], content.length, (i) => content[i], { perTrace: 12 })
  const dir = tmpDir(t)
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  for (const span of spans) {
    // What FilesystemSpanAdapter.exportSpans appends, one line per span.
    const clean = js.SpanTransformer.transformSpanToCleanJSON(span)
    fs.appendFileSync(path.join(dir, `${stamp}_trace_${clean.traceId}.jsonl`), JSON.stringify(clean) + '\n', 'utf8')
  }
  const sha = await Recording.open(dir, { hashAlgorithm: 'sha256' })
  assert.equal(sha.stats().spans, spans.length)
  for (const span of spans) {
    const info = sha.describeSpan(span.spanContext().traceId, span.spanContext().spanId)
    assert.equal(info.inputValueHash, info.storedInputValueHash, `${info.spanId} value hash`)
    assert.equal(info.inputSchemaHash, info.storedInputSchemaHash, `${info.spanId} schema hash`)
  }
  assertAllMatchByValueHash(sha, spans)
  assertAllMatchByValueHash(await Recording.open(dir), spans)
})

/** pg-style content: the same query shape with different texts and parameters. */
function pgContent(n, { text = (i) => `SELECT * FROM users WHERE id = $1 /* ${i} */`, values = (i) => [i] } = {}) {
  return Array.from({ length: n }, (_, i) => ({
    'td.name': 'pg.query',
    'td.packageName': 'pg',
    'td.submodule': 'query',
    'td.inputValue': JSON.stringify({ text: text(i), values: values(i) }),
    'td.inputSchemaMerges': JSON.stringify({ values: { matchImportance: 0 } }),
    'td.outputValue': JSON.stringify({ rows: [{ id: i }] }),
  }))
}

test('cascade: reduced value hash in findMock, schema levels with similarity only in findMockAsync', async (t) => {
  const { dir, spans } = await record(t, pgContent(6), { perTrace: 6 })
  const rec = await Recording.open(dir)
  const traceId = spans[0].spanContext().traceId
  const merges = { values: { matchImportance: 0 } }
  // Other parameters: same reduced value (values has matchImportance 0).
  const r3 = rec.findMock({ traceId, packageName: 'pg', inputValue: { text: 'SELECT * FROM users WHERE id = $1 /* 3 */', values: [42] }, inputSchemaMerges: merges })
  assert.equal(r3.found, true)
  assert.equal(r3.priority, 3)
  assert.equal(r3.matchType, 'INPUT_VALUE_HASH_REDUCED_SCHEMA')
  assert.equal(r3.matchTypeCode, 2)
  assert.equal(r3.matchScope, 'TRACE')
  assert.equal(r3.reused, false)
  assert.equal(r3.description, 'Unused span by input value hash with reduced schema')
  assert.deepEqual(r3.outputValue, { rows: [{ id: 3 }] })
  // Another text with the same schema: only the schema levels can answer.
  const req = { traceId, packageName: 'pg', inputValue: { text: 'SELECT * FROM users WHERE id = $1 /* 4 + */', values: [4] }, inputSchemaMerges: merges }
  const sync = rec.findMock(req)
  assert.equal(sync.found, false)
  assert.match(sync.reason, /findMockAsync/)
  const r7 = await rec.findMockAsync(req)
  assert.equal(r7.found, true, r7.reason)
  assert.equal(r7.priority, 7)
  assert.equal(r7.matchType, 'INPUT_SCHEMA_HASH')
  assert.deepEqual(r7.outputValue, { rows: [{ id: 4 }] }, 'the most similar text wins')
  assert.ok(r7.similarityScore > 0.9)
  // A ranked match's wording carries its scores on top of the level's.
  assert.match(r7.description, /^Unused span by input schema hash \(similarity: \d\.\d\d, next best: \d\.\d\d\)$/)
  // A schema level walked the request's schema, so its hash is reported (as hashPayload has it).
  assert.equal(r7.requestHashes.schemaHash, hashPayload(req.inputValue, { schemaMerges: merges }).schemaHash)
  assert.equal(sync.requestHashes.schemaHash, r7.requestHashes.schemaHash, 'a miss reports the schema hash too')
  assert.equal('schemaHash' in r3.requestHashes, false, 'a value-level match does not walk the schema')
  assert.equal(r7.topCandidates.length, 4, 'runners-up: the other unused spans, at most 5')
  // No match: a package the recording does not have.
  const none = await rec.findMockAsync({ traceId, packageName: 'mysql', inputValue: { sql: 'SELECT 1' } })
  assert.equal(none.found, false)
  assert.match(none.reason, /no "mysql" spans/)
  const st = rec.stats()
  assert.deepEqual(st.matchesByPriority, { 3: 1, 7: 1 })
  assert.equal(st.misses, 2)
})

test('consume-once across worker_threads: each span is handed out exactly once', async (t) => {
  const K = 60
  const WORKERS = 4
  // One trace of K spans (its root included) with the same input.
  const { dir, spans } = await record(t, pgContent(K, { text: () => 'SELECT now()', values: () => [] }), { perTrace: K })
  const rec = await Recording.open(dir)
  const traceId = spans[0].spanContext().traceId
  const start = new SharedArrayBuffer(4)
  const code = `
    const { workerData, parentPort } = require('node:worker_threads')
    const { Recording } = require(${JSON.stringify(ROOT)})
    const rec = Recording.fromHandle(workerData.handle)
    const flag = new Int32Array(workerData.start)
    Atomics.wait(flag, 0, 0)
    const got = []
    for (;;) {
      const r = rec.findMock(workerData.request)
      if (!r.found) throw new Error(r.reason)
      if (r.reused) break
      got.push(r.spanId)
    }
    parentPort.postMessage(got)
  `
  const request = { traceId, packageName: 'pg', inputValue: { text: 'SELECT now()', values: [] }, inputSchemaMerges: { values: { matchImportance: 0 } } }
  const results = Array.from({ length: WORKERS }, () => {
    const w = new Worker(code, { eval: true, workerData: { handle: rec.handle(), start, request } })
    return new Promise((resolve, reject) => {
      w.once('message', resolve)
      w.once('error', reject)
    })
  })
  await new Promise((resolve) => setTimeout(resolve, 100))
  Atomics.store(new Int32Array(start), 0, 1)
  Atomics.notify(new Int32Array(start), 0)
  const got = (await Promise.all(results)).flat()
  assert.equal(got.length, K, 'every unused span handed out')
  assert.equal(new Set(got).size, K, 'none handed out twice')
  assert.equal(rec.stats().matches, K + WORKERS)
})

test('corrupt recordings: torn last line, garbage line, empty file, unreadable pb', async (t) => {
  const { dir } = await record(t, pgContent(4), { perTrace: 4 })
  const [file] = fs.readdirSync(dir)
  const lines = fs.readFileSync(path.join(dir, file), 'utf8').split('\n')
  lines.pop()
  fs.writeFileSync(path.join(dir, file), [lines[0], '{"garbage', lines[1], lines[2]].join('\n') + '\n' + lines[3].slice(0, 50))
  fs.writeFileSync(path.join(dir, '2026-01-01T00-00-00-000Z_trace_00000000000000000000000000000001.jsonl'), '')
  fs.writeFileSync(path.join(dir, '2026-01-01T00-00-00-000Z_trace_00000000000000000000000000000002.pb'), Buffer.from([0x05, 1, 2, 3, 4, 5, 0xff, 0xff]))
  const rec = await Recording.open(dir)
  const st = rec.stats()
  assert.equal(st.files, 3)
  assert.equal(st.spans, 3)
  assert.equal(st.skippedLines, 4)
  const pb = '2026-01-01T00-00-00-000Z_trace_00000000000000000000000000000002.pb'
  const where = st.skipped.map((s) => `${s.file}:${s.line}`)
  // pb record 1 is not a Span; record 2 has a cut length prefix.
  assert.deepEqual(where.sort(), [`${file}:2`, `${file}:5`, `${pb}:1`, `${pb}:2`].sort())
  assert.match(st.skipped.find((s) => s.line === 5).reason, /torn last line/)
})

test('Recording.open loads off the JS thread (the event loop keeps turning)', async (t) => {
  const dir = tmpDir(t)
  const N = 40_000
  const parts = []
  for (let i = 0; i < N; i++) {
    const traceId = (i % 400).toString(16).padStart(32, '0')
    parts.push(JSON.stringify({
      traceId,
      spanId: (i + 1).toString(16).padStart(16, '0'),
      packageName: 'pg',
      inputValue: { text: `SELECT ${i % 97}`, values: [i, 'x'] },
      outputValue: { rows: [{ i }] },
      inputSchema: { type: 6, properties: { values: { type: 7, properties: {}, matchImportance: 0 } } },
      timestamp: { seconds: 1700000000 + i, nanos: 0 },
    }))
  }
  fs.writeFileSync(path.join(dir, 'bulk_trace_all.jsonl'), parts.join('\n') + '\n')
  let ticks = 0
  let running = true
  const spin = () => {
    ticks++
    if (running) setImmediate(spin)
  }
  setImmediate(spin)
  const rec = await Recording.open(dir)
  running = false
  assert.equal(rec.stats().spans, N)
  assert.ok(ticks > 5, `the event loop turned ${ticks} times while loading (${rec.stats().loadMs.toFixed(0)} ms)`)
})

test('bad input is refused clearly', async (t) => {
  await assert.rejects(Recording.open(path.join(tmpDir(t), 'missing')), /cannot read recordings directory/)
  await assert.rejects(Recording.open(tmpDir(t), { hashAlgorithm: 'md5' }), /hashAlgorithm/)
  assert.throws(() => Recording.fromHandle(987654), /no open recording with handle/)
  const rec = await Recording.open(tmpDir(t))
  assert.equal(Recording.fromHandle(rec.handle()).stats().spans, 0)
  assert.throws(() => rec.findMock({ packageName: 'pg' }), /inputValue/)
  assert.throws(() => rec.findMock({ inputValue: '{"a":' }), /inputValue: invalid JSON/)
  assert.throws(() => rec.findMock({ inputValue: {}, inputSchemaMerges: '[1]' }), /inputSchemaMerges/)
  const r = rec.findMock({ inputValue: {} })
  assert.equal(r.found, false)
  assert.match(r.reason, /no trace id/)
})

test('string arguments cross whole: non-ASCII, astral and lone-surrogate text; a non-string is named', async (t) => {
  const dir = tmpDir(t)
  const traceId = 'cd'.repeat(16)
  const name = 'requête ✓ 😀 查询'
  const packageName = 'pg-ünï'
  // Runs of 3-byte characters: napi's UTF-8 needs the full 3 bytes per UTF-16 unit here.
  const input = { text: 'SELECT \'😀\' AS \"列\" -- é ' + '查询'.repeat(200), values: ['\ud83d\ude00', 'ß'.repeat(300)] }
  fs.writeFileSync(path.join(dir, `x_trace_${traceId}.jsonl`), JSON.stringify({
    traceId, spanId: '00000000000000a1', name, packageName, inputValue: input, outputValue: { ok: '✓' },
  }) + '\n')
  const rec = await Recording.open(dir)
  const r = rec.findMock({ traceId, packageName, name, submoduleName: 'qüery', inputValue: input })
  assert.equal(r.found, true, r.reason)
  assert.equal(r.priority, 1)
  assert.equal(r.name, name)
  assert.equal(r.packageName, packageName)
  assert.deepEqual(r.outputValue, { ok: '✓' })
  // The same value given as JSON text.
  assert.equal(rec.findMock({ traceId, name, inputValue: JSON.stringify(input) }).priority, 2)
  // Without a trace id: across traces, the span already used.
  const global = rec.findMock({ inputValue: input })
  assert.deepEqual(
    [global.priority, global.reused, global.matchType, global.matchTypeCode, global.matchScope, global.description],
    [12, true, 'INPUT_VALUE_HASH', 1, 'GLOBAL', 'Suite used span by input value hash'],
  )
  // Lone surrogates cannot be UTF-8: they arrive as U+FFFD (3 bytes each, as Buffer.from
  // writes them); every request string comes back whole in the miss reason.
  const odd = { traceId: '查'.repeat(40), packageName: 'x' + '\ud800'.repeat(30) + 'y', name: 'n' + '\udc00'.repeat(30) }
  const miss = rec.findMock({ ...odd, inputValue: {} })
  assert.equal(miss.found, false)
  for (const v of Object.values(odd)) assert.ok(miss.reason.includes(Buffer.from(v).toString()), `${miss.reason} lacks ${v}`)
  // The native method names a wrong argument type (the shim never passes one).
  const native = rec._native
  assert.throws(() => native.findMock(42, undefined, undefined, undefined, '{}', undefined, false), /expected a string, got number/)
  assert.throws(() => native.findMock(undefined, undefined, undefined, undefined, undefined, undefined, false), /expected a string, got undefined/)
  assert.throws(() => native.findMock(null, {}, null, null, '{}', null, false), /expected a string, got object/)
  assert.throws(() => native.findMock(1n, null, null, null, '{}', null, false), /expected a string, got bigint/)
  assert.equal(JSON.parse(native.findMock(null, null, null, null, '{}', null, false))[0], 0)
})

test('result fields: metadata object, null and absent; timestamp; merges given as text or object', async (t) => {
  const dir = tmpDir(t)
  const traceId = 'ab'.repeat(16)
  const line = (i, extra) => JSON.stringify({
    traceId,
    spanId: (i + 1).toString(16).padStart(16, '0'),
    name: 'pg.query',
    packageName: 'pg',
    inputValue: { text: `SELECT ${i}`, values: [i] },
    outputValue: { rows: [{ i }] },
    inputSchema: { type: 6, properties: { values: { type: 7, properties: {}, matchImportance: 0 } } },
    ...extra,
  })
  fs.writeFileSync(path.join(dir, `x_trace_${traceId}.jsonl`), [
    line(0, { metadata: null, timestamp: { seconds: 1700000000, nanos: 5 } }),
    line(1, { metadata: { host: 'db', port: 5432 } }),
    line(2, {}),
  ].join('\n') + '\n')
  const rec = await Recording.open(dir)
  assert.equal(rec.stats().spans, 3)
  const merges = { values: { matchImportance: 0 } }
  const ask = (i, m = merges) => rec.findMock({ traceId, packageName: 'pg', name: 'pg.query', inputValue: { text: `SELECT ${i}`, values: [i] }, inputSchemaMerges: m })
  const r0 = ask(0)
  assert.equal(r0.found, true)
  assert.equal(r0.priority, 1)
  assert.ok(!('metadata' in r0), 'recorded null metadata reads as none')
  assert.deepEqual(r0.timestamp, { seconds: 1700000000, nanos: 5 })
  assert.deepEqual(r0.outputValue, { rows: [{ i: 0 }] })
  const r1 = ask(1, JSON.stringify(merges))
  assert.deepEqual(r1.metadata, { host: 'db', port: 5432 })
  assert.equal(r1.matchType, 'INPUT_VALUE_HASH')
  assert.equal(r1.matchScope, 'TRACE')
  const r2 = ask(2)
  assert.equal(r2.found, true)
  assert.ok(!('metadata' in r2), 'no metadata, no field')
  assert.ok(!('timestamp' in r2))
  assert.match(r2.requestHashes.valueHash, /^[0-9a-f]{64}$/)
  // A different value of the matchImportance-0 field: found by the reduced hash, with the
  // same merges object (its JSON text is cached per object).
  const r3 = rec.findMock({ traceId, packageName: 'pg', inputValue: { text: 'SELECT 2', values: [99] }, inputSchemaMerges: merges })
  assert.equal(r3.found, true)
  assert.equal(r3.priority, 4, 'span 2 was used: the used reduced-hash level')
  assert.deepEqual(
    [r3.reused, r3.matchType, r3.matchTypeCode, r3.matchScope, r3.description],
    [true, 'INPUT_VALUE_HASH_REDUCED_SCHEMA', 2, 'TRACE', 'Used span by input value hash with reduced schema'],
  )
  assert.throws(() => ask(0, 5), /inputSchemaMerges must be an object or JSON text, got number/)
})
