'use strict'
// The quick seed check (`npm run bench:seed`): the seed incident's workload — batches of 512
// pg.query spans returning 200 rows (~37 KiB of td.outputValue each), exported back to back the
// way BatchSpanProcessor drives an exporter — for offloop and the Tusk JS pipeline only. It is
// the export benchmark (export.js, same children, same measurements) restricted to one size
// and four contenders; it prints the table and writes nothing.
//
//   node benches/seed-workload.js            # 8 batches x 512 spans per contender
//   node benches/seed-workload.js --quick    # 2 batches
//   options: --batches=N  --only=offloop-blake3,tusk-js-0.1.27  --seed=N  --keep

const { runExportBench, printExport, problems, CONTENDERS } = require('./export.js')

const SEED_CONTENDERS = ['offloop-blake3', 'offloop-sha256', 'tusk-js-0.1.27', 'tusk-js-chunked']

function parseArgs(argv) {
  const o = { batches: undefined, quick: false, only: SEED_CONTENDERS, seed: 1, keep: false }
  for (const arg of argv) {
    const [k, v] = arg.split('=')
    if (k === '--quick') o.quick = true
    else if (k === '--keep') o.keep = true
    else if (k === '--batches') o.batches = Number(v)
    else if (k === '--seed') o.seed = Number(v)
    else if (k === '--only') o.only = v.split(',')
    else throw new Error(`unknown option ${arg}`)
  }
  o.batches ??= o.quick ? 2 : 8
  if (!Number.isInteger(o.batches) || o.batches < 1) throw new Error('--batches needs a positive integer')
  if (!Number.isInteger(o.seed)) throw new Error('--seed needs an integer')
  for (const n of o.only) if (!CONTENDERS[n]) throw new Error(`unknown contender ${n}; known: ${Object.keys(CONTENDERS).join(', ')}`)
  return o
}

async function main() {
  const o = parseArgs(process.argv.slice(2))
  console.log(`seed workload: ${o.batches} batches x 512 spans, 20 pg.query (200 rows) + 1 HTTP root per trace, seed ${o.seed}`)
  const report = await runExportBench({ rows: [200], only: o.only, batches: o.batches, seed: o.seed, keep: o.keep, mode: 'seed' })
  printExport(report)
  const bad = problems(report)
  for (const p of bad) console.log(`  ! ${p}`)
  if (bad.length) process.exitCode = 1
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
