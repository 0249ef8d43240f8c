'use strict'
// No loss on shutdown: hundreds of randomized runs (support/shutdown-runs.js) through
// OffloopExporter.export() called directly, OffloopExporter under BatchSpanProcessor (both SDK
// majors) and OffloopSpanProcessor. In each, spans are handed over at random moments and
// forceFlush()/shutdown() is called at a random point; every span accepted before the call
// must be in the files exactly once when it resolves, and nothing handed over after shutdown()
// may be written (its export fails with a shutdown reason). scripts/shutdown-soak.js runs
// thousands.

const test = require('node:test')
const assert = require('node:assert/strict')

const { run } = require('./support/shutdown-runs.js')
const { seedFromEnv } = require('./support/reliability.js')

const RUNS = 300

test(`${RUNS} randomized forceFlush()/shutdown() points lose and duplicate no accepted span`, async (t) => {
  const seed = seedFromEnv()
  const failures = []
  const totals = { export: 0, bsp: 0, processor: 0 }
  let spans = 0
  let refused = 0
  for (let i = 0; i < RUNS; i++) {
    const r = await run(i, seed)
    totals[r.mode]++
    spans += r.accepted
    refused += r.refused
    if (r.problems.length) failures.push(`run ${i} (${r.mode}, seed ${r.seed}): ${r.problems.join('; ')}`)
  }
  t.diagnostic(`OFFLOOP_SEED=${seed}: ${RUNS} runs (${JSON.stringify(totals)}), ${spans} accepted spans checked, ${refused} refused after shutdown`)
  assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of ${RUNS} runs failed (OFFLOOP_SEED=${seed})`)
})
