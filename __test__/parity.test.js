'use strict'
// sha256 parity with the real Tusk JS reference (@use-tusk/drift-node-sdk JsonSchemaHelper /
// SpanTransformer, loaded by support/tusk-reference.js).
//
// Schema objects are compared in their JSON form (JSON.parse(JSON.stringify(schema))): the
// reference builds `properties` by assignment, so a data key "__proto__" becomes the
// *prototype* of its properties object instead of an own key (and is absent from the JSON the
// hash covers). Comparing the JSON form compares exactly the data the schema hash covers; no
// case is excluded by it.
//
// Exclusions: none. The generator runs with its defaults (no lone surrogates: a lone surrogate
// cannot be encoded as UTF-8, so it cannot cross into Rust; the exporter reports such spans
// instead of hashing them, see bad-spans.test.js).

const test = require('node:test')
const assert = require('node:assert/strict')

const { OffloopExporter, hashPayload } = require('..')
const vectors = require('./fixtures/tusk-parity-vectors.json')
const ref = require('./support/tusk-reference.js')
const { SDKS, tmpDir, readJsonl, makeReadableSpans, exportAsync } = require('./support/otel.js')

const GENERATED_SEED = 1234
const GENERATED_COUNT = 600
const E2E_SPANS = 200

const jsonForm = (x) => JSON.parse(JSON.stringify(x))

function referenceOrSkip(t) {
  const js = ref.loadTuskJs()
  if (!js) t.skip(`Tusk JS reference unavailable: ${ref.tuskJsUnavailableReason()}`)
  return js
}

/** Mismatch descriptions between hashPayload and the reference for one case ([] if equal). */
function compareCase(value, merges, expected) {
  const ours = hashPayload(value, { hashAlgorithm: 'sha256', schemaMerges: merges })
  const problems = []
  if (ours.valueHash !== expected.valueHash) problems.push(`valueHash ${ours.valueHash} != ${expected.valueHash}`)
  if (ours.schemaHash !== expected.schemaHash) problems.push(`schemaHash ${ours.schemaHash} != ${expected.schemaHash}`)
  try {
    assert.deepStrictEqual(ours.schema, jsonForm(expected.schema))
  } catch {
    problems.push(`schema ${JSON.stringify(ours.schema)} != ${JSON.stringify(expected.schema)}`)
  }
  return problems
}

const clip = (s, n = 240) => (s.length > n ? s.slice(0, n) + '…' : s)

test('hashPayload(sha256) matches every fixture vector (tusk-parity-vectors.json)', () => {
  assert.ok(Array.isArray(vectors) && vectors.length >= 5, 'fixture has vectors')
  const failures = []
  for (const v of vectors) {
    const problems = compareCase(v.value, v.merges, v)
    if (problems.length) failures.push(`${v.name}: ${problems.join('; ')}`)
  }
  assert.deepEqual(failures, [])
})

test('the fixture vectors are still what the reference computes', (t) => {
  if (!referenceOrSkip(t)) return
  for (const v of vectors) {
    const r = ref.referenceHash(v.value, v.merges || undefined)
    assert.equal(r.decodedValueHash, v.valueHash, `${v.name} valueHash`)
    assert.equal(r.decodedSchemaHash, v.schemaHash, `${v.name} schemaHash`)
  }
})

test(`hashPayload(sha256) matches JsonSchemaHelper.generateSchemaAndHash on ${GENERATED_COUNT} generated payloads`, (t) => {
  if (!referenceOrSkip(t)) return
  const rng = ref.mulberry32(GENERATED_SEED)
  const failures = []
  let withMerges = 0
  for (let i = 0; i < GENERATED_COUNT; i++) {
    const { value, merges } = ref.genMerges(rng, ref.genPayload(rng))
    if (merges && Object.keys(merges).length) withMerges++
    const r = ref.referenceHash(value, merges || undefined)
    let problems
    try {
      problems = compareCase(value, merges, { valueHash: r.decodedValueHash, schemaHash: r.decodedSchemaHash, schema: r.schema })
    } catch (e) {
      problems = [`hashPayload threw: ${e.message}`]
    }
    if (problems.length) {
      failures.push(`case ${i} (seed ${GENERATED_SEED}): ${problems.map((p) => clip(p, 160)).join('; ')}\n    value=${clip(JSON.stringify(value))}\n    merges=${JSON.stringify(merges)}`)
    }
  }
  assert.ok(withMerges > GENERATED_COUNT / 3, 'the generated cases exercise schema merges')
  assert.equal(failures.length, 0, `${failures.length} of ${GENERATED_COUNT} generated cases differ from the reference:\n${failures.join('\n')}`)
})

// Node's base64 decoder reads a JS string by UTF-16 code unit and keeps only the low byte of
// each: '中' (U+4E2D) decodes as '-' (0x2D, URL-safe 62), '\u0141' as 'A', and the high
// surrogate of an emoji (U+D83D) as '=' (0x3D), which ends the input. The reference hashes
// what Node decodes. (These were generated cases offloop got wrong before 356be84.)
test('base64 merges decode non-ASCII text like Buffer.from(s, "base64") (the reference decoder)', (t) => {
  if (!referenceOrSkip(t)) return
  const cases = [
    { body: '中L' },
    { body: 'eyJr\u0141A' },
    { body: '\u0001文b Ж！/A中N' },
    { body: 'eyJr\u{1F600}AAAA' },
    { body: 'QUJD\u00e9RA' },
    { body: 'QU\u3d00JD' },
  ]
  const failures = []
  for (const value of cases) {
    const merges = { body: { encoding: 1 } }
    const r = ref.referenceHash(value, merges)
    const ours = hashPayload(value, { hashAlgorithm: 'sha256', schemaMerges: merges })
    const node = Buffer.from(value.body, 'base64').toString('utf8')
    if (ours.valueHash !== r.decodedValueHash) {
      failures.push(`${JSON.stringify(value.body)}: Node decodes to ${JSON.stringify(node)}, hashPayload decoded ${JSON.stringify(ours.decodedValue.body)}`)
    }
  }
  assert.deepEqual(failures, [])
})

for (const sdk of SDKS) {
  test(`${sdk.label}: exporter (sha256) and SpanTransformer.transformSpanToCleanJSON agree on ${E2E_SPANS} spans`, async (t) => {
    const js = referenceOrSkip(t)
    if (!js) return
    const rng = ref.mulberry32(GENERATED_SEED + sdk.major)
    const content = []
    for (let i = 0; i < E2E_SPANS; i++) {
      const input = ref.genMerges(rng, ref.genPayload(rng))
      const output = ref.genMerges(rng, ref.genPayload(rng))
      const attrs = {
        'td.name': `e2e #${i}`,
        'td.packageName': 'http',
        'td.packageType': 1,
        'td.inputValue': JSON.stringify(input.value),
      }
      if (input.merges) attrs['td.inputSchemaMerges'] = JSON.stringify(input.merges)
      if (i % 10 !== 9) {
        // Every 10th span has no output (the reference hashes `{}` then).
        attrs['td.outputValue'] = JSON.stringify(output.value)
        if (output.merges) attrs['td.outputSchemaMerges'] = JSON.stringify(output.merges)
      }
      content.push(attrs)
    }
    const spans = makeReadableSpans(sdk, E2E_SPANS, (i) => content[i], { perTrace: 10 })
    assert.equal(spans.length, E2E_SPANS)

    const dir = tmpDir(t)
    const exporter = new OffloopExporter({ directory: dir, hashAlgorithm: 'sha256' })
    for (let i = 0; i < spans.length; i += 64) {
      const result = await exportAsync(exporter, spans.slice(i, i + 64))
      assert.equal(result.code, 0, `export result: ${result.error && result.error.message}`)
    }
    await exporter.shutdown()

    const lines = new Map(readJsonl(dir).map(({ line }) => [line.spanId, line]))
    assert.equal(lines.size, E2E_SPANS, 'every span recorded')
    const failures = []
    for (const span of spans) {
      const clean = js.SpanTransformer.transformSpanToCleanJSON(span)
      const line = lines.get(span.spanContext().spanId)
      const problems = []
      for (const k of ['inputValueHash', 'outputValueHash', 'inputSchemaHash', 'outputSchemaHash']) {
        if (line[k] !== clean[k]) problems.push(k)
      }
      for (const k of ['inputSchema', 'outputSchema', 'inputValue', 'outputValue']) {
        try {
          assert.deepStrictEqual(line[k], jsonForm(clean[k]))
        } catch {
          problems.push(k)
        }
      }
      if (problems.length) {
        failures.push(`${clean.name}: ${problems.join(', ')} differ\n    td.inputValue=${clip(span.attributes['td.inputValue'])} merges=${span.attributes['td.inputSchemaMerges']}\n    td.outputValue=${clip(String(span.attributes['td.outputValue']))} merges=${span.attributes['td.outputSchemaMerges']}`)
      }
    }
    assert.equal(failures.length, 0, `${failures.length} of ${E2E_SPANS} spans differ from the reference:\n${failures.join('\n')}`)
  })
}
