'use strict'
// Smoke test of the Node benchmarks (not a benchmark: no timing is asserted). The bench
// scripts start, run every contender and mode briefly (`--smoke`: 10 rows, one batch; a
// second of load per app mode) and write their result files.

const test = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')

function run(args) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { cwd: ROOT, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(Object.assign(err, { message: `${err.message}\n--- stdout\n${stdout}\n--- stderr\n${stderr}` }))
      else resolve({ stdout, stderr })
    })
  })
}

test('npm run bench -- --smoke writes the export, app-impact and summary results', { timeout: 120_000 }, async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'offloop-bench-smoke-'))
  try {
    const { stdout } = await run(['benches/run.js', '--smoke', `--out=${out}`])
    assert.match(stdout, /Targets \(issue 5/)

    const exp = JSON.parse(fs.readFileSync(path.join(out, 'export.json'), 'utf8'))
    const { CONTENDERS } = require('../benches/lib/contenders.js')
    assert.deepEqual(exp.results.map((r) => r.name).sort(), Object.keys(CONTENDERS).sort())
    for (const r of exp.results) {
      assert.equal(r.rows, 10)
      assert.equal(r.written + r.dropped, r.expectedWritten, `${r.name}: ${r.failures.join('; ')}`)
      assert.ok(r.spansPerSec > 0 && r.wallMs > 0, r.name)
      assert.ok(Number.isFinite(r.loopMaxMs) && Number.isFinite(r.probeMaxGapMs) && Array.isArray(r.stalls), r.name)
      assert.ok(r.mainCpuPer10k === null || r.mainCpuPer10k >= 0, r.name)
    }
    assert.match(fs.readFileSync(path.join(out, 'export.md'), 'utf8'), /\| offloop-blake3 \|/)
    assert.match(fs.readFileSync(path.join(out, 'event-loop-10.svg'), 'utf8'), /^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"[\s\S]*<\/svg>\n$/)

    const app = JSON.parse(fs.readFileSync(path.join(out, 'app-impact.json'), 'utf8'))
    assert.deepEqual(app.results.map((r) => r.mode), ['off', 'offloop-processor', 'tusk-js-0.1.27', 'otlp-http-json'])
    for (const r of app.results) {
      assert.ok(r.requests > 0 && r.errors === 0, `${r.mode}: ${r.requests} requests, ${r.errors} errors`)
      assert.ok(r.spansEnded >= r.requests * 21, r.mode)
    }

    const summary = JSON.parse(fs.readFileSync(path.join(out, 'summary.json'), 'utf8'))
    assert.ok(summary.targets.length > 0)
    assert.deepEqual(summary.problems, [])
  } finally {
    fs.rmSync(out, { recursive: true, force: true })
  }
})

test('npm run bench:seed starts and prints its table', { timeout: 60_000 }, async () => {
  const { stdout } = await run(['benches/seed-workload.js', '--batches=1', '--only=offloop-blake3'])
  assert.match(stdout, /offloop-blake3 +[\d,]+ +[\d.]+/)
})

test('the workload dump the criterion benches read is deterministic JSON', async () => {
  const a = await run(['benches/lib/workload.js', '--dump', '--rows=3', '--queries=2'])
  const b = await run(['benches/lib/workload.js', '--dump', '--rows=3', '--queries=2'])
  assert.equal(a.stdout, b.stdout)
  const { spans } = JSON.parse(a.stdout)
  assert.equal(spans.length, 3) // 2 queries + the root
  assert.deepEqual(spans.map((s) => s.kind), [2, 2, 1])
  assert.equal(JSON.parse(spans[0].attributes['td.outputValue']).rows.length, 3)
})
