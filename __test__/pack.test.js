'use strict'
// Packaging: the packed tarballs install into an empty project and work there without Rust.
// Runs scripts/pack-smoke.js (npm pack + offline npm install, ~3 s).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const ROOT = path.resolve(__dirname, '..')
const BINARY = path.join(ROOT, 'offloop.linux-x64-gnu.node')

function skipReason() {
  if (process.platform !== 'linux' || process.arch !== 'x64') return `pack smoke covers linux-x64-gnu only (host ${process.platform}-${process.arch})`
  const header = process.report.getReport().header
  if (!header.glibcVersionRuntime) return 'pack smoke covers linux-x64-gnu only (host libc is not glibc)'
  if (!fs.existsSync(BINARY)) return 'offloop.linux-x64-gnu.node is not built (run `npm run build`)'
  return undefined
}

test('packed tarballs install offline and work without a Rust toolchain', { timeout: 90_000 }, (t) => {
  const reason = skipReason()
  if (reason) {
    t.skip(reason)
    return
  }
  const r = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'pack-smoke.js')], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 80_000,
  })
  const output = `${r.stdout}${r.stderr}`
  assert.equal(r.error, undefined, `pack-smoke did not run: ${r.error}`)
  assert.equal(r.status, 0, `pack-smoke exited ${r.status}:\n${output}`)
  assert.match(r.stdout, /^pack-smoke: PASS/m, output)
  assert.doesNotMatch(r.stdout, /^FAIL /m, output)
})
