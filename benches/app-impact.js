'use strict'
// App-impact benchmark (the shape of seeds/003: the same service under the same load, with and
// without the exporter): a Node HTTP server whose handler runs 20 pg-style queries with
// simulated results of 200 rows and records them as Tusk spans (workload.js builders), under a
// closed-loop load of 10 concurrent keep-alive connections from a separate load-generator
// process (lib/loadgen.js) on 127.0.0.1, bounded in time and count. One server process per mode:
//   off                export off: the same spans are created and ended, no span processor
//   offloop-processor  OffloopSpanProcessor (blake3) -> JSONL files
//   tusk-js-0.1.27     BatchSpanProcessor(512, 2000 ms, queue 2048: Tusk's settings) + the Tusk JS export path
//   otlp-http-json     BatchSpanProcessor (OTel defaults) + OTLP/HTTP JSON exporter -> local sink process
// Any exporter contender of lib/contenders.js can be given to --only (run under BatchSpanProcessor).
//
//   node benches/app-impact.js            # 2 s warm-up + 8 s measured per mode (<= 4000 requests)
//   node benches/app-impact.js --quick    # 1 s + 3 s
//   node benches/app-impact.js --smoke    # 0.2 s + 1.5 s, <= 60 requests, 10 rows
//   options: --only=off,offloop-processor  --concurrency=N  --duration=S  --warmup=S  --requests=N
//            --rows=N  --out=DIR
//
// Reported per mode: requests/s and latency p50/p99/max from the load generator; from the
// server: event-loop delay (max, p99) and main-thread CPU per request during the measured
// phase, spans ended vs recorded (the rest were dropped by a full queue), flush time at the end.

const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const { fork } = require('node:child_process')
const { setTimeout: sleep } = require('node:timers/promises')

const workload = require('./lib/workload.js')
const { CONTENDERS, TUSK_TRACER_NAME, offloopProcessor } = require('./lib/contenders.js')
const measure = require('./lib/measure.js')
const { consoleTable, markdownTable, num, machine } = require('./lib/report.js')
const { startSink } = require('./lib/sink-server.js')

const ROOT = path.resolve(__dirname, '..')
const MODES = ['off', 'offloop-processor', 'tusk-js-0.1.27', 'otlp-http-json']
const SETTINGS = {
  full: { warmupMs: 2000, durationMs: 8000, maxRequests: 4000 },
  quick: { warmupMs: 1000, durationMs: 3000, maxRequests: 2000 },
  // Smoke runs check that every mode serves and records, not speed: small rows so even the
  // slowest pipeline (Tusk JS, ~1 s stalls at 200 rows) completes requests within the window.
  smoke: { warmupMs: 200, durationMs: 1500, maxRequests: 60, rows: 10 },
}
// The Tusk SDK's DriftBatchSpanProcessor settings (tusk-drift-spec.md §2.1).
const TUSK_BSP = { maxExportBatchSize: 512, scheduledDelayMillis: 2000, maxQueueSize: 2048 }

// ---------------------------------------------------------------------------
// Server (child process)
// ---------------------------------------------------------------------------

function createTracing(mode, { dir, sinkUrl }) {
  const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base')
  let ended = 0
  const counter = { onStart() {}, onEnd: () => ended++, forceFlush: async () => {}, shutdown: async () => {} }
  let recorded = () => 0
  let processor = null
  if (mode === 'offloop-processor') {
    const p = offloopProcessor(dir)
    processor = p.processor
    recorded = () => p.stats().spansWritten
  } else if (mode !== 'off') {
    const c = CONTENDERS[mode]
    if (!c || c.kind !== 'exporter') throw new Error(`app-impact: unknown mode ${mode}`)
    const exporter = c.create({ dir, sinkUrl })
    let ok = 0
    const counting = {
      export: (spans, cb) => exporter.export(spans, (r) => {
        if (r.code === 0) ok += spans.length
        cb(r)
      }),
      shutdown: () => exporter.shutdown(),
      forceFlush: async () => {},
    }
    processor = new BatchSpanProcessor(counting, c.family === 'tusk' ? TUSK_BSP : {})
    recorded = () => ok
  }
  const provider = new BasicTracerProvider({ spanProcessors: processor ? [counter, processor] : [counter] })
  return { provider, tracer: provider.getTracer(TUSK_TRACER_NAME), ended: () => ended, recorded }
}

async function serve({ mode, rows, seed, dir, sinkUrl }) {
  fs.rmSync(dir, { recursive: true, force: true })
  const tracing = createTracing(mode, { dir, sinkUrl })
  const wl = workload.createWorkload({ seed, rows, queriesPerTrace: 20 })
  // The simulated database: 16 traces' worth of result sets, generated up front, so the
  // handler's own work is the instrumentation's (JSON.stringify of each result) plus HTTP.
  const POOL = 16
  const pool = Array.from({ length: POOL }, (_, t) => Array.from({ length: 20 }, (_, q) => wl.query(t, q)))

  async function handle(req, res) {
    const url = new URL(req.url, 'http://127.0.0.1')
    const t = Number(url.searchParams.get('trace') || 0)
    const request = { method: req.method, url: url.href, target: req.url, headers: req.headers, httpVersion: req.httpVersion, remoteAddress: req.socket.remoteAddress, remotePort: req.socket.remotePort }
    const server = workload.startServerSpan(tracing.tracer, workload.httpServerAttributes({ request }))
    const results = pool[t % POOL]
    for (const q of results) {
      const startTime = Date.now()
      await sleep(Math.max(1, Math.round(q.durationMs))) // the pool round trip
      workload.emitQuerySpan(tracing.tracer, server.context, workload.pgQueryAttributes(q), { startTime })
    }
    const body = workload.responseBodyFor(t, results)
    const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }
    res.writeHead(200, headers)
    res.end(body)
    const out = workload.httpServerAttributes({ request, response: { statusCode: 200, statusMessage: 'OK', headers, body } })
    workload.endServerSpan(server.span, { 'td.outputValue': out['td.outputValue'], 'td.outputSchemaMerges': out['td.outputSchemaMerges'] })
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err) => {
      console.error('handler failed:', err)
      if (!res.headersSent) res.writeHead(500)
      res.end()
    })
  })
  server.keepAliveTimeout = 60_000
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))

  const monitor = measure.startLoopMonitor()
  let cpu0 = measure.mainThreadCpuMs()
  let ended0 = 0
  let recorded0 = 0
  process.on('message', async (m) => {
    if (m === 'measure') {
      await monitor.reset()
      cpu0 = measure.mainThreadCpuMs()
      ended0 = tracing.ended()
      recorded0 = tracing.recorded()
    } else if (m === 'stop') {
      const loop = monitor.stop()
      const mainCpuMs = cpu0 === null ? null : measure.mainThreadCpuMs() - cpu0
      const endedMeasured = tracing.ended() - ended0
      const recordedAtStop = tracing.recorded() - recorded0
      server.close()
      const tf = performance.now()
      await tracing.provider.shutdown() // flushes what is queued
      const flushMs = performance.now() - tf
      process.send({
        loopMaxMs: Math.max(loop.maxMs, loop.probeMaxGapMs),
        loopP99Ms: loop.p99Ms,
        probeP99GapMs: loop.probeP99GapMs,
        mainCpuMs,
        spansEnded: tracing.ended(),
        spansRecorded: tracing.recorded(),
        spansEndedMeasured: endedMeasured,
        spansRecordedDuringMeasure: recordedAtStop,
        flushMs,
        peakRssMb: measure.peakRssMb(),
      }, () => process.disconnect())
    }
  })
  process.send({ port: server.address().port })
}

// ---------------------------------------------------------------------------
// Parent
// ---------------------------------------------------------------------------

function once(child, predicate) {
  return new Promise((resolve, reject) => {
    const onMsg = (m) => {
      if (m && m.error) return reject(new Error(m.error))
      if (predicate(m)) {
        child.off('message', onMsg)
        resolve(m)
      }
    }
    child.on('message', onMsg)
    child.once('exit', (code) => reject(new Error(`child exited (${code}) before answering`)))
  })
}

async function runMode(mode, o, sinkUrl) {
  const dir = path.join(ROOT, '.bench-out', `app-impact-work-${process.pid}`, mode)
  const server = fork(__filename, ['--serve', JSON.stringify({ mode, rows: o.rows, seed: o.seed, dir, sinkUrl })], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  try {
    const { port } = await once(server, (m) => m && m.port)
    const gen = fork(path.join(__dirname, 'lib', 'loadgen.js'), [JSON.stringify({
      url: `http://127.0.0.1:${port}/api/accounts/1/activity`,
      concurrency: o.concurrency,
      durationMs: o.durationMs,
      warmupMs: o.warmupMs,
      maxRequests: o.maxRequests,
    })], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    gen.on('message', (m) => {
      if (m && m.phase === 'measure') server.send('measure')
    })
    const load = await once(gen, (m) => m && m.requests !== undefined)
    server.send('stop')
    const stats = await once(server, (m) => m && m.spansEnded !== undefined)
    return { mode, family: mode === 'off' ? 'off' : (CONTENDERS[mode] || {}).family, ...load, ...stats, mainCpuPerRequestMs: stats.mainCpuMs === null ? null : stats.mainCpuMs / load.requests }
  } finally {
    if (server.exitCode === null) server.kill()
    fs.rmSync(path.dirname(dir), { recursive: true, force: true })
  }
}

function parseArgs(argv) {
  const o = { mode: 'full', only: undefined, concurrency: 10, rows: 200, seed: 1, out: undefined }
  const overrides = {}
  for (const arg of argv) {
    const [k, v] = arg.split('=')
    if (k === '--quick') o.mode = 'quick'
    else if (k === '--smoke') o.mode = 'smoke'
    else if (k === '--only') o.only = v.split(',')
    else if (k === '--concurrency') o.concurrency = Number(v)
    else if (k === '--rows') overrides.rows = Number(v)
    else if (k === '--duration') overrides.durationMs = Number(v) * 1000
    else if (k === '--warmup') overrides.warmupMs = Number(v) * 1000
    else if (k === '--requests') overrides.maxRequests = Number(v)
    else if (k === '--out') o.out = path.resolve(v)
    else throw new Error(`unknown option ${arg} (see the header of benches/app-impact.js)`)
  }
  Object.assign(o, SETTINGS[o.mode], overrides)
  o.only ||= MODES
  for (const m of o.only) if (m !== 'off' && m !== 'offloop-processor' && !(CONTENDERS[m] && CONTENDERS[m].kind === 'exporter')) throw new Error(`unknown mode ${m}`)
  o.out ||= o.mode === 'full' ? path.join(__dirname, 'results') : path.join(ROOT, '.bench-out', o.mode)
  return o
}

/** Runs every mode in turn; returns `{ meta, results }`. */
async function runAppImpact(o, log = (s) => process.stdout.write(s)) {
  const sink = o.only.some((m) => CONTENDERS[m] && CONTENDERS[m].family === 'otlp') ? await startSink() : null
  const results = []
  try {
    log(`\napp impact: ${o.concurrency} connections, ${o.warmupMs / 1000} s warm-up + ${o.durationMs / 1000} s (<= ${o.maxRequests} requests) per mode, 20 queries x ${o.rows} rows per request\n`)
    for (const mode of o.only) {
      log(`  ${mode.padEnd(18)} `)
      const r = await runMode(mode, o, sink && sink.url)
      log(`${num(r.rps)} req/s  p99 ${num(r.p99Ms, 1)} ms  loop max ${num(r.loopMaxMs, 1)} ms\n`)
      results.push(r)
    }
  } finally {
    if (sink) await sink.stop()
  }
  const off = results.find((r) => r.mode === 'off')
  for (const r of results) {
    r.rpsVsOff = off ? r.rps / off.rps : null
    r.p99VsOff = off ? r.p99Ms / off.p99Ms : null
  }
  return { meta: { ...machine(), mode: o.mode, concurrency: o.concurrency, rows: o.rows, warmupMs: o.warmupMs, durationMs: o.durationMs, maxRequests: o.maxRequests, cpuSource: measure.CPU_SOURCE }, results }
}

const COLUMNS = [
  ['mode', (r) => r.mode],
  ['req/s', (r) => num(r.rps)],
  ['vs off', (r) => (r.rpsVsOff === null ? 'n/a' : `${num(r.rpsVsOff * 100)}%`)],
  ['p50 ms', (r) => num(r.p50Ms, 1)],
  ['p99 ms', (r) => num(r.p99Ms, 1)],
  ['p99 vs off', (r) => (r.p99VsOff === null ? 'n/a' : `${num(r.p99VsOff, 2)}x`)],
  ['max ms', (r) => num(r.maxMs, 1)],
  ['loop max ms', (r) => num(r.loopMaxMs, 1)],
  ['main CPU ms/req', (r) => num(r.mainCpuPerRequestMs, 2)],
  ['spans ended', (r) => num(r.spansEnded)],
  ['recorded', (r) => (r.mode === 'off' ? '-' : num(r.spansRecorded))],
  ['flush ms', (r) => (r.mode === 'off' ? '-' : num(r.flushMs))],
]

function describeMeta(meta) {
  return `node ${meta.node}, ${meta.cpus} CPUs, load generator: ${meta.concurrency} keep-alive connections in a separate process, ${meta.durationMs / 1000} s measured after ${meta.warmupMs / 1000} s warm-up (at most ${meta.maxRequests} requests), ${meta.rows} rows per query. "recorded" < "spans ended": dropped by a full queue.`
}

function printAppImpact({ meta, results }) {
  console.log('')
  console.log(consoleTable(COLUMNS, results))
  console.log(`\n${describeMeta(meta)}`)
}

function markdownAppImpact({ meta, results }) {
  return `${markdownTable(COLUMNS, results)}\n\n${describeMeta(meta)}\n`
}

function writeAppImpact(out, report) {
  fs.mkdirSync(out, { recursive: true })
  fs.writeFileSync(path.join(out, 'app-impact.json'), JSON.stringify(report, null, 1) + '\n')
  fs.writeFileSync(path.join(out, 'app-impact.md'), markdownAppImpact(report))
}

async function main() {
  const at = process.argv.indexOf('--serve')
  if (at !== -1) return serve(JSON.parse(process.argv[at + 1]))
  const o = parseArgs(process.argv.slice(2))
  const report = await runAppImpact(o)
  printAppImpact(report)
  writeAppImpact(o.out, report)
  if (report.results.some((r) => r.errors)) process.exitCode = 1
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err)
    process.exitCode = 1
  })
}

module.exports = { runAppImpact, printAppImpact, writeAppImpact, markdownAppImpact, parseArgs }
