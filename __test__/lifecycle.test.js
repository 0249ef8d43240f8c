'use strict'
// Lifecycle: the process exits by itself with live idle exporters/processors; shutdown and
// forceFlush semantics.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')

const { OffloopExporter, OffloopSpanProcessor } = require('..')
const { ROOT, SDKS, makeProvider, tmpDir, countLines, pgAttributes, createSpans, makeReadableSpans, exportAsync } = require('./support/otel.js')

const DEADLINE_MS = 10000
const FAILED = 1

/**
 * Runs `code` in `node -e`. Resolves { code, signal, timedOut, stdout, stderr }; a child still
 * alive at the deadline is killed (that is the failure being tested for).
 */
function runChild(code) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', code], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    let timedOut = false
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      timedOut = true
      child.kill('SIGKILL')
    }, DEADLINE_MS)
    child.on('error', (e) => {
      clearTimeout(timer)
      reject(e)
    })
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, timedOut, stdout, stderr })
    })
  })
}

const PRELUDE = `
const path = require('node:path');
const { OffloopExporter, OffloopSpanProcessor } = require(${JSON.stringify(ROOT)});
const otel = require(${JSON.stringify(require.resolve('./support/otel.js'))});
const dir = require('node:fs').mkdtempSync(path.join(require('node:os').tmpdir(), 'offloop-child-'));
process.on('exit', () => require('node:fs').rmSync(dir, { recursive: true, force: true }));
`

const EXIT_CASES = {
  'an idle OffloopExporter that never exported': `
    globalThis.keep = new OffloopExporter({ directory: dir });
    console.log('ready');`,
  'an OffloopExporter that exported and flushed, then idles': `
    const e = new OffloopExporter({ directory: dir, workers: 2 });
    globalThis.keep = e;
    const spans = otel.makeReadableSpans(otel.SDKS[0], 20, otel.pgAttributes);
    e.export(spans, async (r) => {
      await e.forceFlush();
      console.log('ready', r.code, otel.countLines(dir));
    });`,
  'an OffloopExporter with onBatch that exported, then idles': `
    const e = new OffloopExporter({ onBatch: () => {} });
    globalThis.keep = e;
    e.export(otel.makeReadableSpans(otel.SDKS[0], 5, otel.pgAttributes), (r) => console.log('ready', r.code, e.stats().spansWritten));`,
  'an idle OffloopSpanProcessor that never saw a span': `
    globalThis.keep = new OffloopSpanProcessor({ directory: dir });
    console.log('ready');`,
  'an OffloopSpanProcessor in a provider with flushed spans, then idle': `
    const p = new OffloopSpanProcessor({ directory: dir, onBatch: () => {} });
    const provider = otel.makeProvider(otel.SDKS[0], [p]);
    globalThis.keep = provider;
    otel.createSpans(provider.getTracer('tusk-drift-sdk'), 20, otel.pgAttributes);
    provider.forceFlush().then(() => console.log('ready', otel.countLines(dir)));`,
}

const EXPECTED_READY = {
  'an OffloopExporter that exported and flushed, then idles': 'ready 0 20',
  'an OffloopExporter with onBatch that exported, then idles': 'ready 0 5',
  'an OffloopSpanProcessor in a provider with flushed spans, then idle': 'ready 20',
}

test('the process exits by itself with live idle exporters and processors', async (t) => {
  const names = Object.keys(EXIT_CASES)
  const results = await Promise.all(names.map((n) => runChild(PRELUDE + EXIT_CASES[n])))
  const failures = []
  names.forEach((name, i) => {
    const r = results[i]
    const ready = EXPECTED_READY[name] || 'ready'
    if (r.timedOut) failures.push(`${name}: still running after ${DEADLINE_MS} ms (killed)`)
    else if (r.code !== 0) failures.push(`${name}: exit code ${r.code} signal ${r.signal}\n${r.stderr}`)
    else if (r.stdout.trim() !== ready) failures.push(`${name}: printed ${JSON.stringify(r.stdout)} (expected ${JSON.stringify(ready)}); stderr: ${r.stderr}`)
  })
  assert.deepEqual(failures, [])
})

test('export() after shutdown() returns FAILED with a clear message and records nothing', async (t) => {
  const dir = tmpDir(t)
  const exporter = new OffloopExporter({ directory: dir })
  await exporter.shutdown()
  const spans = makeReadableSpans(SDKS[0], 3, pgAttributes)
  const result = await exportAsync(exporter, spans)
  assert.equal(result.code, FAILED)
  assert.ok(result.error instanceof Error)
  assert.match(result.error.message, /shut ?down/i)
  assert.match(result.error.message, /offloop/)
  assert.equal(countLines(dir), 0)
})

test('shutdown() twice is safe (exporter and processor)', async (t) => {
  const dir = tmpDir(t)
  const exporter = new OffloopExporter({ directory: dir })
  const spans = makeReadableSpans(SDKS[0], 10, pgAttributes)
  const first = await exportAsync(exporter, spans)
  assert.equal(first.code, 0)
  await exporter.shutdown()
  await exporter.shutdown()
  await Promise.all([exporter.shutdown(), exporter.forceFlush()])
  assert.equal(countLines(dir), 10)
  const s = exporter.stats()
  assert.equal(s.spansWritten, 10)
  assert.equal(s.spansInFlight, 0)
  const after = await exportAsync(exporter, spans)
  assert.equal(after.code, FAILED, 'still refusing after the second shutdown')

  const pdir = tmpDir(t)
  const processor = new OffloopSpanProcessor({ directory: pdir })
  const provider = makeProvider(SDKS[0], [processor])
  createSpans(provider.getTracer('tusk-drift-sdk'), 10, pgAttributes)
  await processor.shutdown()
  await processor.shutdown()
  await provider.shutdown() // calls processor.shutdown() a third time
  assert.equal(countLines(pdir), 10, 'processor shutdown flushed the queued spans')
  const ps = processor.stats()
  assert.equal(ps.spansWritten, 10)
  assert.equal(ps.spansInFlight, 0)
})

test('forceFlush() resolves only after every span exported before it is on disk', async (t) => {
  const dir = tmpDir(t)
  const exporter = new OffloopExporter({ directory: dir, workers: 2 })
  t.after(() => exporter.shutdown())
  const batches = [0, 1, 2, 3].map(() => makeReadableSpans(SDKS[0], 512, (i) => pgAttributes(i, { rows: 20 }), { perTrace: 64 }))
  const results = []
  for (const b of batches) exporter.export(b, (r) => results.push(r))
  await exporter.forceFlush()
  const onDisk = countLines(dir)
  const s = exporter.stats()
  assert.equal(onDisk, 4 * 512, `lines on disk when forceFlush() resolved (stats then: ${JSON.stringify(s)})`)
  assert.equal(s.spansInFlight, 0)
  assert.equal(s.spansWritten, 4 * 512)
})

test('shutdown() flushes spans exported before it', async (t) => {
  const dir = tmpDir(t)
  const exporter = new OffloopExporter({ directory: dir })
  const spans = makeReadableSpans(SDKS[0], 512, (i) => pgAttributes(i, { rows: 20 }), { perTrace: 64 })
  const result = new Promise((resolve) => exporter.export(spans, resolve))
  await exporter.shutdown()
  const onDisk = countLines(dir)
  const r = await result
  assert.equal(r.code, 0, `the export handed over before shutdown() succeeds: ${r.error && r.error.message}`)
  assert.equal(onDisk, 512, 'lines on disk when shutdown() resolved')
})
