'use strict'
// The seed incident's workload: batches of 512 pg.query spans returning 200 rows (~37 KiB of
// td.outputValue each), exported back to back the way BatchSpanProcessor drives an exporter
// (next export() only after the previous callback). Measures throughput and how long the
// event loop was blocked while exporting.
//
//   node benches/seed-workload.js            # 8 batches x 512 spans per contender
//   node benches/seed-workload.js --quick    # 2 batches
//   options: --batches=N  --only=offloop-blake3,tusk-js-0.1.27  --seed=N
//
// Each contender runs in its own child process. Spans are created (and a one-trace warm-up
// export done) before the monitors start; the measured window is the exports plus the final
// flush/shutdown. Output goes to .bench-out/seed-workload/<contender>/ and is deleted afterwards
// (--keep to keep it).

const { fork } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const { setTimeout: sleep } = require('node:timers/promises')

const workload = require('./lib/workload.js')

const ROOT = path.resolve(__dirname, '..')
const OUT_DIR = path.join(ROOT, '.bench-out', 'seed-workload')
const BATCH_SIZE = 512
const ROWS = 200
const QUERIES_PER_TRACE = 20

// ---------------------------------------------------------------------------
// Contenders. Each: { otel: 'v1'|'v2', setup(dir) -> { export(spans, cb), shutdown() } }
// ---------------------------------------------------------------------------

const CONTENDERS = {
  'offloop-blake3': {
    describe: 'OffloopExporter, hashAlgorithm blake3',
    otel: 'v2',
    setup: (dir) => offloopExporter(dir, 'blake3'),
  },
  'offloop-sha256': {
    describe: 'OffloopExporter, hashAlgorithm sha256 (Tusk-compatible hashes)',
    otel: 'v2',
    setup: (dir) => offloopExporter(dir, 'sha256'),
  },
  'tusk-js-0.1.27': {
    describe: 'Tusk JS SDK 0.1.27 as installed: transform all spans, then appendFileSync per span',
    otel: 'v1',
    setup: (dir) => tuskExporter(dir, { chunked: false }),
  },
  'tusk-js-chunked': {
    describe: 'Tusk JS after the incident fix (v0.1.43): transform in chunks of 20 + setImmediate, async appendFile per trace',
    otel: 'v1',
    setup: (dir) => tuskExporter(dir, { chunked: true }),
  },
}

function offloopExporter(dir, hashAlgorithm) {
  const { OffloopExporter } = require(ROOT)
  const errors = []
  const exporter = new OffloopExporter({
    directory: dir,
    hashAlgorithm,
    onReport: (r) => {
      if (r.failed || r.dropped || r.rejected) errors.push(r.rejected || `${r.failed} failed, ${r.dropped} dropped`)
    },
  })
  return {
    export: (spans, cb) => exporter.export(spans, cb),
    shutdown: () => exporter.shutdown(),
    extra: () => {
      const s = exporter.stats()
      return { written: s.spansWritten, failed: s.spansFailed + s.spansDropped, workers: s.workers, errors }
    },
  }
}

// The Tusk Drift JS export path, with the SDK's own SpanTransformer (loaded from the installed
// @use-tusk/drift-node-sdk). The surrounding exporter/adapter logic is re-created here because
// the SDK does not export those classes:
//   chunked=false: TdSpanExporter.export + FilesystemSpanAdapter of the installed 0.1.27
//     (synchronous map over transformSpanToCleanJSON, then fs.appendFileSync per span).
//   chunked=true: the v0.1.43 fix (ae6054d) as described in the spec: transform in chunks of 20
//     with `await setImmediate` in between; one fs/promises.appendFile per trace file with the
//     lines joined, kind mapped to the proto enum.
function tuskExporter(dir, { chunked }) {
  const { loadTuskJs, tuskJsUnavailableReason } = require(path.join(ROOT, '__test__', 'support', 'tusk-reference.js'))
  const tusk = loadTuskJs()
  if (!tusk) throw new Error(`Tusk JS SDK unavailable: ${tuskJsUnavailableReason()}`)
  const { SpanTransformer } = tusk
  const MAX_SPAN_BYTES = 1024 * 1024
  const blocked = new Set()
  const traceFiles = new Map()
  fs.mkdirSync(dir, { recursive: true })
  let written = 0

  const fileFor = (traceId) => {
    let file = traceFiles.get(traceId)
    if (!file) {
      file = path.join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}_trace_${traceId}.jsonl`)
      traceFiles.set(traceId, file)
    }
    return file
  }

  const filter = (spans) =>
    spans
      .filter((s) => s.instrumentationLibrary.name === workload.TUSK_TRACER_NAME)
      .filter((s) => {
        const traceId = s.spanContext().traceId
        if (blocked.has(traceId)) return false
        if (s.kind === 1 /* SERVER */ && s.status.code === 2 /* ERROR */) {
          blocked.add(traceId)
          return false
        }
        const size =
          Buffer.byteLength(s.attributes['td.inputValue'] || '', 'utf8') +
          Buffer.byteLength(s.attributes['td.outputValue'] || '', 'utf8') +
          50000
        if (size > MAX_SPAN_BYTES) {
          blocked.add(traceId)
          return false
        }
        return true
      })

  function exportSync(spans, cb) {
    const clean = filter(spans).map((s) => SpanTransformer.transformSpanToCleanJSON(s, undefined))
    // FilesystemSpanAdapter.exportSpans is an async function without awaits: all synchronous.
    const adapter = async () => {
      for (const span of clean) {
        fs.appendFileSync(fileFor(span.traceId), JSON.stringify(span) + '\n', 'utf8')
        written++
      }
    }
    adapter().then(() => cb({ code: 0 }), (error) => cb({ code: 1, error }))
  }

  async function exportChunked(spans) {
    const kept = filter(spans)
    const clean = []
    for (let i = 0; i < kept.length; i += 20) {
      for (const s of kept.slice(i, i + 20)) clean.push(SpanTransformer.transformSpanToCleanJSON(s, undefined))
      if (i + 20 < kept.length) await new Promise((resolve) => setImmediate(resolve))
    }
    const byFile = new Map()
    for (const span of clean) {
      const file = fileFor(span.traceId)
      if (!byFile.has(file)) byFile.set(file, [])
      byFile.get(file).push(JSON.stringify({ ...span, kind: span.kind + 1 })) // OTel -> proto SpanKind
    }
    for (const [file, lines] of byFile) {
      await fs.promises.appendFile(file, lines.join('\n') + '\n', 'utf8')
      written += lines.length
    }
  }

  return {
    export: chunked
      ? (spans, cb) => exportChunked(spans).then(() => cb({ code: 0 }), (error) => cb({ code: 1, error }))
      : exportSync,
    shutdown: async () => {},
    extra: () => ({ written, failed: 0, workers: 0, errors: [] }),
  }
}

// ---------------------------------------------------------------------------
// Child: one contender
// ---------------------------------------------------------------------------

function createTracer(otel) {
  const sdk = otel === 'v1' ? require('@opentelemetry/sdk-trace-base-v1') : require('@opentelemetry/sdk-trace-base')
  return new sdk.BasicTracerProvider().getTracer(workload.TUSK_TRACER_NAME)
}

function exportOnce(exporter, spans) {
  return new Promise((resolve) => exporter.export(spans, resolve))
}

async function runChild(name, { batches, seed, keep }) {
  const contender = CONTENDERS[name]
  const wl = workload.createWorkload({ seed, rows: ROWS, queriesPerTrace: QUERIES_PER_TRACE })
  const tracer = createTracer(contender.otel)
  const total = batches * BATCH_SIZE

  // 1. Spans (not measured). Trace 0 is the warm-up; measured spans start at trace 1.
  const warmup = workload.emitTrace(tracer, wl, 0)
  const spans = workload.emitTraces(tracer, wl, { traces: workload.tracesForSpans(wl, total), startIndex: 1 }).slice(0, total)
  let outputBytes = 0
  let queries = 0
  for (const s of spans) {
    if (s.attributes['td.packageName'] === 'pg') {
      outputBytes += s.attributes['td.outputValue'].length
      queries++
    }
  }

  const dir = path.join(OUT_DIR, name)
  fs.rmSync(dir, { recursive: true, force: true })
  const exporter = contender.setup(dir)
  const warm = await exportOnce(exporter, warmup)
  if (warm.code !== 0) throw new Error(`warm-up export failed: ${warm.error && warm.error.message}`)
  if (typeof global.gc === 'function') global.gc()
  await sleep(100)

  // 2. Monitors.
  const histogram = monitorEventLoopDelay({ resolution: 1 })
  let maxGap = 0
  let last = performance.now()
  const probe = setInterval(() => {
    const now = performance.now()
    if (now - last > maxGap) maxGap = now - last
    last = now
  }, 1)
  histogram.enable()
  await sleep(5) // let both monitors take their first samples
  last = performance.now()

  // 3. Export, BatchSpanProcessor-style: one batch at a time, the next one after the callback.
  //    One setImmediate between batches (as Tusk's processor, which exports one batch per timer
  //    tick), so a synchronous exporter's stall is measured per batch instead of the whole run
  //    fusing into one block through promise callbacks.
  const batchWalls = []
  const failures = []
  const t0 = performance.now()
  for (let b = 0; b < batches; b++) {
    if (b > 0) await new Promise((resolve) => setImmediate(resolve))
    const tb = performance.now()
    const result = await exportOnce(exporter, spans.slice(b * BATCH_SIZE, (b + 1) * BATCH_SIZE))
    batchWalls.push(performance.now() - tb)
    if (result.code !== 0) failures.push(result.error ? result.error.message : 'FAILED')
  }
  await exporter.shutdown()
  const wallMs = performance.now() - t0
  await sleep(5) // let the monitors observe the end of the last stretch
  histogram.disable()
  clearInterval(probe)

  const files = fs.existsSync(dir) ? fs.readdirSync(dir) : []
  let bytesWritten = 0
  for (const f of files) bytesWritten += fs.statSync(path.join(dir, f)).size
  if (!keep) fs.rmSync(dir, { recursive: true, force: true })
  const extra = exporter.extra()

  return {
    name,
    describe: contender.describe,
    otel: contender.otel,
    spans: total,
    batches,
    avgOutputValueBytes: Math.round(outputBytes / queries),
    wallMs,
    spansPerSec: total / (wallMs / 1000),
    maxDelayMs: histogram.max / 1e6,
    p99DelayMs: histogram.percentile(99) / 1e6,
    maxGapMs: maxGap,
    batchWallMeanMs: batchWalls.reduce((a, b) => a + b, 0) / batchWalls.length,
    batchWallMaxMs: Math.max(...batchWalls),
    // Includes the warm-up trace's spans.
    written: extra.written,
    failed: extra.failed,
    workers: extra.workers,
    files: files.length,
    bytesWritten,
    failures: failures.concat(extra.errors),
  }
}

// ---------------------------------------------------------------------------
// Parent: run each contender in a fresh process, print the table
// ---------------------------------------------------------------------------

function runInChild(name, args) {
  return new Promise((resolve, reject) => {
    const child = fork(__filename, ['--child', name, ...args], {
      execArgv: ['--expose-gc'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    let result
    child.on('message', (m) => {
      result = m
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (result && result.error) reject(new Error(`${name}: ${result.error}`))
      else if (result) resolve(result)
      else reject(new Error(`${name}: child exited with ${signal || code} and no result`))
    })
  })
}

function parseArgs(argv) {
  const opts = { quick: false, batches: undefined, only: undefined, seed: 1, keep: false, child: undefined }
  for (let i = 0; i < argv.length; i++) {
    const [key, value] = argv[i].split('=')
    if (key === '--quick') opts.quick = true
    else if (key === '--keep') opts.keep = true
    else if (key === '--batches') opts.batches = Number(value)
    else if (key === '--seed') opts.seed = Number(value)
    else if (key === '--only') opts.only = value.split(',')
    else if (key === '--child') opts.child = argv[++i]
    else throw new Error(`unknown option ${argv[i]}`)
  }
  if (opts.batches === undefined) opts.batches = opts.quick ? 2 : 8
  if (!Number.isInteger(opts.batches) || opts.batches < 1) throw new Error('--batches needs a positive integer')
  if (!Number.isInteger(opts.seed)) throw new Error('--seed needs an integer')
  for (const n of opts.only || []) if (!CONTENDERS[n]) throw new Error(`unknown contender ${n}; known: ${Object.keys(CONTENDERS).join(', ')}`)
  return opts
}

function printTable(results) {
  const cols = [
    ['contender', (r) => r.name],
    ['spans/s', (r) => Math.round(r.spansPerSec).toLocaleString('en-US')],
    ['max delay ms', (r) => r.maxDelayMs.toFixed(1)],
    ['max gap ms', (r) => r.maxGapMs.toFixed(1)],
    ['p99 delay ms', (r) => r.p99DelayMs.toFixed(1)],
    ['ms/batch mean', (r) => r.batchWallMeanMs.toFixed(0)],
    ['ms/batch max', (r) => r.batchWallMaxMs.toFixed(0)],
    ['written', (r) => `${r.written}${r.failed ? ` (${r.failed} failed)` : ''}`],
    ['MB out', (r) => (r.bytesWritten / 1e6).toFixed(1)],
  ]
  const rows = results.map((r) => cols.map(([, f]) => f(r)))
  const widths = cols.map(([h], i) => Math.max(h.length, ...rows.map((row) => row[i].length)))
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ')
  console.log(line(cols.map(([h]) => h)))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const row of rows) console.log(line(row))
}

async function main() {
  const opts = parseArgs(process.argv.slice(2))
  if (opts.child) {
    try {
      process.send(await runChild(opts.child, opts), () => process.disconnect())
    } catch (err) {
      process.send({ error: (err && err.stack) || String(err) }, () => process.disconnect())
    }
    return
  }

  const names = opts.only || Object.keys(CONTENDERS)
  const total = opts.batches * BATCH_SIZE
  console.log(`seed workload: ${opts.batches} batches x ${BATCH_SIZE} spans = ${total} spans, ` +
    `${QUERIES_PER_TRACE} pg.query (${ROWS} rows) + 1 HTTP root per trace, seed ${opts.seed}`)
  console.log(`node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0].model.trim()}), ` +
    `load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}\n`)
  const args = [`--batches=${opts.batches}`, `--seed=${opts.seed}`, ...(opts.keep ? ['--keep'] : [])]
  const results = []
  for (const name of names) {
    process.stdout.write(`  running ${name} ... `)
    const r = await runInChild(name, args)
    console.log(`${(r.wallMs / 1000).toFixed(1)} s`)
    results.push(r)
  }
  const r0 = results[0]
  console.log(`\n  avg td.outputValue ${(r0.avgOutputValueBytes / 1024).toFixed(1)} KiB; ` +
    `offloop workers: ${results.find((r) => r.workers)?.workers ?? 'n/a'}; delay = monitorEventLoopDelay(resolution 1), ` +
    'gap = longest interval between ticks of a 1 ms setInterval\n')
  printTable(results)
  console.log('')
  for (const r of results) console.log(`  ${r.name}: ${r.describe} (sdk-trace-base ${r.otel === 'v1' ? '1.x' : '2.x'} spans)`)
  let bad = false
  for (const r of results) {
    const expected = r.spans + QUERIES_PER_TRACE + 1 // + warm-up trace
    if (r.failures.length || r.written !== expected) {
      bad = true
      console.log(`  ! ${r.name}: wrote ${r.written}/${expected}; ${r.failures.slice(0, 3).join('; ')}`)
    }
  }
  if (bad) process.exitCode = 1
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
