'use strict'
// Safe files: trace ids that would form a path never leave the recordings directory (rejected
// per span, the whole tree checked after); after `kill -9` in the middle of continuous writes
// every complete line parses (and the replay loader skips and reports a torn tail); disk errors
// (directory replaced by a file, a full or read-only tmpfs) fail the spans and the export
// result, never the process, and leave no torn line behind.
//
// Concurrent appends to one trace file are covered in crates/offloop/tests/reliability.rs.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, execFileSync } = require('node:child_process')

const offloop = require('..')
const { OffloopExporter } = offloop
const { ROOT, tmpDir, readJsonl, readPbFiles, exportAsync } = require('./support/otel.js')
const { fakeSpan, traceIdOf, accountingError, rng, seedFromEnv } = require('./support/reliability.js')

const FAILED = 1

/** Every path under `dir` (relative), sorted. */
function tree(dir) {
  const out = []
  const walk = (d, rel) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const r = path.join(rel, e.name)
      out.push(r)
      if (e.isDirectory()) walk(path.join(d, e.name), r)
    }
  }
  walk(dir, '')
  return out.sort()
}

for (const format of ['jsonl', 'proto']) {
  test(`${format}: trace ids that would form a path are rejected per span and nothing leaves the directory`, async (t) => {
    const root = tmpDir(t, 'offloop-escape-')
    const dir = path.join(root, 'a', 'recordings')
    const canary = `offloop-canary-${process.pid}-${Date.now()}`
    const hostile = [
      `../${canary}`,
      `../../${canary}`,
      `../../../../../../../../../../../../tmp/${canary}`,
      `/tmp/${canary}`,
      `${os.tmpdir()}/${canary}`,
      `..\\..\\${canary}`,
      `C:\\${canary}`,
      `0af7651916cd43dd\u00008448eb211c80319c`,
      `0af7651916cd43dd/8448eb211c80319c`,
      `0af7651916cd43dd\\8448eb211c80319`,
      '..',
      '.',
      '',
      '0af7651916cd43dd8448eb211c80319c/..',
      '0af7651916cd43dd8448eb211c80319c\n',
      `${'0'.repeat(31)}/`,
      'a'.repeat(5000),
      '０af7651916cd43dd8448eb211c80319', // a full-width digit: 32 characters, 34 bytes
    ]
    const reports = []
    const exporter = new OffloopExporter({ directory: dir, format, onReport: (r) => reports.push(r) })
    t.after(() => exporter.shutdown())
    const spans = []
    hostile.forEach((traceId, i) => {
      spans.push(fakeSpan(2 * i, { traceId: traceIdOf(1000 + i) })) // a good span between each
      spans.push(fakeSpan(2 * i + 1, { traceId }))
    })
    const result = await exportAsync(exporter, spans)
    assert.equal(result.code, 0, 'bad ids are span errors, not an export failure')
    const errors = reports[0].errors
    assert.equal(errors.length, hostile.length, JSON.stringify(errors, null, 1))
    for (const e of errors) {
      assert.equal(e.index % 2, 1, 'only the hostile spans fail')
      assert.equal(e.stage, 'validate')
      assert.match(e.message, /^traceId: expected 32 lower-case hex characters, got "/)
    }
    // Only the good spans' trace files, directly in the recordings directory.
    const files = tree(root)
    const expected = hostile.length
    assert.deepEqual(files.slice(0, 2), ['a', path.join('a', 'recordings')])
    assert.equal(files.length, 2 + expected, files.join('\n'))
    for (const f of files.slice(2)) {
      assert.equal(path.dirname(f), path.join('a', 'recordings'))
      assert.match(path.basename(f), new RegExp(`_trace_[0-9a-f]{32}\\.${format === 'jsonl' ? 'jsonl' : 'pb'}$`))
    }
    for (const where of [root, path.join(root, 'a'), os.tmpdir(), '/tmp']) {
      assert.ok(!fs.readdirSync(where).some((n) => n.includes(canary)), `no canary file in ${where}`)
    }
    const written = format === 'jsonl' ? readJsonl(dir).length : readPbFiles(dir).reduce((n, f) => n + f.messages.length, 0)
    assert.equal(written, hostile.length)
  })
}

// A child process writing continuously (large lines, a few traces, two workers) is killed with
// SIGKILL at a random moment once it has written something.
const WRITER = `
const { OffloopExporter } = require(${JSON.stringify(ROOT)});
const { fakeSpan, traceIdOf } = require(${JSON.stringify(require.resolve('./support/reliability.js'))});
const dir = process.argv[1];
const big = JSON.stringify({ rows: Array.from({ length: 2000 }, (_, i) => ({ id: i, v: 'x'.repeat(40) })) });
const exporter = new OffloopExporter({ directory: dir, workers: 2, onReport: () => {} });
let n = 0;
(async () => {
  process.stdout.write('started\\n');
  for (;;) {
    const spans = Array.from({ length: 32 }, () => { const i = n++; return fakeSpan(i, { traceId: traceIdOf(i % 3), output: big }); });
    await new Promise((resolve) => exporter.export(spans, resolve));
  }
})();
`

function bytesIn(dir) {
  if (!fs.existsSync(dir)) return 0
  return fs.readdirSync(dir).reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0)
}

/** Splits a file into complete lines and an unterminated tail ('' if none). */
function splitLines(text) {
  const end = text.lastIndexOf('\n') + 1
  return { lines: text.slice(0, end).split('\n').slice(0, -1), tail: text.slice(end) }
}

test('kill -9 in the middle of continuous writes: every complete line parses; the replay loader reports a torn tail', async (t) => {
  const seed = seedFromEnv()
  const r = rng(seed)
  const KILLS = 3
  let complete = 0
  let torn = 0
  for (let k = 0; k < KILLS; k++) {
    const dir = tmpDir(t, 'offloop-kill-')
    const child = spawn(process.execPath, ['-e', WRITER, dir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
    // Wait until it has written at least 1 MB, then a random extra 0-300 ms, then SIGKILL.
    const deadline = Date.now() + 30_000
    while (bytesIn(dir) < 1_000_000 && Date.now() < deadline && child.exitCode === null) await new Promise((res) => setTimeout(res, 5))
    await new Promise((res) => setTimeout(res, r.int(300)))
    child.kill('SIGKILL')
    const { signal } = await exited
    assert.equal(signal, 'SIGKILL', `the writer was still running when killed (seed ${seed}); stderr: ${stderr}`)

    let linesHere = 0
    const tornFiles = []
    for (const file of fs.readdirSync(dir)) {
      const { lines, tail } = splitLines(fs.readFileSync(path.join(dir, file), 'utf8'))
      lines.forEach((l, i) => {
        assert.doesNotThrow(() => JSON.parse(l), `${file}:${i + 1} is a complete line that does not parse (seed ${seed})`)
      })
      linesHere += lines.length
      if (tail) tornFiles.push(file)
    }
    assert.ok(linesHere > 0, 'something was written before the kill')
    complete += linesHere
    torn += tornFiles.length

    if (typeof offloop.Recording === 'function' && typeof offloop.Recording.open === 'function') {
      // The kill rarely lands inside write(2) itself; make sure one file has a torn tail.
      if (tornFiles.length === 0) {
        const file = fs.readdirSync(dir)[0]
        fs.appendFileSync(path.join(dir, file), '{"traceId":"00000000000000000000000000000001","spanId":"00000000000')
        tornFiles.push(file)
      }
      const rec = await offloop.Recording.open(dir)
      const s = rec.stats()
      assert.equal(s.spans, linesHere, 'the loader loads every complete line')
      assert.equal(s.skippedLines, tornFiles.length, 'and skips exactly the torn tails')
      for (const f of tornFiles) {
        assert.ok(s.skipped.some((x) => x.file === f && /torn/.test(x.reason)), `the torn tail of ${f} is reported: ${JSON.stringify(s.skipped)}`)
      }
    }
  }
  t.diagnostic(`OFFLOOP_SEED=${seed}: ${KILLS} kills, ${complete} complete lines parsed, ${torn} torn tails left by the kills`)
})

test('a recordings directory replaced by a file: spans fail with the reason, the export is FAILED, the process lives', async (t) => {
  const root = tmpDir(t)
  const dir = path.join(root, 'rec')
  const exporter = new OffloopExporter({ directory: dir, onReport: () => {} })
  t.after(() => exporter.shutdown())
  fs.rmSync(dir, { recursive: true })
  fs.writeFileSync(dir, 'not a directory')
  const spans = Array.from({ length: 5 }, (_, i) => fakeSpan(i))
  const result = await exportAsync(exporter, spans)
  assert.equal(result.code, FAILED)
  assert.match(result.error.message, /5 of 5 spans failed: span \w+ \[sink\]: cannot open .*rec\//)
  assert.equal(result.error.report.failed, 5)
  const s = exporter.stats()
  assert.equal(s.spansFailed, 5)
  assert.equal(accountingError(s), undefined)
  // Once the directory is back, the next batch is written.
  fs.rmSync(dir)
  fs.mkdirSync(dir)
  assert.equal((await exportAsync(exporter, [fakeSpan(100)])).code, 0)
  assert.equal(readJsonl(dir).length, 1)
})

/** Mounts a tmpfs of `size` at a fresh directory; undefined (with the reason) if not allowed. */
function mountTmpfs(t, size) {
  const mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'offloop-tmpfs-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', mnt], { stdio: 'pipe' })
  } catch (e) {
    fs.rmdirSync(mnt)
    return { skip: `cannot mount a tmpfs here (${String(e.stderr || e.message).trim()})` }
  }
  t.after(() => {
    try {
      execFileSync('umount', [mnt], { stdio: 'pipe' })
    } catch {}
    fs.rmSync(mnt, { recursive: true, force: true })
  })
  return { mnt }
}

test('disk full (a 1 MiB tmpfs): spans fail with ENOSPC, the export is FAILED, no torn line is left, writing resumes once there is room', async (t) => {
  const { mnt, skip } = mountTmpfs(t, '1m')
  if (skip) return t.skip(skip)
  const dir = path.join(mnt, 'rec')
  const reports = []
  const exporter = new OffloopExporter({ directory: dir, onReport: (r) => reports.push(r) })
  t.after(() => exporter.shutdown())
  const big = JSON.stringify({ rows: Array.from({ length: 300 }, (_, i) => ({ id: i, v: 'y'.repeat(50) })) }) // ~20 KB lines
  let n = 0
  let failedResult
  // One trace: each batch appends to the same file until the disk is full.
  for (let b = 0; b < 40 && !failedResult; b++) {
    const spans = Array.from({ length: 8 }, () => fakeSpan(n++, { traceId: traceIdOf(0), output: big }))
    const result = await exportAsync(exporter, spans)
    if (result.code === FAILED) failedResult = result
  }
  assert.ok(failedResult, 'the disk filled up')
  assert.match(failedResult.error.message, /\[sink\]: cannot write .*No space left on device/)
  const s = exporter.stats()
  assert.ok(s.spansFailed > 0)
  assert.equal(accountingError(s), undefined)
  // A failed append leaves no partial line behind: the file still ends with a newline.
  const files = fs.readdirSync(dir)
  for (const f of files) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8')
    assert.ok(text.endsWith('\n'), `${f} ends with a torn line after ENOSPC`)
  }
  const before = readJsonl(dir).length
  assert.equal(before, s.spansWritten, 'every span counted written is on disk, whole')
  // Free the space (the operator moves old recordings away), write again: appended to the same
  // trace file, every line still parses.
  for (const f of files) fs.truncateSync(path.join(dir, f), 0)
  const again = await exportAsync(exporter, [fakeSpan(n++, { traceId: traceIdOf(0) })])
  assert.equal(again.code, 0, again.error && again.error.message)
  assert.equal(readJsonl(dir).length, 1)
})

test('read-only file system: spans fail with EROFS and the export is FAILED', async (t) => {
  const { mnt, skip } = mountTmpfs(t, '1m')
  if (skip) return t.skip(skip)
  const dir = path.join(mnt, 'rec')
  const exporter = new OffloopExporter({ directory: dir, onReport: () => {} })
  t.after(() => exporter.shutdown())
  execFileSync('mount', ['-o', 'remount,ro', mnt], { stdio: 'pipe' })
  const result = await exportAsync(exporter, [fakeSpan(0), fakeSpan(1)])
  assert.equal(result.code, FAILED)
  assert.match(result.error.message, /Read-only file system/)
  assert.equal(exporter.stats().spansFailed, 2)
  execFileSync('mount', ['-o', 'remount,rw', mnt], { stdio: 'pipe' })
  assert.equal((await exportAsync(exporter, [fakeSpan(2)])).code, 0)
})
