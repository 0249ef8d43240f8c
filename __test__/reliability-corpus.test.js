'use strict'
// Bad input corpus, table-driven: every case is one span in a single batch between good spans.
// A rejected span gets exactly one error entry whose message starts with the field it names
// and says what was wrong; every other span of the batch is written; the export succeeds (a
// span's content is data, not an infrastructure failure). Run through OffloopExporter.export()
// and through OffloopSpanProcessor (whose batch reports reach its onReport). Cases where offloop *accepts* input
// that may look bad are listed too, with what gets recorded — each is a decision, documented
// in README "Guarantees".
//
// Not repeated here: bad-spans.test.js (a few of these under a real SDK BatchSpanProcessor) and
// crates/offloop/tests/reliability.rs (frames only Rust can produce: invalid UTF-8 bytes,
// unknown value types, truncated frames, NaN times).

const test = require('node:test')
const assert = require('node:assert/strict')

const { OffloopExporter, OffloopSpanProcessor, hashPayload } = require('..')
const { tmpDir, readJsonl, exportAsync } = require('./support/otel.js')
const { fakeSpan, accountingError, traceIdOf } = require('./support/reliability.js')
const ref = require('./support/tusk-reference.js')

const MAX_SPAN_BYTES = 1_000_000
const deepArrays = (n) => '['.repeat(n) + ']'.repeat(n)
const deepObjects = (n) => '{"a":'.repeat(n) + '1' + '}'.repeat(n)
let deepJs = []
for (let i = 0; i < 100_000; i++) deepJs = [deepJs]

const input = (v) => ({ 'td.inputValue': v })
const output = (v) => ({ 'td.inputValue': '{"q":1}', 'td.outputValue': v })
const attrs = (a) => ({ 'td.inputValue': '{"q":1}', ...a })

// [name, span overrides, expectation]. Expectation: { stage, field, re, dropped? } for a
// rejected span; { written: (line) => void } for an accepted one.
const REJECTED = [
  // Invalid JSON text.
  ['td.inputValue: truncated JSON', { attributes: input('{"text":') }, { stage: 'input', field: 'td.inputValue', re: /invalid JSON/ }],
  ['td.outputValue: unterminated array', { attributes: output('[1,2') }, { stage: 'output', field: 'td.outputValue', re: /invalid JSON/ }],
  ['td.metadata: invalid JSON', { attributes: attrs({ 'td.metadata': '{bad' }) }, { stage: 'attributes', field: 'td.metadata', re: /invalid JSON/ }],
  ['td.inputValue: empty string (JSON.parse("") throws too)', { attributes: input('') }, { stage: 'input', field: 'td.inputValue', re: /invalid JSON/ }],
  ['td.inputValue: trailing garbage', { attributes: input('{"a":1} x') }, { stage: 'input', field: 'td.inputValue', re: /invalid JSON/ }],
  ['td.inputValue: single quotes', { attributes: input("{'a':1}") }, { stage: 'input', field: 'td.inputValue', re: /invalid JSON/ }],
  // NaN / Infinity inside JSON text (not JSON; JSON.parse rejects them too).
  ['td.inputValue: NaN literal', { attributes: input('{"a":NaN}') }, { stage: 'input', field: 'td.inputValue', re: /invalid JSON/ }],
  ['td.outputValue: Infinity literal', { attributes: output('[Infinity]') }, { stage: 'output', field: 'td.outputValue', re: /invalid JSON/ }],
  ['td.inputValue: -Infinity literal', { attributes: input('-Infinity') }, { stage: 'input', field: 'td.inputValue', re: /invalid JSON/ }],
  // JSON.parse reads 1e400 as Infinity (and JSON.stringify then prints null); offloop refuses
  // a number it cannot represent instead of hashing a different value.
  ['td.inputValue: 1e400 overflows a double', { attributes: input('{"a":1e400}') }, { stage: 'input', field: 'td.inputValue', re: /invalid JSON|number/ }],
  // Lone surrogates.
  ['td.inputValue: lone surrogate as a JSON escape', { attributes: input('{"a":"\\ud800"}') }, { stage: 'input', field: 'td.inputValue', re: /surrogate/ }],
  ['td.outputValue: lone low surrogate escape', { attributes: output('["\\udc00x"]') }, { stage: 'output', field: 'td.outputValue', re: /surrogate/ }],
  ['td.metadata: raw lone surrogate', { attributes: attrs({ 'td.metadata': '{"m":"\ud83d"}' }) }, { stage: 'attributes', field: 'td.metadata', re: /surrogate|UTF-16/ }],
  ['td.inputSchemaMerges: raw lone surrogate', { attributes: attrs({ 'td.inputSchemaMerges': '{"\udfff":{}}' }) }, { stage: 'input', field: 'td.inputSchemaMerges', re: /surrogate|UTF-16/ }],
  // 100k-deep nesting: an error, never a stack overflow.
  ['td.inputValue: 100k-deep arrays', { attributes: input(deepArrays(100_000)) }, { stage: 'input', field: 'td.inputValue', re: /nested deeper than 128 levels/ }],
  ['td.outputValue: 100k-deep objects', { attributes: output(deepObjects(100_000)) }, { stage: 'output', field: 'td.outputValue', re: /nested deeper than 128 levels/ }],
  ['td.metadata: 100k-deep arrays', { attributes: attrs({ 'td.metadata': deepArrays(100_000) }) }, { stage: 'attributes', field: 'td.metadata', re: /nested deeper than 128 levels/ }],
  ['td.inputSchemaMerges: 100k-deep', { attributes: attrs({ 'td.inputSchemaMerges': `{"q":${deepArrays(100_000)}}` }) }, { stage: 'input', field: 'td.inputSchemaMerges', re: /recursion|deep|nested/ }],
  ['td.inputValue: 129 levels (just over the limit)', { attributes: input(deepArrays(129)) }, { stage: 'input', field: 'td.inputValue', re: /nested deeper than 128 levels/ }],
  // Over the size limit: dropped by policy (and its trace blocked).
  ['td.inputValue over maxSpanBytes', { attributes: input(JSON.stringify({ big: 'x'.repeat(MAX_SPAN_BYTES) })) }, { stage: 'filter', field: null, re: /maxSpanBytes/, dropped: true }],
  // Wrong attribute types.
  ['td.inputValue: a number (JSON.parse would coerce it)', { attributes: input(42) }, { stage: 'input', field: 'td.inputValue', re: /expected a JSON string attribute, got a number/ }],
  ['td.inputValue: a string array', { attributes: input(['{}']) }, { stage: 'input', field: 'td.inputValue', re: /expected a JSON string attribute, got an array/ }],
  ['td.inputValue: a boolean', { attributes: input(true) }, { stage: 'input', field: 'td.inputValue', re: /got a boolean/ }],
  ['td.inputValue: an object (not an OTel attribute value)', { attributes: input({ a: 1 }) }, { stage: 'input', field: 'td.inputValue', re: /expected a JSON string attribute, got an array/ }],
  ['td.outputValue: a number array', { attributes: output([1, 2]) }, { stage: 'output', field: 'td.outputValue', re: /got an array/ }],
  ['td.inputSchemaMerges: a number', { attributes: attrs({ 'td.inputSchemaMerges': 1 }) }, { stage: 'input', field: 'td.inputSchemaMerges', re: /expected a JSON string attribute, got a number/ }],
  ['td.outputSchemaMerges: a boolean', { attributes: { ...output('{}'), 'td.outputSchemaMerges': false } }, { stage: 'output', field: 'td.outputSchemaMerges', re: /got a boolean/ }],
  ['td.metadata: a string array', { attributes: attrs({ 'td.metadata': ['a'] }) }, { stage: 'attributes', field: 'td.metadata', re: /got an array/ }],
  ['td.name: a number', { attributes: attrs({ 'td.name': 7 }) }, { stage: 'attributes', field: 'td.name', re: /expected a string, got a number/ }],
  ['td.packageName: a boolean', { attributes: attrs({ 'td.packageName': true }) }, { stage: 'attributes', field: 'td.packageName', re: /expected a string, got a boolean/ }],
  ['td.packageType: a string', { attributes: attrs({ 'td.packageType': 'PG' }) }, { stage: 'attributes', field: 'td.packageType', re: /expected a PackageType enum number, got a string/ }],
  ['td.packageType: NaN', { attributes: attrs({ 'td.packageType': NaN }) }, { stage: 'attributes', field: 'td.packageType', re: /got NaN/ }],
  ['td.packageType: Infinity', { attributes: attrs({ 'td.packageType': Infinity }) }, { stage: 'attributes', field: 'td.packageType', re: /got inf/i }],
  ['td.packageType: -1', { attributes: attrs({ 'td.packageType': -1 }) }, { stage: 'attributes', field: 'td.packageType', re: /got -1/ }],
  ['td.submodule: a number array', { attributes: attrs({ 'td.submodule': [1] }) }, { stage: 'attributes', field: 'td.submodule', re: /got an array/ }],
  // Malformed schema merges.
  ['td.inputSchemaMerges: invalid JSON', { attributes: attrs({ 'td.inputSchemaMerges': '{"q":' }) }, { stage: 'input', field: 'td.inputSchemaMerges', re: /invalid JSON/ }],
  ['td.inputSchemaMerges: a JSON string', { attributes: attrs({ 'td.inputSchemaMerges': '"q"' }) }, { stage: 'input', field: 'td.inputSchemaMerges', re: /expected a JSON object/ }],
  ['td.inputSchemaMerges: entry is a string', { attributes: attrs({ 'td.inputSchemaMerges': '{"q":"x"}' }) }, { stage: 'input', field: 'td.inputSchemaMerges', re: /q: expected an object, got a string/ }],
  ['td.inputSchemaMerges: encoding is a string', { attributes: attrs({ 'td.inputSchemaMerges': '{"q":{"encoding":"BASE64"}}' }) }, { stage: 'input', field: 'td.inputSchemaMerges', re: /q\.encoding: expected an enum number/ }],
  ['td.outputSchemaMerges: decodedType 1.5', { attributes: { ...output('{"b":"e30="}'), 'td.outputSchemaMerges': '{"b":{"encoding":1,"decodedType":1.5}}' } }, { stage: 'output', field: 'td.outputSchemaMerges', re: /b\.decodedType: expected an enum number/ }],
  ['td.inputSchemaMerges: matchImportance is a string', { attributes: attrs({ 'td.inputSchemaMerges': '{"q":{"matchImportance":"low"}}' }) }, { stage: 'input', field: 'td.inputSchemaMerges', re: /q\.matchImportance: expected a number/ }],
  // Bogus kinds and status codes (the shim sends 255 for anything not an integer 0..255).
  ['kind 5', { kind: 5 }, { stage: 'validate', field: 'kind', re: /5 is not an OpenTelemetry SpanKind/ }],
  ['kind "SERVER" (a string)', { kind: 'SERVER' }, { stage: 'validate', field: 'kind', re: /not an OpenTelemetry SpanKind/ }],
  ['kind -1', { kind: -1 }, { stage: 'validate', field: 'kind', re: /not an OpenTelemetry SpanKind/ }],
  ['status.code 3', { status: { code: 3 } }, { stage: 'validate', field: 'status.code', re: /3 is not an OpenTelemetry status code/ }],
  ['status missing', { status: undefined }, { stage: 'validate', field: 'status.code', re: /not an OpenTelemetry status code/ }],
  ['status.code "ERROR"', { status: { code: 'ERROR' } }, { stage: 'validate', field: 'status.code', re: /not an OpenTelemetry status code/ }],
  // Times.
  ['startTime [NaN, 0]', { startTime: [NaN, 0] }, { stage: 'validate', field: 'startTime', re: /NaN/ }],
  ['startTime [-5, 0]', { startTime: [-5, 0] }, { stage: 'validate', field: 'startTime', re: /not a valid \[seconds, nanos\] time/ }],
  ['duration [0, 2e9] nanos', { duration: [0, 2e9] }, { stage: 'validate', field: 'duration', re: /not a valid/ }],
  // Ids: non-hex, wrong case, wrong length, all zero, path-like (more in reliability-files).
  ['traceId: upper-case hex', { traceId: '0AF7651916CD43DD8448EB211C80319C' }, { stage: 'validate', field: 'traceId', re: /expected 32 lower-case hex characters/ }],
  ['traceId: non-hex', { traceId: 'zzf7651916cd43dd8448eb211c80319c' }, { stage: 'validate', field: 'traceId', re: /expected 32 lower-case hex/ }],
  ['traceId: 33 characters', { traceId: '0af7651916cd43dd8448eb211c80319c0' }, { stage: 'validate', field: 'traceId', re: /\(33 bytes\)/ }],
  ['traceId: 10 kB', { traceId: 'a'.repeat(10_000) }, { stage: 'validate', field: 'traceId', re: /\(10000 bytes\)/ }],
  ['traceId: all zero (invalid in OTel)', { traceId: '0'.repeat(32) }, { stage: 'validate', field: 'traceId', re: /expected 32 lower-case hex/ }],
  ['traceId: empty', { traceId: '' }, { stage: 'validate', field: 'traceId', re: /\(0 bytes\)/ }],
  ['spanId: non-hex', { spanId: 'b7ad6b716920333g' }, { stage: 'validate', field: 'spanId', re: /expected 16 lower-case hex/ }],
  ['spanId: 17 characters', { spanId: 'b7ad6b71692033310' }, { stage: 'validate', field: 'spanId', re: /expected 16 lower-case hex/ }],
  ['spanId: all zero', { spanId: '0'.repeat(16) }, { stage: 'validate', field: 'spanId', re: /expected 16 lower-case hex/ }],
  ['parentSpanId: path-like', { parentSpanId: '../../../etc/x' }, { stage: 'validate', field: 'parentSpanId', re: /expected empty or 16 lower-case hex/ }],
]

// Accepted on purpose. `check(line, lines)` looks at what was recorded.
const ACCEPTED = [
  ['duplicate keys: last wins, like JSON.parse', { attributes: input('{"a":1,"b":2,"a":3}') }, (l) => {
    assert.deepEqual(l.inputValue, { a: 3, b: 2 }, 'the stored text reads back last-wins')
    assert.equal(l.inputValueHash, hashPayload('{"b":2,"a":3}').valueHash, 'hashed as {"a":3,"b":2}')
  }],
  ['a huge integer is hashed as the JS number it parses to', { attributes: input('{"n":123456789012345678901234567890}') }, (l) => {
    assert.equal(l.inputValueHash, hashPayload('{"n":1.2345678901234568e+29}').valueHash)
  }],
  ['-0 and 1e-400 (underflow to 0) are numbers', { attributes: input('[-0,1e-400,5e-324]') }, (l) => {
    assert.equal(l.inputValueHash, hashPayload('[0,0,5e-324]').valueHash)
  }],
  ['no attributes at all: the input value is {}', { attributes: {} }, (l) => {
    assert.deepEqual(l.inputValue, {})
    assert.deepEqual(l.outputValue, {})
  }],
  ['no td.inputValue: the other attributes are the input; NaN/Infinity become null like JSON.stringify', { attributes: { 'http.status': NaN, ratio: Infinity, ok: true, tags: ['a'] } }, (l) => {
    assert.deepEqual(l.inputValue, { 'http.status': null, ratio: null, ok: true, tags: ['a'] })
  }],
  ['a non-td attribute holding a 100k-deep JS array (JSON.stringify throws) is recorded as null', { attributes: { x: deepJs } }, (l) => {
    assert.deepEqual(l.inputValue, { x: null })
  }],
  ['td.outputValue "" is {}, like the reference', { attributes: output('') }, (l) => assert.deepEqual(l.outputValue, {})],
  ['td.outputValue missing is {}', { attributes: input('{"q":1}') }, (l) => assert.deepEqual(l.outputValue, {})],
  ['td.inputSchemaMerges "" is no merges', { attributes: attrs({ 'td.inputSchemaMerges': '' }) }, (l) => assert.deepEqual(l.inputValue, { q: 1 })],
  ['a null merge entry is ignored', { attributes: attrs({ 'td.inputSchemaMerges': '{"q":null}' }) }, (l) => assert.deepEqual(l.inputValue, { q: 1 })],
  ['td.transformMetadata that is not JSON is left out, like the reference', { attributes: attrs({ 'td.transformMetadata': '{oops' }) }, (l) => assert.equal('transformMetadata' in l, false)],
  ['td.isPreAppStart "true" (a string) is false: only the boolean true counts, like the reference', { attributes: attrs({ 'td.isPreAppStart': 'true' }) }, (l) => assert.equal(l.isPreAppStart, false)],
  ['td.name with a lone surrogate: U+FFFD, like Buffer.from(s)', { attributes: attrs({ 'td.name': 'q\ud800x' }) }, (l) => assert.equal(l.name, 'q\ufffdx')],
  ['128 levels of nesting (the limit) are fine', { attributes: input(deepArrays(128)) }, (l) => assert.ok(Array.isArray(l.inputValue))],
  ['an unknown td.* attribute is ignored', { attributes: attrs({ 'td.somethingNew': 1 }) }, (l) => assert.deepEqual(l.inputValue, { q: 1 })],
]

const immediate = () => new Promise((resolve) => setImmediate(resolve))

for (const path of ['OffloopExporter.export()', 'OffloopSpanProcessor']) test(`${path}: bad input corpus, ${REJECTED.length} rejected and ${ACCEPTED.length} accepted cases in one batch; each bad span fails alone, naming the field`, async (t) => {
  const dir = tmpDir(t)
  const reports = []
  const options = { directory: dir, maxSpanBytes: MAX_SPAN_BYTES, onReport: (r) => reports.push(r) }
  // The processor forms one batch of everything on forceFlush().
  const target = path === 'OffloopSpanProcessor' ? new OffloopSpanProcessor({ ...options, scheduledDelayMillis: 60_000, maxExportBatchSize: 100_000 }) : new OffloopExporter(options)
  t.after(() => target.shutdown())

  // good, case, good, case, …, good. Each span is the only one of its trace (so the size
  // filter's trace block takes nothing else with it).
  const spans = []
  const goods = []
  const cases = []
  let n = 0
  const next = (over) => {
    const i = n++
    return fakeSpan(i, { traceId: traceIdOf(i), ...over })
  }
  for (const [name, over, expect, kind] of [...REJECTED.map((c) => [...c, 'rejected']), ...ACCEPTED.map((c) => [...c, 'accepted'])]) {
    const g = next({})
    goods.push(g)
    spans.push(g)
    const s = next(over)
    cases.push({ name, expect, kind, index: spans.length, span: s })
    spans.push(s)
  }
  const tail = next({})
  goods.push(tail)
  spans.push(tail)

  if (path === 'OffloopSpanProcessor') {
    for (const s of spans) target.onEnd(s)
    await target.forceFlush()
    // Processor reports reach onReport on the JS thread, asynchronously.
    for (let i = 0; i < 1000 && reports.length === 0; i++) await immediate()
  } else {
    const result = await exportAsync(target, spans)
    assert.equal(result.code, 0, `bad content does not fail the export: ${result.error && result.error.message}`)
  }
  assert.equal(reports.length, 1)
  const report = reports[0]
  assert.equal(report.spans, spans.length)
  const lines = readJsonl(dir)
  const bySpanId = new Map(lines.map((l) => [l.line.spanId, l.line]))

  const problems = []
  for (const c of cases) {
    const errors = report.errors.filter((e) => e.index === c.index)
    if (c.kind === 'rejected') {
      const expect = c.expect
      if (errors.length !== 1) {
        problems.push(`${c.name}: expected one error, got ${JSON.stringify(errors)}`)
        continue
      }
      const e = errors[0]
      const ok =
        e.stage === expect.stage &&
        e.dropped === !!expect.dropped &&
        (expect.field === null || e.message.startsWith(`${expect.field}:`)) &&
        expect.re.test(e.message)
      if (!ok) problems.push(`${c.name}: expected [${expect.stage}] "${expect.field}: …${expect.re}", got [${e.stage}${e.dropped ? ', dropped' : ''}] ${e.message.slice(0, 200)}`)
    } else {
      if (errors.length) problems.push(`${c.name}: expected to be written, got ${JSON.stringify(errors).slice(0, 300)}`)
      const line = bySpanId.get(c.span.spanContext().spanId)
      if (!line) {
        problems.push(`${c.name}: not in the files`)
        continue
      }
      try {
        c.expect(line)
      } catch (err) {
        problems.push(`${c.name}: ${err.message}`)
      }
    }
  }
  assert.deepEqual(problems, [])

  for (const g of goods) assert.ok(bySpanId.has(g.spanContext().spanId), 'every good span is written')
  assert.equal(report.errors.length, REJECTED.length, 'no other span has an error')
  assert.equal(report.written, goods.length + ACCEPTED.length)
  assert.equal(lines.length, goods.length + ACCEPTED.length)
  const s = target.stats()
  assert.equal(accountingError(s), undefined)
  assert.equal(s.spansWritten + s.spansFailed + s.spansDropped, spans.length)
})

test('hashPayload decisions match JSON.parse and the Tusk JS reference where both accept the input', (t) => {
  const js = ref.loadTuskJs()
  if (!js) t.skip(`Tusk JS reference unavailable: ${ref.tuskJsUnavailableReason()}`)
  for (const text of [
    '{"a":1,"a":2}',
    '{"a":{"x":1},"a":[2]}',
    '{"n":123456789012345678901234567890}',
    '[9007199254740993, -9007199254740993, 1e21, 1e-7]',
    '{"z":1e-400,"m":-0}',
    '{"__proto__":{"x":1},"b":2}',
  ]) {
    const ours = hashPayload(text, { hashAlgorithm: 'sha256' })
    const theirs = ref.referenceHash(JSON.parse(text))
    assert.equal(ours.valueHash, theirs.decodedValueHash, `value hash of ${text}`)
    assert.equal(ours.schemaHash, theirs.decodedSchemaHash, `schema hash of ${text}`)
  }
  // Where JS accepts and offloop refuses (documented): an overflowing number, a lone
  // surrogate escape, nesting deeper than 128.
  for (const [text, re] of [
    ['{"a":1e400}', /invalid JSON|number/],
    ['"\\ud800"', /surrogate/],
    [deepArrays(129), /nested deeper than 128 levels/],
    [deepArrays(100_000), /nested deeper than 128 levels/],
  ]) {
    assert.doesNotThrow(() => JSON.parse(text))
    assert.throws(() => hashPayload(text), re, text.slice(0, 40))
  }
})
