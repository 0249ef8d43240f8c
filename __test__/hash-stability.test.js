'use strict'
// Hash stability: two independent record runs of the same span content (different process,
// SDK major, span processor, worker count, and therefore different trace/span ids and batch
// boundaries) give identical value and schema hashes, for blake3 (default) and sha256.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')

const { hashPayload } = require('..')
const { tmpDir, readJsonl } = require('./support/otel.js')
const { recordRun, contentAttributes, COUNT } = require('./support/record-run.js')

const execFileAsync = promisify(execFile)
const RUN_SCRIPT = path.join(__dirname, 'support', 'record-run.js')
const HASH_KEYS = ['inputValueHash', 'outputValueHash', 'inputSchemaHash', 'outputSchemaHash']

/** name → { hashes…, inputSchema, outputSchema, spanId } for every line of a run. */
function byName(dir) {
  const out = new Map()
  for (const { line } of readJsonl(dir)) {
    assert.ok(!out.has(line.name), `name ${line.name} recorded once`)
    out.set(line.name, line)
  }
  return out
}

const runs = new Map() // algorithm → [runA, runB]

async function twoRuns(t, hashAlgorithm) {
  if (runs.has(hashAlgorithm)) return runs.get(hashAlgorithm)
  const dirA = tmpDir(t)
  const dirB = tmpDir(t)
  // Run A: this process, sdk-trace-base 2.x, BatchSpanProcessor, 1 worker.
  const statsA = await recordRun({ directory: dirA, hashAlgorithm, sdk: 0, processor: 'BatchSpanProcessor', workers: 1 })
  // Run B: a child process, sdk-trace-base 1.x, SimpleSpanProcessor (one batch per span), 2 workers.
  const { stdout } = await execFileAsync(process.execPath, [
    RUN_SCRIPT,
    JSON.stringify({ directory: dirB, hashAlgorithm, sdk: 1, processor: 'SimpleSpanProcessor', workers: 2 }),
  ])
  const statsB = JSON.parse(stdout)
  for (const [label, s] of [['run A', statsA], ['run B', statsB]]) {
    assert.equal(s.spansWritten, COUNT, `${label} wrote every span: ${JSON.stringify(s)}`)
  }
  const result = [byName(dirA), byName(dirB)]
  runs.set(hashAlgorithm, result)
  return result
}

for (const hashAlgorithm of ['blake3', 'sha256']) {
  test(`${hashAlgorithm}: two independent record runs of the same content give identical hashes`, async (t) => {
    const [a, b] = await twoRuns(t, hashAlgorithm)
    assert.equal(a.size, COUNT)
    assert.equal(b.size, COUNT)
    const mismatches = []
    let sameIds = 0
    for (const [name, la] of a) {
      const lb = b.get(name)
      assert.ok(lb, `run B recorded ${name}`)
      if (la.spanId === lb.spanId) sameIds++
      for (const k of HASH_KEYS) if (la[k] !== lb[k]) mismatches.push(`${name} ${k}: ${la[k]} vs ${lb[k]}`)
      for (const k of ['inputSchema', 'outputSchema']) {
        try {
          assert.deepEqual(lb[k], la[k])
        } catch {
          mismatches.push(`${name} ${k} differs`)
        }
      }
    }
    assert.equal(sameIds, 0, 'the runs are independent (different span ids)')
    assert.deepEqual(mismatches, [])
    // The content is varied: not everything hashes alike.
    assert.ok(new Set([...a.values()].map((l) => l.inputValueHash)).size > COUNT / 2, 'distinct contents give distinct hashes')
  })
}

test('hashAlgorithm selects the digest: blake3 and sha256 runs differ; sha256 equals hashPayload', async (t) => {
  const [blake] = await twoRuns(t, 'blake3')
  const [sha] = await twoRuns(t, 'sha256')
  const attrs = contentAttributes()
  for (const [name, ls] of sha) {
    const lb = blake.get(name)
    for (const k of HASH_KEYS) assert.notEqual(lb[k], ls[k], `${name} ${k}: blake3 and sha256 differ`)
    const a = attrs.find((x) => x['td.name'] === name)
    assert.ok(a, `content for ${name}`)
    for (const [side, algo, line] of [['input', 'sha256', ls], ['input', 'blake3', lb], ['output', 'sha256', ls], ['output', 'blake3', lb]]) {
      const cap = side === 'input' ? 'Input' : 'Output'
      const r = hashPayload(a[`td.${side}Value`], {
        hashAlgorithm: algo,
        schemaMerges: a[`td.${side}SchemaMerges`] ?? null,
      })
      assert.equal(line[`${side}ValueHash`], r.valueHash, `${name} ${side}ValueHash (${algo}) equals hashPayload`)
      assert.equal(line[`${side}SchemaHash`], r.schemaHash, `${name} ${side}SchemaHash (${algo}) equals hashPayload`)
      assert.deepEqual(line[`${side}Schema`], r.schema, `${name} ${cap} schema equals hashPayload's`)
    }
  }
})
