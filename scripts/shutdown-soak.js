#!/usr/bin/env node
'use strict'
// The long variant of __test__/reliability-shutdown.test.js: thousands of randomized
// forceFlush()/shutdown() runs through OffloopExporter.export(), OffloopExporter under
// BatchSpanProcessor (sdk-trace-base 1.x and 2.x) and OffloopSpanProcessor. Every span accepted
// before the call must be in the files exactly once; nothing handed over after shutdown() may
// be written.
//
//   node scripts/shutdown-soak.js [runs=3000] [seed]
//
// Prints progress and a summary; exits 1 if any run lost, duplicated or leaked a span.

const { run } = require('../__test__/support/shutdown-runs.js')

async function main() {
  const runs = Number(process.argv[2] || 3000)
  const seed = Number(process.argv[3] || Math.floor(Math.random() * 2 ** 31))
  const started = Date.now()
  const totals = { export: 0, bsp: 0, processor: 0 }
  let accepted = 0
  let refused = 0
  const failures = []
  for (let i = 0; i < runs; i++) {
    const r = await run(i, seed)
    totals[r.mode]++
    accepted += r.accepted
    refused += r.refused
    if (r.problems.length) {
      failures.push(`run ${i} (${r.mode}, seed ${r.seed}): ${r.problems.join('; ')}`)
      console.error(failures[failures.length - 1])
    }
    if ((i + 1) % 500 === 0) console.error(`${i + 1}/${runs} runs, ${accepted} spans, ${failures.length} failed`)
  }
  const summary = { runs, seed, modes: totals, acceptedSpans: accepted, refusedAfterShutdown: refused, failedRuns: failures.length, seconds: (Date.now() - started) / 1000 }
  console.log(JSON.stringify(summary))
  process.exitCode = failures.length ? 1 : 0
}

main().catch((e) => {
  console.error(e)
  process.exit(2)
})
