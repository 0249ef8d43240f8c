'use strict'
// `npm run bench` / `npm run bench:quick`: the export benchmark (export.js), then the
// app-impact benchmark (app-impact.js); prints their tables and the targets of issue 5 with
// the current figures.
//
//   node benches/run.js             # full (a few minutes on 2 cores) -> benches/results/
//   node benches/run.js --quick     # shorter runs                    -> .bench-out/quick/
//   node benches/run.js --smoke     # seconds; used by __test__/bench-smoke.test.js
//   options: --out=DIR  --skip-export  --skip-app
//            --readme   also rewrite the generated blocks of README.md ("Benchmarks")
//            --report   run nothing: rebuild summary (and README blocks) from the result files
//                       already in --out and the latest criterion summary
//
// Files: export.json/.md, event-loop-<rows>.svg, app-impact.json/.md, summary.json/.md. The
// "core pipeline ≥ serde_json parse" target comes from the criterion run (`cargo bench`), read
// from target/criterion/offloop-summary.json when it exists.

const fs = require('node:fs')
const path = require('node:path')

const exportBench = require('./export.js')
const appImpact = require('./app-impact.js')
const { markdownTable, num } = require('./lib/report.js')

const ROOT = path.resolve(__dirname, '..')
const OFFLOOP = ['offloop-blake3', 'offloop-sha256', 'offloop-processor']

function parseArgs(argv) {
  const o = { mode: 'full', out: undefined, skipExport: false, skipApp: false, readme: false, report: false }
  for (const arg of argv) {
    const [k, v] = arg.split('=')
    if (k === '--quick') o.mode = 'quick'
    else if (k === '--smoke') o.mode = 'smoke'
    else if (k === '--out') o.out = path.resolve(v)
    else if (k === '--skip-export') o.skipExport = true
    else if (k === '--skip-app') o.skipApp = true
    else if (k === '--readme') o.readme = true
    else if (k === '--report') o.report = true
    else throw new Error(`unknown option ${arg} (see the header of benches/run.js)`)
  }
  o.out ||= o.mode === 'full' ? path.join(__dirname, 'results') : path.join(ROOT, '.bench-out', o.mode)
  return o
}

/** The table the criterion benches wrote at the end of their last run (`cargo bench`), if any. */
function criterionSummary() {
  const dir = process.env.CRITERION_HOME || path.join(process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target'), 'criterion')
  try {
    const file = path.join(dir, 'offloop-summary.json')
    return {
      rows: JSON.parse(fs.readFileSync(file, 'utf8')),
      md: fs.readFileSync(path.join(dir, 'offloop-summary.md'), 'utf8'),
      date: fs.statSync(file).mtime.toISOString(),
    }
  } catch {
    return null
  }
}

/** The targets of issue 5 against the figures of this run. */
function evaluateTargets(exp, app, crit) {
  const out = []
  const verdict = (ok) => (ok === null ? 'n/a' : ok ? 'met' : 'MISSED')
  const find = (name, rows) => exp && exp.results.find((r) => r.name === name && r.rows === rows)
  for (const [rows, limit] of [[200, 2], [1000, 5]]) {
    for (const name of OFFLOOP) {
      const r = find(name, rows)
      if (!r) continue
      const worst = Math.max(r.loopMaxMs, r.probeMaxGapMs)
      out.push({ target: `max event-loop stall ≤ ${limit} ms per 512-span batch, ${rows} rows`, who: name, figure: `${num(r.loopMaxMs, 1)} ms (histogram), ${num(r.probeMaxGapMs, 1)} ms (1 ms probe gap)`, status: verdict(worst <= limit) })
    }
  }
  for (const name of OFFLOOP) {
    const r = find(name, 200)
    if (r) out.push({ target: '≥ 10,000 spans/s at 200 rows', who: name, figure: `${num(r.spansPerSec)} spans/s`, status: verdict(r.spansPerSec >= 10000) })
  }
  for (const rows of [10, 200, 1000]) {
    const otlp = find('otlp-http-json', rows)
    if (!otlp) continue
    for (const name of OFFLOOP) {
      const r = find(name, rows)
      if (!r) continue
      const pct = (r.mainCpuPer10k / otlp.mainCpuPer10k) * 100
      out.push({ target: `main-thread CPU per 10k spans ≤ 5% of otlp-http-json's, ${rows} rows`, who: name, figure: `${num(r.mainCpuPer10k, 1)} ms vs ${num(otlp.mainCpuPer10k, 1)} ms = ${num(pct, 1)}%`, status: verdict(pct <= 5) })
    }
  }
  if (app) {
    const r = app.results.find((x) => x.mode === 'offloop-processor')
    if (r && r.rpsVsOff !== null) {
      out.push({ target: 'app impact: ≥ 95% of export-off requests/s', who: r.mode, figure: `${num(r.rps)} vs ${num(r.rps / r.rpsVsOff)} req/s = ${num(r.rpsVsOff * 100)}%`, status: verdict(r.rpsVsOff >= 0.95) })
      out.push({ target: 'app impact: p99 ≤ 1.1× export-off', who: r.mode, figure: `${num(r.p99Ms, 1)} vs ${num(r.p99Ms / r.p99VsOff, 1)} ms = ${num(r.p99VsOff, 2)}x`, status: verdict(r.p99VsOff <= 1.1) })
    }
  }
  if (crit) {
    for (const rows of [10, 200, 1000]) {
      const e = crit.rows.find((x) => x.rows === rows && x.bench === 'e2e_blake3_jsonl_file')
      const p = crit.rows.find((x) => x.rows === rows && x.bench === 'parse_value')
      if (!e || !p) continue
      // The paired ratio (timed back to back) decides; the criterion means are shown too.
      const ratio = e.pairedRatioToParseValue ?? e.ratioToParseValue
      const paired = e.pairedRatioToParseValue == null ? '' : `; paired ${num(e.pairedRatioToParseValue, 2)}x`
      out.push({ target: `core pipeline bytes/s ≥ serde_json parse-into-Value bytes/s, ${rows} rows (cargo bench, ${crit.date.slice(0, 10)})`, who: 'Exporter → JSONL files, blake3', figure: `${num(e.mbPerSec)} vs ${num(p.mbPerSec)} MB/s = ${num(e.ratioToParseValue, 2)}x${paired}`, status: verdict(ratio >= 1) })
    }
  }
  return out
}

const TARGET_COLUMNS = [
  ['target', (t) => t.target],
  ['contender', (t) => t.who],
  ['current figure', (t) => t.figure],
  ['status', (t) => t.status],
]

/** Replaces `<!-- bench:NAME -->…<!-- /bench:NAME -->` blocks of README.md. */
function updateReadme(blocks) {
  const file = path.join(ROOT, 'README.md')
  let text = fs.readFileSync(file, 'utf8')
  for (const [name, body] of Object.entries(blocks)) {
    const re = new RegExp(`(<!-- bench:${name} -->\\n)[\\s\\S]*?(<!-- /bench:${name} -->)`)
    if (!re.test(text)) {
      console.log(`  README.md has no bench:${name} block; not updated`)
      continue
    }
    text = text.replace(re, (_, a, b) => `${a}${body.trim()}\n${b}`)
  }
  fs.writeFileSync(file, text)
}

async function main() {
  const o = parseArgs(process.argv.slice(2))
  console.log(`offloop benchmarks (${o.mode}) -> ${path.relative(process.cwd(), o.out) || '.'}`)
  fs.mkdirSync(o.out, { recursive: true })
  let exp = null
  let app = null
  const problems = []
  const previous = (file) => JSON.parse(fs.readFileSync(path.join(o.out, file), 'utf8'))
  if (o.report) {
    exp = previous('export.json')
    app = previous('app-impact.json')
  } else if (!o.skipExport) {
    exp = await exportBench.runExportBench({ mode: o.mode, rows: o.mode === 'smoke' ? [10] : undefined })
    exportBench.printExport(exp)
    exportBench.writeExport(o.out, exp)
    problems.push(...exportBench.problems(exp))
  }
  if (!o.report && !o.skipApp) {
    app = await appImpact.runAppImpact(appImpact.parseArgs(o.mode === 'full' ? [] : [`--${o.mode}`]))
    appImpact.printAppImpact(app)
    appImpact.writeAppImpact(o.out, app)
    for (const r of app.results) if (r.errors) problems.push(`app-impact ${r.mode}: ${r.errors} failed requests`)
  }
  const crit = criterionSummary()
  if (crit) fs.writeFileSync(path.join(o.out, 'criterion-summary.md'), `${crit.md.trim()}\n\n\`cargo bench\` of ${crit.date.slice(0, 16).replace('T', ' ')} UTC (target/criterion/offloop-summary.md).\n`)
  const targets = evaluateTargets(exp, app, crit)
  const md = `${markdownTable(TARGET_COLUMNS, targets, { left: 4 })}\n`
  fs.writeFileSync(path.join(o.out, 'summary.json'), JSON.stringify({ mode: o.mode, date: new Date().toISOString(), targets, problems }, null, 1) + '\n')
  fs.writeFileSync(path.join(o.out, 'summary.md'), md)
  console.log(`\nTargets (issue 5; goals, not asserts)\n\n${md}`)
  if (o.readme) {
    const blocks = { targets: md }
    if (crit) blocks.criterion = fs.readFileSync(path.join(o.out, 'criterion-summary.md'), 'utf8')
    if (exp) blocks.export = exportBench.markdownExport(exp, { legend: false })
    if (app) blocks.app = appImpact.markdownAppImpact(app)
    updateReadme(blocks)
  }
  for (const p of problems) console.log(`  ! ${p}`)
  console.log(`results: ${fs.readdirSync(o.out).map((f) => path.join(path.relative(process.cwd(), o.out), f)).join(', ')}`)
  if (problems.length) process.exitCode = 1
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err)
    process.exitCode = 1
  })
}

module.exports = { evaluateTargets }
