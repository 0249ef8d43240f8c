'use strict'
// Helpers shared by the reliability suites (__test__/reliability-*.test.js) and their long
// variants (scripts/shutdown-soak.js, scripts/rss-soak.js): hand-made spans (any shape, not
// only what an SDK would build), child processes, and readers that count span ids on disk.

const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')

// Not taken from otel.js: this module is loaded in worker threads, which should not pay for
// loading both OpenTelemetry SDKs.
const ROOT = path.resolve(__dirname, '..', '..')

const hex = (n, width) => n.toString(16).padStart(width, '0')
const traceIdOf = (n) => hex(n + 1, 32)
const spanIdOf = (n) => hex(n + 1, 16)

/**
 * A ReadableSpan-shaped object (what the exporter reads; see index.d.ts ReadableSpanLike).
 * `over` replaces any field, including `traceId`/`spanId`/`parentSpanId`; `attributes`
 * replaces the default attributes entirely.
 */
function fakeSpan(n, over = {}) {
  const traceId = 'traceId' in over ? over.traceId : traceIdOf(Math.floor(n / 8))
  const spanId = 'spanId' in over ? over.spanId : spanIdOf(n)
  return {
    name: over.name ?? `span ${n}`,
    kind: 'kind' in over ? over.kind : 2,
    spanContext: () => ({ traceId, spanId }),
    parentSpanId: over.parentSpanId ?? '',
    startTime: over.startTime ?? [1_700_000_000 + n, 123],
    duration: over.duration ?? [0, 5_000_000],
    status: 'status' in over ? over.status : { code: 1 },
    attributes: over.attributes ?? {
      'td.packageName': 'pg',
      'td.inputValue': JSON.stringify({ text: 'SELECT $1', values: [n] }),
      'td.outputValue': over.output ?? JSON.stringify({ rowCount: 1, rows: [{ id: n }] }),
    },
    instrumentationScope: { name: 'tusk-drift-sdk' },
  }
}

/**
 * Runs `node [nodeArgs] file args`. Resolves { code, signal, timedOut, stdout, stderr }; a child
 * alive after `timeoutMs` is killed (and reported as timedOut).
 */
function runNode(file, args = [], { timeoutMs = 60_000, nodeArgs = [], env, input } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, file, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    let timedOut = false
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    if (input !== undefined) child.stdin.end(input)
    const timer = setTimeout(() => {
      timedOut = true
      child.kill('SIGKILL')
    }, timeoutMs)
    child.on('error', (e) => {
      clearTimeout(timer)
      reject(e)
    })
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, timedOut, stdout, stderr, pid: child.pid })
    })
  })
}

/** `node -e code` with runNode's options. */
function runNodeCode(code, options) {
  return runNode('-e', [code], options)
}

/**
 * Span ids in the JSONL files of `dir`: Map id → times seen. Throws on a line that does not
 * parse or a file that ends mid-line (so "exactly once" is checked over whole lines only).
 * `{ writing: true }`: the files may be being appended to right now, so a file's unterminated
 * tail is an append in progress and is not counted.
 */
function spanIdCounts(dir, { writing = false } = {}) {
  const counts = new Map()
  if (!fs.existsSync(dir)) return counts
  for (const file of fs.readdirSync(dir)) {
    let text = fs.readFileSync(path.join(dir, file), 'utf8')
    if (text.length > 0 && !text.endsWith('\n')) {
      if (!writing) throw new Error(`${file} ends mid-line`)
      text = text.slice(0, text.lastIndexOf('\n') + 1)
    }
    for (const line of text.split('\n')) {
      if (line === '') continue
      let id
      try {
        id = JSON.parse(line).spanId
      } catch (e) {
        throw new Error(`${file}: a line does not parse: ${e.message}`)
      }
      counts.set(id, (counts.get(id) || 0) + 1)
    }
  }
  return counts
}

/** Why `s` breaks `spansReceived === written + dropped + failed + inFlight`, or undefined. */
function accountingError(s) {
  const sum = s.spansWritten + s.spansDropped + s.spansFailed + s.spansInFlight
  if (s.spansReceived !== sum) {
    return `spansReceived ${s.spansReceived} !== written ${s.spansWritten} + dropped ${s.spansDropped} + failed ${s.spansFailed} + inFlight ${s.spansInFlight} (= ${sum})`
  }
  if (s.spansInFlight < 0 || s.bytesQueued < 0) return `negative in-flight counters: ${JSON.stringify(s)}`
  return undefined
}

/** mulberry32: a small seeded PRNG (float in [0, 1)). */
function rng(seed) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  next.int = (n) => Math.floor(next() * n)
  next.pick = (xs) => xs[next.int(xs.length)]
  return next
}

/** The seed for a randomized test: OFFLOOP_SEED if set, else random (print it on failure). */
function seedFromEnv() {
  const s = Number(process.env.OFFLOOP_SEED)
  return Number.isInteger(s) ? s : Math.floor(Math.random() * 2 ** 31)
}

module.exports = { traceIdOf, spanIdOf, fakeSpan, runNode, runNodeCode, spanIdCounts, accountingError, rng, seedFromEnv }
