'use strict'
// Clean lifecycle: the addon in 4 worker_threads at once and through 100 worker load / use /
// terminate cycles (some terminated with native work in flight), a Rust panic surfacing as a JS
// error in the main thread and in a worker, and throwing JS callbacks (onBatch, onReport)
// reported rather than fatal. Anything that could abort runs in a child process, so an abort or
// a crash is a failed assertion on its exit, not a dead test runner.
//
// The process exiting by itself with live idle exporters is in lifecycle.test.js.

const test = require('node:test')
const assert = require('node:assert/strict')

const { OffloopExporter, OffloopSpanProcessor } = require('..')
const { ROOT, tmpDir, countLines, exportAsync } = require('./support/otel.js')
const { fakeSpan, runNodeCode, accountingError } = require('./support/reliability.js')

const FAILED = 1
const WORKER = require.resolve('./support/lifecycle-worker.js')

const DRIVER = `
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const ROOT = ${JSON.stringify(ROOT)};
const WORKER = ${JSON.stringify(WORKER)};
const base = fs.mkdtempSync(path.join(os.tmpdir(), 'offloop-workers-'));
process.on('exit', () => fs.rmSync(base, { recursive: true, force: true }));
const CYCLES = Number(process.env.CYCLES);
const MODES = ['use', 'midflight', 'queued', 'panic', 'idle'];

function start(mode, id) {
  const dir = path.join(base, 'w' + id);
  const worker = new Worker(WORKER, { workerData: { root: ROOT, dir, mode, id } });
  const first = new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  return { worker, first, exited, dir };
}

function checkMessage(mode, m) {
  if (m.error) throw new Error(mode + ': ' + m.error);
  if (mode === 'use') {
    if (m.code !== 0 || m.sinkCode !== 0) throw new Error('use: export failed ' + JSON.stringify(m));
    if (m.lines !== 64 + 32) throw new Error('use: ' + m.lines + ' lines written, expected 96');
    if (!(m.delivered > 0)) throw new Error('use: onBatch got nothing');
  } else if (mode === 'panic') {
    if (!m.sync || !m.sync.isError || !/offloop test panic \\(sync\\)/.test(m.sync.message)) throw new Error('panic: sync ' + JSON.stringify(m.sync));
    if (m.pool.failed !== 1 || !/internal error.*offloop test panic \\(pool\\)/.test(m.pool.message)) throw new Error('panic: pool ' + JSON.stringify(m.pool));
  }
}

(async () => {
  const out = { concurrent: 0, concurrentExitedByThemselves: 0, cycles: 0, byMode: {} };
  // 4 workers at once, each using the addon, then left alone with live objects: they must exit
  // by themselves.
  const four = [0, 1, 2, 3].map((i) => start('use', i));
  for (const w of four) checkMessage('use', await w.first);
  out.concurrent = four.length;
  const codes = await Promise.race([
    Promise.all(four.map((w) => w.exited)),
    new Promise((resolve) => setTimeout(() => resolve('stuck'), 10000)),
  ]);
  if (codes === 'stuck') throw new Error('a worker with idle exporters did not exit by itself within 10 s');
  if (codes.some((c) => c !== 0)) throw new Error('worker exit codes ' + codes);
  out.concurrentExitedByThemselves = codes.length;
  // Load / use / terminate cycles.
  for (let i = 0; i < CYCLES; i++) {
    const mode = MODES[i % MODES.length];
    const w = start(mode, 100 + i);
    checkMessage(mode, await w.first);
    await w.worker.terminate();
    await w.exited;
    out.cycles++;
    out.byMode[mode] = (out.byMode[mode] || 0) + 1;
  }
  // The main thread still has a working addon.
  const { OffloopExporter } = require(ROOT);
  const { fakeSpan } = require(${JSON.stringify(require.resolve('./support/reliability.js'))});
  const e = new OffloopExporter({ directory: path.join(base, 'main'), onReport: () => {} });
  const r = await new Promise((resolve) => e.export([fakeSpan(1), fakeSpan(2)], resolve));
  await e.shutdown();
  out.mainAfter = { code: r.code, written: e.stats().spansWritten };
  console.log(JSON.stringify(out));
})().catch((err) => { console.error(err && err.stack || err); process.exit(1); });
`

test('the addon in 4 worker_threads at once, then 100 worker load/use/terminate cycles (some mid-flight)', async (t) => {
  const r = await runNodeCode(DRIVER, { timeoutMs: 120_000, env: { CYCLES: '100' } })
  assert.ok(!r.timedOut, `the driver hung; stderr: ${r.stderr}`)
  assert.equal(r.signal, null, `the process died of ${r.signal} (an abort or a crash); stderr: ${r.stderr.slice(-2000)}`)
  assert.equal(r.code, 0, r.stderr.slice(-2000))
  const out = JSON.parse(r.stdout.trim().split('\n').pop())
  t.diagnostic(JSON.stringify(out))
  assert.equal(out.concurrent, 4)
  assert.equal(out.concurrentExitedByThemselves, 4)
  assert.equal(out.cycles, 100)
  assert.deepEqual(out.mainAfter, { code: 0, written: 2 })
})

const binding = require('../binding.js')

test('a Rust panic becomes a JS error (synchronous call) or per-batch error data (worker pool), never an abort', async () => {
  assert.throws(
    () => binding.__panicForTesting('sync'),
    (e) => e instanceof Error && /offloop test panic \(sync\)/.test(e.message),
  )
  const report = binding.__panicForTesting('pool')
  assert.equal(report.failed, 1)
  assert.match(report.errors[0].message, /^internal error while processing the batch: offloop test panic \(pool\)/)
  // Again in a fresh process that then goes on to export: exit code 0, no SIGABRT.
  const r = await runNodeCode(`
    const b = require(${JSON.stringify(ROOT + '/binding.js')});
    let n = 0;
    for (let i = 0; i < 20; i++) { try { b.__panicForTesting('sync') } catch (e) { n++ } b.__panicForTesting('pool') }
    const { OffloopExporter } = require(${JSON.stringify(ROOT)});
    const { fakeSpan } = require(${JSON.stringify(require.resolve('./support/reliability.js'))});
    const e = new OffloopExporter({ onBatch: () => {} });
    e.export([fakeSpan(1)], (res) => console.log(n, res.code));
  `)
  assert.equal(r.signal, null, `died of ${r.signal}: ${r.stderr}`)
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout.trim(), '20 0')
})

// onBatch variants that fail: each must fail its batch's spans with the reason (exporter: a
// FAILED result naming onBatch; processor: counted failed), and the process goes on.
const THROWING_ON_BATCH = {
  'throws an Error': () => {
    throw new Error('sink exploded')
  },
  'rejects': () => Promise.reject(new Error('sink rejected')),
  'throws a string': () => {
    throw 'a bare string' // eslint-disable-line no-throw-literal
  },
  'throws undefined': () => {
    throw undefined // eslint-disable-line no-throw-literal
  },
  'rejects with null after a delay': () => new Promise((_, reject) => setTimeout(() => reject(null), 5)),
}

for (const [name, onBatch] of Object.entries(THROWING_ON_BATCH)) {
  test(`onBatch that ${name}: spans failed, FAILED result, not fatal`, async () => {
    const reports = []
    const exporter = new OffloopExporter({ onBatch, onReport: (r) => reports.push(r) })
    const spans = [fakeSpan(1), fakeSpan(2), fakeSpan(3)]
    const result = await exportAsync(exporter, spans)
    assert.equal(result.code, FAILED)
    assert.match(result.error.message, /3 of 3 spans failed: span \w+ \[sink\]: onBatch failed/)
    assert.equal(reports[0].failed, 3)
    assert.ok(reports[0].errors.every((e) => e.stage === 'sink' && /^onBatch failed/.test(e.message)))
    await exporter.forceFlush()
    const s = exporter.stats()
    assert.equal(s.spansFailed, 3)
    assert.equal(accountingError(s), undefined)
    await exporter.shutdown()

    const processor = new OffloopSpanProcessor({ onBatch, scheduledDelayMillis: 1 })
    for (const s of spans) processor.onEnd(s)
    await processor.forceFlush()
    const ps = processor.stats()
    assert.equal(ps.spansFailed, 3)
    assert.equal(ps.spansInFlight, 0)
    await processor.shutdown()
  })
}

test('onReport that throws: the export result still arrives, a warning names the problem', async (t) => {
  const dir = tmpDir(t)
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  t.after(() => process.off('warning', onWarning))
  const exporter = new OffloopExporter({
    directory: dir,
    onReport: () => {
      throw new Error('report handler broke')
    },
  })
  const result = await exportAsync(exporter, [fakeSpan(1), fakeSpan(2)])
  assert.equal(result.code, 0)
  await new Promise((resolve) => setImmediate(resolve))
  assert.ok(warnings.some((w) => /onReport threw: report handler broke/.test(w.message)), warnings.map((w) => w.message).join('; '))
  await exporter.shutdown()
  assert.equal(countLines(dir), 2)
})

test('throwing callbacks in a child process: exit code 0, no uncaught exception', async () => {
  const r = await runNodeCode(`
    const { OffloopExporter, OffloopSpanProcessor } = require(${JSON.stringify(ROOT)});
    const { fakeSpan } = require(${JSON.stringify(require.resolve('./support/reliability.js'))});
    const e = new OffloopExporter({ onBatch: () => { throw new Error('x') }, onReport: () => { throw new Error('y') } });
    const p = new OffloopSpanProcessor({ onBatch: () => Promise.reject(new Error('z')), scheduledDelayMillis: 1 });
    process.on('warning', () => {});
    e.export([fakeSpan(1)], async (r) => {
      p.onEnd(fakeSpan(2));
      await p.forceFlush();
      await Promise.all([e.shutdown(), p.shutdown()]);
      console.log(r.code, e.stats().spansFailed, p.stats().spansFailed);
    });
  `)
  assert.equal(r.signal, null, r.stderr)
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout.trim(), `${FAILED} 1 1`)
})

test('an object that is not a readable span: onEnd warns instead of throwing into span.end(); export() fails that span alone', async (t) => {
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  t.after(() => process.off('warning', onWarning))
  const broken = {
    spanContext() {
      throw new Error('no context here')
    },
  }
  const processor = new OffloopSpanProcessor({ onBatch: () => {} })
  assert.doesNotThrow(() => processor.onEnd(broken))
  assert.doesNotThrow(() => processor.onEnd(null))
  processor.onEnd(fakeSpan(1))
  await processor.shutdown()
  assert.equal(processor.stats().spansWritten, 1, 'the readable span is still recorded')
  await new Promise((resolve) => setImmediate(resolve))
  assert.ok(warnings.some((w) => /onEnd could not read a span.*no context here/.test(w.message)), warnings.map((w) => w.message).join('; '))

  const reports = []
  const exporter = new OffloopExporter({ onBatch: () => {}, onReport: (r) => reports.push(r) })
  const result = await exportAsync(exporter, [fakeSpan(2), broken])
  assert.equal(result.code, 0, 'the readable span is written; the batch does not fail')
  assert.equal(reports[0].written, 1)
  assert.equal(reports[0].failed, 1)
  assert.equal(reports[0].errors[0].index, 1)
  assert.match(reports[0].errors[0].message, /span object could not be read: no context here/)
  assert.equal((await exportAsync(exporter, [fakeSpan(3)])).code, 0, 'the exporter goes on')
  await exporter.shutdown()
})
