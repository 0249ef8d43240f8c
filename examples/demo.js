'use strict'
// offloop quick-start demo: `npm run demo` (or `node examples/demo.js`).
//
// A small HTTP service instrumented with OpenTelemetry records Tusk Drift spans through
// offloop while a load loop drives it. Each request runs 20 simulated pg queries that
// return 200 rows (the shape of the incident where export blocked the loop for 1–1.6 s),
// and the event loop's delay is measured throughout. Then the replay phase runs the same app
// again with its pg calls answered from this run's recording (Recording.findMock) and prints
// how many calls matched at which level of the matching cascade.
//
// Options:
//   --exporter           use BatchSpanProcessor(new OffloopExporter()) instead of OffloopSpanProcessor
//   --requests=N         requests to send (default 50)
//   --concurrency=N      requests in flight at once (default 5)
//   --hash=sha256        hash like the Tusk JS SDK (default blake3)
//   --baseline           no recording at all (spans are created, then discarded): the app's own
//                        event-loop delay, to compare against
//
// Recordings go to ./recordings (relative to the current directory).

const http = require('node:http')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const { setTimeout: sleep } = require('node:timers/promises')

const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base')
const { OffloopSpanProcessor, OffloopExporter, Recording } = require('..') // require('offloop') in your app
const workload = require('../benches/lib/workload.js')

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

function parseArgs(argv) {
  const config = {
    mode: 'processor',
    requests: 50,
    concurrency: 5,
    hashAlgorithm: 'blake3',
    seed: 1,
    rows: 200,
    queriesPerTrace: 20,
    recordingDir: path.resolve('recordings'),
  }
  for (const arg of argv) {
    const [key, value] = arg.split('=')
    if (key === '--exporter') config.mode = 'exporter'
    else if (key === '--baseline') config.mode = 'baseline'
    else if (key === '--requests') config.requests = positiveInt(key, value)
    else if (key === '--concurrency') config.concurrency = positiveInt(key, value)
    else if (key === '--hash') config.hashAlgorithm = value
    else throw new Error(`unknown option ${arg} (see the header of examples/demo.js)`)
  }
  return config
}

function positiveInt(key, value) {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${key} needs a positive integer, got ${value}`)
  return n
}

// ---------------------------------------------------------------------------
// Tracing setup
// ---------------------------------------------------------------------------

function createTracing(config) {
  if (config.mode === 'baseline') {
    const provider = new BasicTracerProvider() // no span processor: nothing is recorded
    const none = { spansReceived: 0, spansWritten: 0, spansDropped: 0, spansFailed: 0, batches: 0, workers: 0 }
    return { provider, tracer: provider.getTracer(workload.TUSK_TRACER_NAME), label: 'baseline (no recording)', stats: () => none }
  }
  const options = { directory: config.recordingDir, hashAlgorithm: config.hashAlgorithm }
  let processor
  let statsSource
  if (config.mode === 'processor') {
    // Recommended: batching, timers and the queue live in native code.
    processor = new OffloopSpanProcessor(options)
    statsSource = processor
  } else {
    // Also works: the stock BatchSpanProcessor with offloop as its exporter.
    const exporter = new OffloopExporter(options)
    processor = new BatchSpanProcessor(exporter)
    statsSource = exporter
  }
  const provider = new BasicTracerProvider({ spanProcessors: [processor] })
  return {
    provider,
    tracer: provider.getTracer(workload.TUSK_TRACER_NAME),
    label: config.mode === 'processor' ? 'OffloopSpanProcessor' : 'BatchSpanProcessor(OffloopExporter)',
    stats: () => statsSource.stats(),
  }
}

// ---------------------------------------------------------------------------
// The instrumented service
// ---------------------------------------------------------------------------

// GET /api/accounts/:id/activity?trace=N  runs the 20 queries of workload trace N.
// `db` runs one query: simulated (record phase) or answered from the recording (replay phase).
function createServer(tracer, wl, db = simulatedQuery) {
  return http.createServer((req, res) => {
    handle(tracer, wl, req, res, db).catch((err) => {
      console.error('handler failed:', err)
      if (!res.headersSent) res.writeHead(500)
      res.end()
    })
  })
}

async function handle(tracer, wl, req, res, db) {
  const url = new URL(req.url, `http://${req.headers.host}`)
  const traceIndex = Number(url.searchParams.get('trace') || 0)
  const request = {
    method: req.method,
    url: url.href,
    target: req.url,
    headers: req.headers,
    httpVersion: req.httpVersion,
    remoteAddress: req.socket.remoteAddress,
    remotePort: req.socket.remotePort,
  }
  const server = workload.startServerSpan(tracer, workload.httpServerAttributes({ request }))

  const queries = []
  for (let i = 0; i < wl.options.queriesPerTrace; i++) queries.push(await db(tracer, server.context, wl, traceIndex, i, req))

  const body = workload.responseBodyFor(traceIndex, queries)
  const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }
  res.writeHead(200, headers)
  res.end(body)
  const response = { statusCode: 200, statusMessage: 'OK', headers, body }
  const { 'td.outputValue': outputValue, 'td.outputSchemaMerges': outputMerges } = workload.httpServerAttributes({ request, response })
  workload.endServerSpan(server.span, { 'td.outputValue': outputValue, 'td.outputSchemaMerges': outputMerges })
}

// A pg pool round trip: wait like the network would, then "parse" the rows and record the
// span with its Tusk attributes, as the pg instrumentation does on the request path.
async function simulatedQuery(tracer, parentContext, wl, traceIndex, queryIndex) {
  const startTime = Date.now()
  await sleep(1 + (queryIndex % 3)) // 1–3 ms
  const q = wl.query(traceIndex, queryIndex)
  workload.emitQuerySpan(tracer, parentContext, workload.pgQueryAttributes(q), { startTime })
  return q
}

// ---------------------------------------------------------------------------
// Load loop
// ---------------------------------------------------------------------------

async function drive(port, { requests, concurrency }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })
  let next = 0
  let served = 0
  const worker = async () => {
    while (next < requests) {
      const n = next++
      const status = await get(agent, `http://127.0.0.1:${port}/api/accounts/${1000 + n}/activity?trace=${n}`)
      if (status === 200) served++
      else console.error(`request ${n}: HTTP ${status}`)
    }
  }
  try {
    await Promise.all(Array.from({ length: concurrency }, worker))
  } finally {
    agent.destroy()
  }
  return served
}

function get(agent, url) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode))
        res.on('error', reject)
      })
      .on('error', reject)
  })
}

// ---------------------------------------------------------------------------
// Record phase
// ---------------------------------------------------------------------------

function listRecordings(dir) {
  try {
    return new Set(fs.readdirSync(dir).filter((f) => /\.(jsonl|pb)$/.test(f)))
  } catch (err) {
    if (err.code === 'ENOENT') return new Set()
    throw err
  }
}

const ms = (ns) => ns / 1e6

/**
 * Serves and drives the instrumented app, flushes the recordings and prints a summary.
 * @returns {Promise<{recordingDir: string, files: string[]}>} the directory and this run's files.
 */
async function record(config) {
  const before = listRecordings(config.recordingDir)
  const tracing = createTracing(config)
  const wl = workload.createWorkload({ seed: config.seed, rows: config.rows, queriesPerTrace: config.queriesPerTrace })
  const server = createServer(tracing.tracer, wl)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()

  const hash = config.mode === 'baseline' ? '' : `, ${config.hashAlgorithm}`
  console.log(`offloop demo: ${tracing.label}${hash}, http://127.0.0.1:${port}`)
  console.log(`  load: ${config.requests} requests x concurrency ${config.concurrency}, ` +
    `${config.queriesPerTrace} pg queries x ${config.rows} rows each`)

  const loop = monitorEventLoopDelay({ resolution: 1 })
  loop.enable()
  const t0 = performance.now()
  let served
  try {
    served = await drive(port, config)
  } finally {
    await new Promise((resolve) => server.close(resolve))
  }
  const loadMs = performance.now() - t0
  // Note: BatchSpanProcessor.forceFlush() does not wait for an export that its timer already
  // started, so shutdown() (which ends with exporter.shutdown(), a full flush) is the point where
  // everything is written. Read stats after it.
  await tracing.provider.forceFlush()
  await tracing.provider.shutdown()
  const flushMs = performance.now() - t0 - loadMs
  loop.disable()
  const stats = tracing.stats()

  const after = listRecordings(config.recordingDir)
  const created = [...after].filter((f) => !before.has(f)).length
  const rel = path.relative(process.cwd(), config.recordingDir) || '.'
  const row = (k, v) => console.log(`  ${k.padEnd(18)} ${v}`)
  row('requests served', `${served} / ${config.requests} in ${(loadMs / 1000).toFixed(2)} s (+${flushMs.toFixed(0)} ms flush + shutdown)`)
  row('spans written', `${stats.spansWritten} / ${stats.spansReceived} received, ` +
    `${stats.spansDropped} dropped, ${stats.spansFailed} failed, ${stats.batches} batches, ${stats.workers} worker(s)`)
  row('recordings', `${created} new files in ./${rel} (${after.size} in total)`)
  row('event-loop delay', `max ${ms(loop.max).toFixed(1)} ms, p99 ${ms(loop.percentile(99)).toFixed(1)} ms, ` +
    `mean ${ms(loop.mean).toFixed(2)} ms (monitorEventLoopDelay, resolution 1 ms)`)
  if (served !== config.requests || stats.spansWritten !== stats.spansReceived) process.exitCode = 1
  return { recordingDir: config.recordingDir, files: [...after].filter((f) => !before.has(f)) }
}

// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// Replay phase
// ---------------------------------------------------------------------------

/**
 * Runs the same app again with its pg calls answered from the recording: each recorded
 * inbound request is re-sent with its trace id in `x-td-trace-id` (as the Tusk replay runner
 * does), and the app's `db` asks `recording.findMock` instead of querying.
 */
async function replay(recordingDir, files, config) {
  // This run's files only (the directory keeps earlier runs), linked into a scratch directory.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'offloop-demo-replay-'))
  try {
    for (const f of files) {
      try {
        fs.linkSync(path.join(recordingDir, f), path.join(dir, f))
      } catch {
        fs.copyFileSync(path.join(recordingDir, f), path.join(dir, f))
      }
    }
    const t0 = performance.now()
    const recording = await Recording.open(dir, { hashAlgorithm: config.hashAlgorithm })
    const loadMs = performance.now() - t0

    // The tests: each trace's root span is the inbound request to re-send.
    const tests = []
    for (const f of files) {
      for (const line of fs.readFileSync(path.join(dir, f), 'utf8').split('\n')) {
        if (!line) continue
        const span = JSON.parse(line)
        if (span.isRootSpan) tests.push({ traceId: span.traceId, target: span.inputValue.target, body: span.outputValue.body })
      }
    }

    const mocked = async (tracer, parentContext, wl, traceIndex, queryIndex, req) => {
      // The app builds the same SQL and parameters (the generator also makes rows: the
      // recorded ones replace them).
      const q = wl.query(traceIndex, queryIndex)
      const { 'td.inputValue': inputValue, 'td.inputSchemaMerges': merges } = workload.pgQueryAttributes(q)
      const mock = recording.findMock({
        traceId: req.headers['x-td-trace-id'],
        name: 'pg.query',
        packageName: 'pg',
        submoduleName: 'query',
        inputValue,
        inputSchemaMerges: merges,
      })
      if (!mock.found) throw new Error(`no mock for query ${queryIndex} of trace ${traceIndex}: ${mock.reason}`)
      return { ...q, result: mock.outputValue }
    }
    const provider = new BasicTracerProvider() // replay records nothing
    const wl = workload.createWorkload({ seed: config.seed, rows: config.rows, queriesPerTrace: config.queriesPerTrace })
    const server = createServer(provider.getTracer(workload.TUSK_TRACER_NAME), wl, mocked)
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address()
    const agent = new http.Agent({ keepAlive: true, maxSockets: config.concurrency })
    const t1 = performance.now()
    let same = 0
    try {
      let next = 0
      const worker = async () => {
        while (next < tests.length) {
          const test = tests[next++]
          const body = await getBody(agent, `http://127.0.0.1:${port}${test.target}`, { 'x-td-trace-id': test.traceId })
          if (body === Buffer.from(test.body || '', 'base64').toString()) same++
        }
      }
      await Promise.all(Array.from({ length: config.concurrency }, worker))
    } finally {
      agent.destroy()
      await new Promise((resolve) => server.close(resolve))
    }
    const replayMs = performance.now() - t1

    const st = recording.stats()
    const row = (k, v) => console.log(`  ${k.padEnd(18)} ${v}`)
    console.log(`replay: the same app, its pg calls answered by Recording.findMock`)
    row('recording', `${st.spans} spans in ${st.traces} traces loaded in ${loadMs.toFixed(0)} ms (${st.skippedLines} lines skipped)`)
    row('requests', `${tests.length} re-sent in ${replayMs.toFixed(0)} ms, ${same} responses identical to the recording`)
    const levels = Object.entries(st.matchesByPriority).map(([p, n]) => `${n} at P${p}`).join(', ') || 'none'
    const types = Object.entries(st.matchesByType).filter(([, n]) => n > 0).map(([t, n]) => `${t} ${n}`).join(', ') || 'none'
    row('calls matched', `${st.matches} (${levels}; ${types}), ${st.misses} without a mock`)
    if (same !== tests.length || st.misses > 0) process.exitCode = 1
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

function getBody(agent, url, headers) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent, headers }, (res) => {
        const chunks = []
        res.on('data', (c) => chunks.push(c))
        res.on('end', () => resolve(Buffer.concat(chunks).toString()))
        res.on('error', reject)
      })
      .on('error', reject)
  })
}

// ---------------------------------------------------------------------------

async function main() {
  const config = parseArgs(process.argv.slice(2))
  const { recordingDir, files } = await record(config)

  // ---- Replay phase ------------------------------------------------------------------
  // The recording answers the same app's outbound calls (nothing to replay in --baseline).
  if (config.mode !== 'baseline') await replay(recordingDir, files, config)
}

// Safety net: the demo must never hang (unref'd, so it does not keep the process alive).
setTimeout(() => {
  console.error('demo: timed out after 60 s')
  process.exit(1)
}, 60_000).unref()

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
