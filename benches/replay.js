'use strict'
// Replay benchmark (`npm run bench:replay`, after `npm run build`): records a recording of
// 100k small spans through the real exporter, then measures
//   - Recording.open load time, and that the JS thread stays free meanwhile (a setImmediate
//     counter and the longest gap between its ticks);
//   - findMock latency per hash level (p50/p99 of single synchronous calls, request objects
//     as an instrumentation passes them: inputValue and merges as objects).
// Targets: p99 <= 10 us per hash-level lookup, <= 1 s to load 100k spans.
//
//   node --expose-gc benches/replay.js [--spans=100000] [--samples=20000] [--hash=blake3|sha256] [--format=jsonl|proto]

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base')
const { trace, context, SpanKind, SpanStatusCode } = require('@opentelemetry/api')
const { OffloopExporter, Recording } = require('..')
const { SeededIdGenerator } = require('./lib/workload.js')

function parseArgs(argv) {
  const o = { spans: 100_000, samples: 10_000, hash: 'blake3', format: 'jsonl', perTrace: 100 }
  for (const arg of argv) {
    const [k, v] = arg.split('=')
    if (k === '--spans') o.spans = Number(v)
    else if (k === '--samples') o.samples = Number(v)
    else if (k === '--hash') o.hash = v
    else if (k === '--format') o.format = v
    else throw new Error(`unknown option ${arg}`)
  }
  return o
}

const PG_MERGES = { values: { matchImportance: 0 } }
const HTTP_MERGES = { body: { encoding: 1, decodedType: 1 }, headers: { matchImportance: 0 } }

/** Span i of trace t: mostly pg queries, every 5th an HTTP call with a base64 JSON body. */
function call(t, i) {
  if (i % 5 === 4) {
    const body = Buffer.from(JSON.stringify({ account: t, item: i, note: 'small' })).toString('base64')
    return {
      package: 'http',
      name: 'POST /v1/items',
      input: { method: 'POST', url: `http://api.test/v1/items?acct=${t}`, headers: { 'content-type': 'application/json', 'x-request-id': `r-${t}-${i}` }, body },
      merges: HTTP_MERGES,
      output: { statusCode: 201, headers: {}, body: Buffer.from('{"ok":true}').toString('base64') },
    }
  }
  return {
    package: 'pg',
    name: 'pg.query',
    input: { text: `SELECT id, name FROM t${i % 40} WHERE acct = $1 AND n = $2`, values: [t, i], clientType: 'pool' },
    merges: PG_MERGES,
    output: { command: 'SELECT', rowCount: 1, rows: [{ id: t * 1000 + i, name: `row ${i}` }] },
  }
}

function attributes(c) {
  return {
    'td.name': c.name,
    'td.packageName': c.package,
    'td.inputValue': JSON.stringify(c.input),
    'td.inputSchemaMerges': JSON.stringify(c.merges),
    'td.outputValue': JSON.stringify(c.output),
  }
}

async function makeRecording(dir, o) {
  const exporter = new OffloopExporter({ directory: dir, hashAlgorithm: o.hash, format: o.format })
  const processor = new BatchSpanProcessor(exporter, { maxQueueSize: 1 << 20, maxExportBatchSize: 4096, scheduledDelayMillis: 50 })
  const provider = new BasicTracerProvider({ spanProcessors: [processor], idGenerator: new SeededIdGenerator(7) })
  const tracer = provider.getTracer('tusk-drift-sdk')
  const traces = []
  const traceCount = Math.ceil(o.spans / o.perTrace)
  for (let t = 0; t < traceCount; t++) {
    const root = tracer.startSpan('GET /api', { kind: SpanKind.SERVER, attributes: attributes(call(t, -1)) }, context.active())
    const ctx = trace.setSpan(context.active(), root)
    for (let i = 0; i < o.perTrace - 1; i++) {
      const s = tracer.startSpan('call', { kind: SpanKind.CLIENT, attributes: attributes(call(t, i)) }, ctx)
      s.setStatus({ code: SpanStatusCode.OK })
      s.end()
    }
    root.setStatus({ code: SpanStatusCode.OK })
    root.end()
    traces.push(root.spanContext().traceId)
    if (t % 50 === 49) await processor.forceFlush()
  }
  await provider.shutdown()
  return { traces, stats: exporter.stats() }
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]

// Times findMock on requests[from, to) into ns (same positions); counts outcomes in levels.
function timeRange(rec, requests, from, to, ns, levels) {
  for (let i = from; i < to; i++) {
    const t0 = process.hrtime.bigint()
    const r = rec.findMock(requests[i])
    ns[i] = Number(process.hrtime.bigint() - t0)
    const key = r.found ? `P${r.priority}` : 'miss'
    levels.set(key, (levels.get(key) || 0) + 1)
  }
}

function summary(ns, levels) {
  const sorted = Float64Array.from(ns).sort()
  const at = (p) => percentile(sorted, p) / 1000
  return { p50: at(50), p95: at(95), p99: at(99), max: sorted[sorted.length - 1] / 1000, levels }
}

function timeCalls(rec, requests) {
  const ns = new Float64Array(requests.length)
  const levels = new Map()
  timeRange(rec, requests, 0, requests.length, ns, levels)
  return summary(ns, levels)
}

async function main() {
  const o = parseArgs(process.argv.slice(2))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'offloop-replay-bench-'))
  try {
    let t0 = performance.now()
    const { traces, stats } = await makeRecording(dir, o)
    console.log(`replay bench: ${stats.spansWritten} spans in ${traces.length} traces recorded (${o.format}, ${o.hash}) in ${((performance.now() - t0) / 1000).toFixed(1)} s; ${os.cpus().length} cores`)

    // Load, with a probe on the JS thread: a counter of event-loop turns (a timer chain, so
    // the probe does not itself take the core a busy setImmediate loop would) and the
    // longest gap between two turns.
    const loads = []
    let rec
    for (let run = 0; run < 3; run++) {
      let ticks = 0
      let maxGap = 0
      let last = performance.now()
      let running = true
      const tick = () => {
        const now = performance.now()
        maxGap = Math.max(maxGap, now - last)
        last = now
        ticks++
        if (running) setTimeout(() => setImmediate(tick), 1)
      }
      setImmediate(tick)
      t0 = performance.now()
      rec = await Recording.open(dir, { hashAlgorithm: o.hash })
      const wall = performance.now() - t0
      running = false
      loads.push({ wall, native: rec.stats().loadMs, ticks, maxGap })
    }
    // The first two recordings are freed on a background thread once collected: let that
    // happen now (with --expose-gc) rather than during the timed calls.
    if (typeof global.gc === 'function') {
      global.gc()
      await new Promise((resolve) => setTimeout(resolve, 1500))
    }
    const st = rec.stats()
    console.log(`\nRecording.open: ${st.spans} spans, ${st.traces} traces, ${st.files} files, ${st.skippedLines} skipped`)
    for (const [i, l] of loads.entries()) {
      console.log(`  run ${i + 1}: ${l.wall.toFixed(0)} ms wall (${l.native.toFixed(0)} ms native); JS thread: ${l.ticks} turns, longest gap ${l.maxGap.toFixed(1)} ms`)
    }

    // Requests per level. A match consumes its span, so each level uses spans of its own.
    const n = Math.min(o.samples, Math.floor(o.spans / 10))
    const perTrace = o.perTrace - 1
    const childrenPerTrace = { pg: [], http: [] }
    for (let i = 0; i < perTrace; i++) childrenPerTrace[call(0, i).package].push(i)
    // The k-th span of a package, spread over the traces.
    const sample = (pkg, k) => {
      const t = k % traces.length
      const i = childrenPerTrace[pkg][Math.floor(k / traces.length) % childrenPerTrace[pkg].length]
      return { t, c: call(t, i) }
    }
    const req = ({ t, c }, over = {}) => ({ traceId: traces[t], name: c.name, packageName: c.package, inputValue: c.input, inputSchemaMerges: c.merges, ...over })
    const warm = Array.from({ length: 2000 }, (_, k) => req(sample('pg', 4 * n + k)))
    timeCalls(rec, warm)
    const p1 = Array.from({ length: n }, (_, k) => req(sample('pg', k)))
    const suites = [
      ['P1  trace value hash (unused)', p1],
      ['P2  trace value hash (used)', p1],
      ['P3  trace reduced value hash', Array.from({ length: n }, (_, k) => {
        const s = sample('pg', n + k)
        return req(s, { inputValue: { ...s.c.input, values: [-1, -1] } })
      })],
      ['P5  suite value hash (another trace)', Array.from({ length: n }, (_, k) => {
        const s = sample('http', k)
        return req(s, { traceId: traces[(s.t + 1) % traces.length] })
      })],
      ['P12 across traces (no trace id)', Array.from({ length: n }, (_, k) => req(sample('pg', 2 * n + k), { traceId: undefined }))],
      ['miss (all hash levels tried)', Array.from({ length: n }, (_, k) => req(sample('pg', k), { inputValue: { text: `SELECT ${k}`, values: [] } }))],
    ]
    console.log(`\nfindMock (synchronous, hash levels), ${n} calls each; load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores:`)
    console.log(`  ${'level'.padEnd(42)} ${'p50 µs'.padStart(8)} ${'p95 µs'.padStart(8)} ${'p99 µs'.padStart(8)} ${'max µs'.padStart(8)}  outcome`)
    // The levels take turns, a slice of each per round, so a slow stretch of this (shared,
    // noisy) machine falls on all of them alike rather than on whichever level ran then. In a
    // round P1 runs before P2, which repeats P1's requests once their spans are used. Slices
    // of 100 calls (~0.5 ms): with slices of 1,000 one stall of the machine a few ms long
    // could slow 2% of a single level's calls and set its p99 alone (seen: P12 p99 19 µs
    // with p95 5.6 µs, while the other levels' p99 stayed at 5.4–8.3 µs).
    const ROUNDS = 100
    const timed = suites.map(([, requests]) => ({ ns: new Float64Array(requests.length), levels: new Map() }))
    for (let round = 0; round < ROUNDS; round++) {
      suites.forEach(([, requests], j) => {
        const from = Math.floor((round * requests.length) / ROUNDS)
        const to = Math.floor(((round + 1) * requests.length) / ROUNDS)
        timeRange(rec, requests, from, to, timed[j].ns, timed[j].levels)
      })
    }
    let worst = 0
    for (const [j, [label]] of suites.entries()) {
      const r = summary(timed[j].ns, timed[j].levels)
      worst = Math.max(worst, r.p99)
      const outcome = [...r.levels].map(([k, v]) => `${k}:${v}`).join(' ')
      console.log(`  ${label.padEnd(42)} ${r.p50.toFixed(2).padStart(8)} ${r.p95.toFixed(2).padStart(8)} ${r.p99.toFixed(2).padStart(8)} ${r.max.toFixed(0).padStart(8)}  ${outcome}`)
    }
    // For scale: the request hashing alone (the exporter's code, which findMock runs first).
    const { binding } = require('../lib/native.js')
    const hashOnly = p1.map((r) => [JSON.stringify(r.inputValue), { hashAlgorithm: o.hash, schemaMerges: JSON.stringify(r.inputSchemaMerges) }])
    const hns = new Float64Array(hashOnly.length)
    for (let i = 0; i < hashOnly.length; i++) {
      const t = process.hrtime.bigint()
      binding.hashPayload(hashOnly[i][0], hashOnly[i][1])
      hns[i] = Number(process.hrtime.bigint() - t)
    }
    hns.sort()
    console.log(`  ${'(hashPayload alone, same P1 inputs)'.padEnd(42)} ${(percentile(hns, 50) / 1000).toFixed(2).padStart(8)} ${(percentile(hns, 95) / 1000).toFixed(2).padStart(8)} ${(percentile(hns, 99) / 1000).toFixed(2).padStart(8)}`)
    const best = Math.min(...loads.map((l) => l.wall))
    console.log(`\ntargets: load ${best.toFixed(0)} ms (<= 1000 ms: ${best <= 1000 ? 'ok' : 'MISSED'}), worst hash-level p99 ${worst.toFixed(2)} µs (<= 10 µs: ${worst <= 10 ? 'ok' : 'MISSED'}), JS thread free while loading: ${loads.every((l) => l.ticks > 10) ? 'ok' : 'NO'}`)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
