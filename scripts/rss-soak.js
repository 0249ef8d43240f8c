#!/usr/bin/env node
'use strict'
// Bounded memory under a slow sink: offers `factor` × the sink's capacity and reports the
// peak RSS against the queue budget (maxQueueBytes), checking the accounting after every
// chunk of spans and inside every sink call.
//
// The sink is `onBatch` gated by the producer (no timers, so the result does not depend on
// machine speed): a batch handed to it is held until the producer has offered `factor` times
// the bytes the sink has taken so far. So the sink takes 1/factor of the load and the rest must
// be dropped at the queue, never buffered.
//
//   node --expose-gc scripts/rss-soak.js [--mode processor|exporter|simple] [--budget-mib 16]
//        [--factor 10] [--span-kb 16] [--rounds 1] [--offer-mib N] [--json]
//
// Modes: processor = OffloopSpanProcessor.onEnd per span; exporter = OffloopExporter.export()
// with batches of 64 spans, not awaited (the caller floods it); simple = export() of one span
// at a time (what SimpleSpanProcessor does).
//
// `--offer-mib N` offers N MiB per round instead of factor × budget (a control run with a
// budget larger than the load shows what the same load costs when nothing is dropped).
// `--rounds N` repeats the run N times on the same exporter (the long variant: RSS must not
// creep from round to round). Prints a JSON summary; exits 1 if a check failed.

const { OffloopExporter, OffloopSpanProcessor } = require('..')
const { fakeSpan, accountingError } = require('../__test__/support/reliability.js')

function parseArgs(argv) {
  const o = { mode: 'processor', budgetMib: 16, factor: 10, spanKb: 16, rounds: 1, json: false, offerMib: undefined }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const v = () => argv[++i]
    if (a === '--mode') o.mode = v()
    else if (a === '--budget-mib') o.budgetMib = Number(v())
    else if (a === '--factor') o.factor = Number(v())
    else if (a === '--span-kb') o.spanKb = Number(v())
    else if (a === '--rounds') o.rounds = Number(v())
    else if (a === '--offer-mib') o.offerMib = Number(v())
    else if (a === '--json') o.json = true
    else throw new Error(`unknown argument ${a}`)
  }
  return o
}

const MiB = 1024 * 1024
const tick = () => new Promise((resolve) => setImmediate(resolve))

async function main() {
  const o = parseArgs(process.argv.slice(2))
  if (typeof global.gc !== 'function') throw new Error('run with node --expose-gc')
  const budget = o.budgetMib * MiB

  // A few distinct outputs of ~spanKb each, built once (the JS heap does not grow with spans).
  const outputs = Array.from({ length: 4 }, (_, k) => {
    const row = { id: k, name: `user ${k}`, note: 'x'.repeat(200) }
    const rows = Array.from({ length: Math.max(1, Math.round((o.spanKb * 1024) / 240)) }, () => row)
    return JSON.stringify({ rowCount: rows.length, rows })
  })

  // The gated sink.
  const held = []
  let offered = 0
  let taken = 0
  let sinkCalls = 0
  const failures = []
  let checks = 0
  let target
  const check = (where) => {
    checks++
    const s = target.stats()
    const err = accountingError(s)
    if (err) failures.push(`${where}: ${err}`)
    if (s.bytesQueued > budget) failures.push(`${where}: bytesQueued ${s.bytesQueued} > maxQueueBytes ${budget}`)
    return s
  }
  const release = (all) => {
    while (held.length && (all || (taken + held[0].size) * o.factor <= offered)) {
      const h = held.shift()
      taken += h.size
      h.resolve()
    }
  }
  const onBatch = (bytes) => {
    sinkCalls++
    check('inside onBatch')
    return new Promise((resolve) => held.push({ resolve, size: bytes.length }))
  }

  const options = { onBatch, maxQueueBytes: budget }
  target =
    o.mode === 'processor'
      ? new OffloopSpanProcessor({ ...options, maxExportBatchSize: 64, scheduledDelayMillis: 5 })
      : new OffloopExporter({ ...options, onReport: () => {} })

  let n = 0
  const spanBytes = outputs[0].length
  const offerSpans = (count) => {
    if (o.mode === 'processor') {
      for (let i = 0; i < count; i++) target.onEnd(fakeSpan(n++, { output: outputs[n % 4] }))
    } else {
      const size = o.mode === 'simple' ? 1 : 64
      for (let i = 0; i < count; i += size) {
        const batch = []
        for (let j = 0; j < size && i + j < count; j++) batch.push(fakeSpan(n++, { output: outputs[n % 4] }))
        target.export(batch, () => {})
      }
    }
    offered += count * spanBytes
  }

  global.gc()
  await tick()
  global.gc()
  const baseline = process.memoryUsage()
  let peak = baseline.rss
  let peakExternal = baseline.external + baseline.arrayBuffers
  const sample = () => {
    const m = process.memoryUsage()
    peak = Math.max(peak, m.rss)
    peakExternal = Math.max(peakExternal, m.external + m.arrayBuffers)
  }
  const perChunk = Math.max(1, Math.floor(MiB / spanBytes)) // ~1 MiB of spans per chunk
  const rounds = []
  let maxQueued = 0
  for (let round = 0; round < o.rounds; round++) {
    const roundStart = offered
    while (offered - roundStart < (o.offerMib ? o.offerMib * MiB : o.factor * budget)) {
      offerSpans(perChunk)
      maxQueued = Math.max(maxQueued, check('after a chunk').bytesQueued)
      sample()
      release(false)
      if (process.env.SOAK_GC_EACH_CHUNK) global.gc() // diagnostic: separates GC lag from retention
      await tick() // lets onBatch calls and export() framing run
      sample()
    }
    release(true)
    // Drain: everything accepted reaches the sink (flush waits for it).
    const flushing = target.forceFlush()
    while (held.length || !(await Promise.race([flushing.then(() => true), tick().then(() => false)]))) {
      release(true)
      await tick()
    }
    await flushing
    check('after forceFlush')
    global.gc()
    rounds.push({ round, rssMib: +(process.memoryUsage().rss / MiB).toFixed(1) })
  }
  const flushed = check('end')
  const shutdown = target.shutdown()
  while (!(await Promise.race([shutdown.then(() => true), tick().then(() => false)]))) release(true)
  const s = target.stats()
  if (s.spansInFlight !== 0) failures.push(`spans still in flight after shutdown: ${JSON.stringify(s)}`)
  if (s.spansReceived !== n) failures.push(`spansReceived ${s.spansReceived} !== spans offered ${n}`)
  if (s.spansDropped === 0) failures.push('nothing was dropped: the sink was not overrun')
  if (accountingError(s)) failures.push(`final: ${accountingError(s)}`)

  const summary = {
    mode: o.mode,
    budgetMib: o.budgetMib,
    factor: o.factor,
    spanKb: +(spanBytes / 1024).toFixed(1),
    offeredMib: +(offered / MiB).toFixed(1),
    sinkTakenMib: +(taken / MiB).toFixed(1),
    sinkCalls,
    spans: n,
    written: s.spansWritten,
    dropped: s.spansDropped,
    failed: s.spansFailed,
    maxBytesQueuedMib: +(maxQueued / MiB).toFixed(2),
    accountingChecks: checks,
    baselineRssMib: +(baseline.rss / MiB).toFixed(1),
    peakRssMib: +(peak / MiB).toFixed(1),
    peakGrowthMib: +((peak - baseline.rss) / MiB).toFixed(1),
    peakExternalMib: +(peakExternal / MiB).toFixed(1),
    rounds,
    flushedInFlight: flushed.spansInFlight,
    failures: failures.slice(0, 10),
    failureCount: failures.length,
  }
  process.stdout.write(JSON.stringify(summary, null, o.json ? 0 : 2) + '\n')
  process.exitCode = failures.length ? 1 : 0
}

main().catch((e) => {
  console.error(e)
  process.exit(2)
})
