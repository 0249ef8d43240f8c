'use strict'
// Export benchmark: the same seeded pg-style spans (lib/workload.js: SQL + params in, N rows ×
// 8 mixed columns out, 20 queries + 1 HTTP root per trace) exported in batches of 512 by each
// contender (lib/contenders.js), each in its own child process, at 10, 200 and 1000 rows.
//
//   node benches/export.js              # full: 8/4/2 batches at 10/200/1000 rows
//   node benches/export.js --quick      # 2/1/1 batches
//   node benches/export.js --smoke      # 10 rows, 1 batch (the smoke test)
//   options: --rows=10,200,1000  --only=offloop-blake3,otlp-http-json  --batches=N  --seed=N
//            --out=DIR (default benches/results, or .bench-out/<mode> for --quick/--smoke)  --keep
//            --cpu-prof  write a V8 CPU profile of each child (main thread) to .bench-out/cpu-prof/
//
// Per contender and size: spans/s, wall and CPU per batch, main-thread CPU per 10k spans, max
// and p99 event-loop delay (monitorEventLoopDelay resolution 1 ms, and a 1 ms interval probe),
// peak RSS. Writes export.json, export.md and event-loop-<rows>.svg into the output directory.
//
// Method: spans are created (not measured) and one warm-up trace exported before the monitors
// start. Exporters are driven like BatchSpanProcessor: one batch at a time, the next after the
// callback, one setImmediate in between. The processor gets its spans through onEnd(), one
// trace (21 spans) per event-loop turn, as a request handler would end them, then forceFlush().
// The measured window ends when everything is written (shutdown resolved). Main-thread CPU
// is net of the monitors' own cost (calibrated on an idle loop; the raw value is in the JSON).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { setTimeout: sleep } = require('node:timers/promises')

const workload = require('./lib/workload.js')
const { CONTENDERS, TUSK_TRACER_NAME, otelSdk } = require('./lib/contenders.js')
const measure = require('./lib/measure.js')
const { stallChart } = require('./lib/chart.js')
const { consoleTable, markdownTable, num, runChild, childMain, machine } = require('./lib/report.js')
const { startSink } = require('./lib/sink-server.js')

const ROOT = path.resolve(__dirname, '..')
const BATCH_SIZE = 512
const QUERIES_PER_TRACE = 20
const ALL_ROWS = [10, 200, 1000]
const BATCHES = {
  full: { 10: 8, 200: 4, 1000: 2 },
  quick: { 10: 2, 200: 1, 1000: 1 },
  smoke: { 10: 1, 200: 1, 1000: 1 },
}
/**
 * Time budget per contender and size: after a batch, the next one is started only if it is
 * expected to finish within the budget (at least one batch always runs). It only bites on the
 * slowest contenders (Tusk paths at 1000 rows), so the whole run stays within a few minutes.
 */
const BUDGET_MS = { full: 15000, quick: 8000, smoke: 4000, seed: Infinity }
/** Stall targets (issue 5): ≤ 2 ms per 512-span batch at 200 rows, ≤ 5 ms at 1000 rows. */
const STALL_TARGET_MS = { 10: 2, 200: 2, 1000: 5 }

// ---------------------------------------------------------------------------
// Child: one contender at one size
// ---------------------------------------------------------------------------

function exportOnce(exporter, spans) {
  return new Promise((resolve) => exporter.export(spans, resolve))
}

async function feedProcessor(processor, spans) {
  for (let i = 0; i < spans.length; i += QUERIES_PER_TRACE + 1) {
    await new Promise((resolve) => setImmediate(resolve))
    for (const s of spans.slice(i, i + QUERIES_PER_TRACE + 1)) processor.onEnd(s)
  }
}

async function measureChild({ name, rows, batches, seed, dir, sinkUrl, budgetMs }) {
  const contender = CONTENDERS[name]
  const sdk = otelSdk(contender.otel)
  const tracer = new sdk.BasicTracerProvider().getTracer(TUSK_TRACER_NAME)
  const wl = workload.createWorkload({ seed, rows, queriesPerTrace: QUERIES_PER_TRACE })
  const total = batches * BATCH_SIZE

  // 1. Spans (not measured). Trace 0 is the warm-up; measured spans start at trace 1.
  const warmup = workload.emitTrace(tracer, wl, 0)
  const spans = workload.emitTraces(tracer, wl, { traces: workload.tracesForSpans(wl, total), startIndex: 1 }).slice(0, total)
  let payloadBytes = 0
  for (const s of spans) payloadBytes += s.attributes['td.inputValue'].length + (s.attributes['td.outputValue'] || '').length

  fs.rmSync(dir, { recursive: true, force: true })
  const instance = contender.create({ dir, sinkUrl })
  if (contender.kind === 'exporter') {
    const warm = await exportOnce(instance, warmup)
    if (warm.code !== 0) throw new Error(`warm-up export failed: ${warm.error && warm.error.message}`)
  } else {
    await feedProcessor(instance, warmup)
    await instance.forceFlush()
  }
  if (typeof global.gc === 'function') global.gc()
  await sleep(100)

  // 2. Monitors, and their own main-thread cost on an idle loop (subtracted below).
  const monitor = measure.startLoopMonitor()
  await sleep(20)
  const idle0 = measure.mainThreadCpuMs()
  const idleT0 = performance.now()
  await sleep(250)
  const monitorCpuPerMs = idle0 === null ? 0 : (measure.mainThreadCpuMs() - idle0) / (performance.now() - idleT0)

  // 3. Export.
  const batchWall = []
  const batchCpu = []
  const batchProcessCpu = []
  const failures = []
  await monitor.reset()
  const cpu0 = measure.mainThreadCpuBoth()
  const main0 = measure.mainThreadCpuMs()
  const proc0 = measure.processCpuMs()
  const t0 = performance.now()
  const withinBudget = (done) => {
    const elapsed = performance.now() - t0
    return elapsed + elapsed / done <= (budgetMs ?? Infinity)
  }
  let batchesRun = 0
  for (let b = 0; b < batches && (b === 0 || withinBudget(b)); b++) {
    const slice = spans.slice(b * BATCH_SIZE, (b + 1) * BATCH_SIZE)
    batchesRun++
    if (contender.kind === 'processor') {
      await feedProcessor(instance, slice)
      continue
    }
    if (b > 0) await new Promise((resolve) => setImmediate(resolve))
    const tb = performance.now()
    const cb = measure.mainThreadCpuMs()
    const pb = measure.processCpuMs()
    const result = await exportOnce(instance, slice)
    batchWall.push(performance.now() - tb)
    batchCpu.push(measure.mainThreadCpuMs() - cb)
    batchProcessCpu.push(measure.processCpuMs() - pb)
    if (result.code !== 0) failures.push(result.error ? result.error.message : 'FAILED')
  }
  if (contender.kind === 'processor') await instance.forceFlush()
  await instance.shutdown()
  const wallMs = performance.now() - t0
  const mainRaw = measure.mainThreadCpuMs() - main0
  const cpu1 = measure.mainThreadCpuBoth()
  const processCpu = measure.processCpuMs() - proc0
  await sleep(5) // let the histogram's timer record the end of the last stretch
  const loop = monitor.stop()

  const res = await instance.result()
  if (!process.argv.includes('--keep')) fs.rmSync(dir, { recursive: true, force: true })

  const stalledMs = loop.stalls.reduce((a, [, g]) => a + g, 0)
  const monitorCpu = monitorCpuPerMs * Math.max(0, wallMs - stalledMs)
  const mainCpu = Math.max(0, mainRaw - monitorCpu)
  const exported = batchesRun * BATCH_SIZE
  const writtenInWindow = res.written - warmup.length
  const perBatch = (arr, fallback) => (arr.length ? arr : [fallback])
  const walls = perBatch(batchWall, wallMs / batchesRun)
  const cpus = perBatch(batchCpu, mainCpu / batchesRun)
  const pcpus = perBatch(batchProcessCpu, processCpu / batchesRun)
  const mean = (a) => a.reduce((x, y) => x + y, 0) / a.length
  return {
    name,
    family: contender.family,
    describe: contender.describe,
    kind: contender.kind,
    otel: contender.otel,
    rows,
    spans: exported,
    batches: batchesRun,
    batchesPlanned: batches,
    avgPayloadBytes: Math.round(payloadBytes / total),
    wallMs,
    windowStartMs: t0, // performance.now() of the child at the first export (for correlating)
    // Spans written in the window per second (spans dropped by a full queue do not count).
    spansPerSec: writtenInWindow / (wallMs / 1000),
    batchWallMeanMs: mean(walls),
    batchWallMaxMs: Math.max(...walls),
    batchMainCpuMeanMs: batchCpu.length ? Math.max(0, mean(cpus) - monitorCpuPerMs * mean(walls)) : mean(cpus),
    batchProcessCpuMeanMs: mean(pcpus),
    mainCpuMs: mainCpu,
    mainCpuRawMs: mainRaw,
    mainCpuStatMs: cpu0.statMs === null ? null : cpu1.statMs - cpu0.statMs,
    monitorCpuMs: monitorCpu,
    cpuSource: measure.CPU_SOURCE,
    mainCpuPer10k: (mainCpu / exported) * 10000,
    processCpuMs: processCpu,
    processCpuPer10k: (processCpu / exported) * 10000,
    loopMaxMs: loop.maxMs,
    loopP99Ms: loop.p99Ms,
    probeMaxGapMs: loop.probeMaxGapMs,
    probeP99GapMs: loop.probeP99GapMs,
    stalls: loop.stalls,
    peakRssMb: measure.peakRssMb(),
    expectedWritten: exported + warmup.length,
    written: res.written,
    failed: res.failed,
    dropped: res.dropped || 0,
    workers: res.workers,
    bytesOut: res.bytesOut,
    failures: failures.concat(res.errors),
  }
}

// ---------------------------------------------------------------------------
// Parent
// ---------------------------------------------------------------------------

function parseArgs(argv) {
  const o = { mode: 'full', rows: undefined, only: undefined, batches: undefined, seed: 1, out: undefined, keep: false, cpuProf: false }
  for (const arg of argv) {
    const [k, v] = arg.split('=')
    if (k === '--quick') o.mode = 'quick'
    else if (k === '--smoke') o.mode = 'smoke'
    else if (k === '--keep') o.keep = true
    else if (k === '--cpu-prof') o.cpuProf = true
    else if (k === '--rows') o.rows = v.split(',').map(Number)
    else if (k === '--only') o.only = v.split(',')
    else if (k === '--batches') o.batches = Number(v)
    else if (k === '--seed') o.seed = Number(v)
    else if (k === '--out') o.out = path.resolve(v)
    else throw new Error(`unknown option ${arg} (see the header of benches/export.js)`)
  }
  o.rows ||= o.mode === 'smoke' ? [10] : ALL_ROWS
  for (const r of o.rows) if (!Number.isInteger(r) || r < 1) throw new Error(`--rows: bad value ${r}`)
  if (o.batches !== undefined && !(Number.isInteger(o.batches) && o.batches > 0)) throw new Error('--batches needs a positive integer')
  for (const n of o.only || []) if (!CONTENDERS[n]) throw new Error(`unknown contender ${n}; known: ${Object.keys(CONTENDERS).join(', ')}`)
  if (!Number.isInteger(o.seed)) throw new Error('--seed needs an integer')
  o.out ||= defaultOut(o.mode)
  return o
}

const defaultOut = (mode) => (mode === 'full' ? path.join(__dirname, 'results') : path.join(ROOT, '.bench-out', mode))

/**
 * Runs the export benchmark; returns `{ meta, results }`. `log` receives progress lines.
 * @param {{mode?: string, rows?: number[], only?: string[], batches?: number, seed?: number, keep?: boolean}} o
 */
async function runExportBench(o, log = (s) => process.stdout.write(s)) {
  const mode = o.mode || 'full'
  const names = o.only || Object.keys(CONTENDERS)
  const rowsList = o.rows || ALL_ROWS
  const seed = o.seed ?? 1
  const workDir = path.join(ROOT, '.bench-out', `export-work-${process.pid}`) // recordings, deleted per child
  const needsSink = names.some((n) => CONTENDERS[n].family === 'otlp')
  const sink = needsSink ? await startSink() : null
  const results = []
  try {
    for (const rows of rowsList) {
      const batches = o.batches || BATCHES[mode][rows] || 1
      log(`\n${rows} rows: ${batches} x ${BATCH_SIZE} spans\n`)
      for (const name of names) {
        log(`  ${name.padEnd(18)} `)
        const budgetMs = o.budgetMs ?? BUDGET_MS[mode] ?? Infinity
        const args = ['--child', JSON.stringify({ name, rows, batches, seed, dir: path.join(workDir, name), sinkUrl: sink && sink.url, budgetMs: Number.isFinite(budgetMs) ? budgetMs : null })]
        if (o.keep) args.push('--keep')
        const execArgv = ['--expose-gc']
        if (o.cpuProf) execArgv.push('--cpu-prof', `--cpu-prof-dir=${path.join(ROOT, '.bench-out', 'cpu-prof')}`, `--cpu-prof-name=${name}-${rows}rows.cpuprofile`)
        const r = await runChild(__filename, args, { execArgv })
        const cut = r.batches < r.batchesPlanned ? ` (${r.batches}/${r.batchesPlanned} batches: time budget)` : ''
        log(`${(r.wallMs / 1000).toFixed(2)} s  ${num(r.spansPerSec)} spans/s  max delay ${num(r.loopMaxMs, 1)} ms${cut}\n`)
        results.push(r)
      }
    }
  } finally {
    if (sink) await sink.stop()
    fs.rmSync(workDir, { recursive: true, force: true })
  }
  const m = machine()
  return {
    meta: {
      ...m,
      mode,
      seed,
      batchSize: BATCH_SIZE,
      queriesPerTrace: QUERIES_PER_TRACE,
      cpuSource: measure.CPU_SOURCE,
      offloopWorkers: results.find((r) => r.workers)?.workers ?? null,
      offloopThreads: os.availableParallelism(), // the exporters' default \`threads\`
    },
    results,
  }
}

const COLUMNS = [
  ['contender', (r) => r.name],
  ['spans/s', (r) => num(r.spansPerSec)],
  ['max delay ms', (r) => num(r.loopMaxMs, 1)],
  ['p99 delay ms', (r) => num(r.loopP99Ms, 1)],
  ['probe max gap ms', (r) => num(r.probeMaxGapMs, 1)],
  ['wall ms/batch', (r) => num(r.batchWallMeanMs)],
  ['main CPU ms/batch', (r) => num(r.batchMainCpuMeanMs, 1)],
  ['process CPU ms/batch', (r) => num(r.batchProcessCpuMeanMs)],
  ['main CPU ms/10k spans', (r) => num(r.mainCpuPer10k, 1)],
  ['peak RSS MB', (r) => num(r.peakRssMb)],
  ['batches', (r) => String(r.batches)],
  ['written', (r) => `${r.written}${r.dropped ? ` (${r.dropped} dropped)` : ''}${r.failed ? ` (${r.failed} failed)` : ''}`],
]

function sizeTitle(rows, sizeResults) {
  const r0 = sizeResults[0]
  return `${rows} rows: up to ${r0.batchesPlanned} batches of ${BATCH_SIZE} spans, avg td.inputValue + td.outputValue ${(r0.avgPayloadBytes / 1024).toFixed(1)} KiB per span`
}

function printExport({ meta, results }) {
  for (const rows of [...new Set(results.map((r) => r.rows))]) {
    const rs = results.filter((r) => r.rows === rows)
    console.log(`\n${sizeTitle(rows, rs)}\n`)
    console.log(consoleTable(COLUMNS, rs))
  }
  console.log(`\n${describeMeta(meta)}`)
}

function describeMeta(meta) {
  return (
    `${meta.date.slice(0, 16).replace('T', ' ')} UTC, node ${meta.node}, ${meta.cpus} CPUs (${meta.cpuModel}), load average ${meta.loadavg.join(' ')} at the end, ` +
    `offloop workers ${meta.offloopWorkers ?? 'n/a'} (batches at once) x threads ${meta.offloopThreads ?? 'n/a'} (per batch), main-thread CPU from /proc/self/task/<pid>/${meta.cpuSource}, seed ${meta.seed}, mode ${meta.mode}`
  )
}

function markdownExport({ meta, results }, { legend = true } = {}) {
  const parts = []
  for (const rows of [...new Set(results.map((r) => r.rows))]) {
    const rs = results.filter((r) => r.rows === rows)
    parts.push(`**${sizeTitle(rows, rs)}**\n\n${markdownTable(COLUMNS, rs)}\n`)
  }
  parts.push(describeMeta(meta) + '.\n')
  if (legend) parts.push(Object.keys(CONTENDERS).filter((n) => results.some((r) => r.name === n)).map((n) => `- \`${n}\`: ${CONTENDERS[n].describe}`).join('\n') + '\n')
  return parts.join('\n')
}

function chartsExport({ results }) {
  const charts = {}
  for (const rows of [...new Set(results.map((r) => r.rows))]) {
    const rs = results.filter((r) => r.rows === rows)
    charts[rows] = stallChart({
      title: `Event-loop stalls while exporting pg spans of ${rows} rows in batches of ${BATCH_SIZE}`,
      subtitle: `One lane per contender, each in its own process; a bar is a stretch in which a 1 ms timer could not run. ${os.cpus().length} cores.`,
      targetMs: STALL_TARGET_MS[rows],
      lanes: rs.map((r) => ({ name: r.name, family: r.family, wallMs: r.wallMs, maxMs: Math.max(r.loopMaxMs, r.probeMaxGapMs), spansPerSec: r.spansPerSec, stalls: r.stalls })),
    })
  }
  return charts
}

/** Writes export.json, export.md, event-loop-<rows>.svg into `out`. */
function writeExport(out, report) {
  fs.mkdirSync(out, { recursive: true })
  // One line per [start, gap] stall pair keeps the file short and diffable.
  const json = JSON.stringify(report, null, 1).replace(/\[\n\s*(-?[\d.e+-]+),\n\s*(-?[\d.e+-]+)\n\s*\]/g, '[$1, $2]')
  fs.writeFileSync(path.join(out, 'export.json'), json + '\n')
  fs.writeFileSync(path.join(out, 'export.md'), markdownExport(report))
  for (const [rows, svg] of Object.entries(chartsExport(report))) fs.writeFileSync(path.join(out, `event-loop-${rows}.svg`), svg)
}

/** Spans that were neither written nor dropped by design (a full queue), per contender. */
function problems({ results }) {
  return results
    .filter((r) => r.failures.length || r.written + r.dropped !== r.expectedWritten)
    .map((r) => `${r.name} @ ${r.rows} rows: wrote ${r.written}/${r.expectedWritten}; ${r.failures.slice(0, 3).join('; ')}`)
}

async function main() {
  const childAt = process.argv.indexOf('--child')
  if (childAt !== -1) return childMain(() => measureChild(JSON.parse(process.argv[childAt + 1])))
  const o = parseArgs(process.argv.slice(2))
  console.log(`export benchmark (${o.mode}); results -> ${path.relative(process.cwd(), o.out) || '.'}`)
  const report = await runExportBench(o)
  printExport(report)
  writeExport(o.out, report)
  const bad = problems(report)
  for (const p of bad) console.log(`  ! ${p}`)
  if (bad.length) process.exitCode = 1
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err)
    process.exitCode = 1
  })
}

module.exports = { measureChild, runExportBench, printExport, writeExport, markdownExport, problems, parseArgs, BATCH_SIZE, STALL_TARGET_MS, CONTENDERS }
