'use strict'
// Tables (console and markdown from one column list), child-process plumbing and the
// machine description shared by the Node benchmarks.

const { fork } = require('node:child_process')
const os = require('node:os')

/** @param {[string, (row) => string][]} cols  header + cell function; first column left-aligned */
function consoleTable(cols, rows) {
  const cells = rows.map((r) => cols.map(([, f]) => String(f(r))))
  const widths = cols.map(([h], i) => Math.max(h.length, ...cells.map((c) => c[i].length)))
  const line = (c) => c.map((x, i) => (i === 0 ? x.padEnd(widths[i]) : x.padStart(widths[i]))).join('  ')
  return [line(cols.map(([h]) => h)), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n')
}

/** `left`: how many leading columns are left-aligned (the rest are numbers, right-aligned). */
function markdownTable(cols, rows, { left = 1 } = {}) {
  const head = `| ${cols.map(([h]) => h).join(' | ')} |`
  const sep = `|${cols.map((_, i) => (i < left ? '---' : '---:')).join('|')}|`
  return [head, sep, ...rows.map((r) => `| ${cols.map(([, f]) => String(f(r))).join(' | ')} |`)].join('\n')
}

const num = (x, d = 0) => (x === null || x === undefined || Number.isNaN(x) ? 'n/a' : Number(x).toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }))

/** Forks `file` with `args`; resolves the first IPC message (a result, or `{error}`). */
function runChild(file, args, { execArgv = ['--expose-gc'], env } = {}) {
  return new Promise((resolve, reject) => {
    const child = fork(file, args, { execArgv, env: env ? { ...process.env, ...env } : process.env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    let result
    child.on('message', (m) => {
      if (result === undefined) result = m
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (result && result.error) reject(new Error(result.error))
      else if (result) resolve(result)
      else reject(new Error(`${file} ${args.join(' ')}: exited with ${signal || code} and no result`))
    })
  })
}

/** Runs `fn` in a child and sends its result (or error) to the parent, then disconnects. */
async function childMain(fn) {
  let msg
  try {
    msg = await fn()
  } catch (err) {
    msg = { error: (err && err.stack) || String(err) }
  }
  process.send(msg, () => process.disconnect())
}

function machine() {
  const cpus = os.cpus()
  return {
    node: process.version,
    cpus: cpus.length,
    cpuModel: cpus[0] ? cpus[0].model.trim() : 'unknown',
    platform: `${os.platform()} ${os.release()}`,
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    loadavg: os.loadavg().map((l) => Math.round(l * 100) / 100),
    date: new Date().toISOString(),
  }
}

module.exports = { consoleTable, markdownTable, num, runChild, childMain, machine }
