'use strict'
// Bounded memory: 10x a slow sink's capacity through each path, in child processes
// (scripts/rss-soak.js), with the accounting checked after every chunk of spans and inside
// every sink call. RSS growth must stay within the queue budget plus a fixed margin; a control
// run with a budget larger than the load shows the same load unbounded, so the bound is what
// keeps RSS down (the test can fail).
//
// Figures at the time of writing (2-core VM, 16 MiB budget, 160 MiB offered as ~10.5k spans of
// 16 KB): peak RSS growth processor 24-43 MiB, per-span export() 42-45 MiB, export() flood of
// 64-span batches 67-78 MiB (framed batches are JS Buffers, freed at the next GC), control
// (1 GiB budget, nothing dropped) ~169 MiB.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')

const { runNode } = require('./support/reliability.js')

const SOAK = path.join(__dirname, '..', 'scripts', 'rss-soak.js')
const BUDGET_MIB = 16
const FACTOR = 10
// Fixed allowance on top of the budget: the pool threads, one batch being processed, the
// allocator's slack and garbage not yet collected. Well below the 10x load (160 MiB).
const MARGIN_MIB = 48

async function soak(args) {
  const r = await runNode(SOAK, ['--json', ...args], { nodeArgs: ['--expose-gc'], timeoutMs: 120_000 })
  assert.ok(!r.timedOut, `rss-soak ${args.join(' ')} timed out; stderr: ${r.stderr}`)
  let summary
  try {
    summary = JSON.parse(r.stdout)
  } catch {
    assert.fail(`rss-soak ${args.join(' ')} exited ${r.code} without a summary; stderr: ${r.stderr}`)
  }
  return { ...summary, exitCode: r.code, stderr: r.stderr }
}

function assertBounded(s, limitMib) {
  const figures = JSON.stringify(s)
  assert.deepEqual(s.failures, [], `accounting/queue checks failed: ${figures}`)
  assert.equal(s.exitCode, 0, figures)
  assert.ok(s.accountingChecks >= 100, `accounting checked during the run (${s.accountingChecks} times)`)
  assert.ok(s.offeredMib >= FACTOR * BUDGET_MIB, `offered ${s.offeredMib} MiB`)
  assert.ok(s.dropped > 0 && s.written > 0, `the sink was overrun: ${figures}`)
  assert.ok(s.maxBytesQueuedMib <= BUDGET_MIB, `bytesQueued never above maxQueueBytes: ${figures}`)
  assert.ok(s.peakGrowthMib <= limitMib, `peak RSS growth ${s.peakGrowthMib} MiB > ${limitMib} MiB: ${figures}`)
}

test(`OffloopSpanProcessor: ${FACTOR}x a slow sink's capacity stays within maxQueueBytes ${BUDGET_MIB} MiB + ${MARGIN_MIB} MiB RSS`, async () => {
  const [bounded, control] = await Promise.all([
    soak(['--mode', 'processor', '--budget-mib', String(BUDGET_MIB), '--factor', String(FACTOR)]),
    // The same load with a budget larger than it: nothing is dropped, everything is held.
    soak(['--mode', 'processor', '--budget-mib', '1024', '--offer-mib', String(FACTOR * BUDGET_MIB)]),
  ])
  assertBounded(bounded, BUDGET_MIB + MARGIN_MIB)
  assert.equal(control.dropped, 0, 'control: nothing dropped')
  assert.ok(
    control.peakGrowthMib > 2 * (BUDGET_MIB + MARGIN_MIB),
    `control run grew ${control.peakGrowthMib} MiB: the bounded run's limit would not catch an unbounded queue`,
  )
})

test(`OffloopExporter, one span per export() (SimpleSpanProcessor): ${FACTOR}x a slow sink stays within ${BUDGET_MIB} + ${MARGIN_MIB} MiB RSS`, async () => {
  assertBounded(await soak(['--mode', 'simple', '--budget-mib', String(BUDGET_MIB), '--factor', String(FACTOR)]), BUDGET_MIB + MARGIN_MIB)
})

test(`OffloopExporter, a flood of unawaited 64-span export() calls: within 2 x ${BUDGET_MIB} + 64 MiB RSS`, async () => {
  // Each export() frames its batch into JS Buffers before the queue can refuse it; refused
  // batches are garbage until V8 collects them, so this path gets a larger allowance.
  assertBounded(await soak(['--mode', 'exporter', '--budget-mib', String(BUDGET_MIB), '--factor', String(FACTOR)]), 2 * BUDGET_MIB + 64)
})
