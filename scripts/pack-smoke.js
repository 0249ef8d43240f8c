#!/usr/bin/env node
'use strict'
// Packaging smoke test: installs the packed tarballs into an empty project and uses them there
// with no Rust toolchain on PATH.
//
//   1. copies the already built offloop.linux-x64-gnu.node into npm/linux-x64-gnu/ (builds nothing)
//   2. `npm pack`s npm/linux-x64-gnu and the root package into a temp dir and checks their contents
//   3. installs both tarballs into an empty temp project with ONE `npm install --offline` and a
//      private empty cache (the root's optionalDependency offloop-linux-x64-gnu@0.1.0 is then
//      satisfied by the local platform tarball; installing the root tarball alone exits 0 but
//      leaves the binding out)
//   4. runs a check script there (PATH stripped of cargo/rustc): the binary loads from
//      node_modules/offloop-linux-x64-gnu, hashPayload matches, OffloopExporter writes JSONL
//      without @opentelemetry/api installed
//
// Prints PASS/FAIL per step and a summary; exits 1 on failure. Linux x64 glibc only.
// OFFLOOP_SMOKE_KEEP=1 keeps the temp dir for debugging.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { spawnSync } = require('node:child_process')

const ROOT = path.resolve(__dirname, '..')
const PLATFORM = 'linux-x64-gnu'
const BINARY = `offloop.${PLATFORM}.node`
const BUILT = path.join(ROOT, BINARY)
const PLATFORM_DIR = path.join(ROOT, 'npm', PLATFORM)
const STAGED = path.join(PLATFORM_DIR, BINARY)
const ROOT_TARBALL_MAX_BYTES = 200 * 1024
const TIMEOUT_MS = 120_000

const results = []
function record(name, ok, detail) {
  results.push({ name, ok, detail })
  console.log(`${ok ? 'PASS' : 'FAIL'}  ${name}${detail ? ` — ${detail}` : ''}`)
}

class StepError extends Error {}
function fail(name, detail) {
  record(name, false, detail)
  throw new StepError(detail)
}

// Child npm runs must not inherit `npm run`'s npm_config_*/npm_package_* (e.g. local_prefix).
function cleanEnv(extra = {}) {
  const env = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (/^npm_/i.test(k)) continue
    if (['NODE_OPTIONS', 'NODE_PATH', 'NAPI_RS_NATIVE_LIBRARY_PATH', 'NAPI_RS_FORCE_WASI'].includes(k)) continue
    env[k] = v
  }
  return { ...env, ...extra }
}

function run(cmd, args, opts) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024, ...opts })
  const output = `${r.stdout || ''}${r.stderr || ''}`
  return { status: r.error ? -1 : r.status, error: r.error, stdout: r.stdout || '', output }
}

function tail(text, lines = 25) {
  return text.split('\n').filter((l) => l && !/Unknown user config/.test(l)).slice(-lines).join('\n')
}

function sha256File(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex')
}

function isGlibcX64Linux() {
  if (process.platform !== 'linux' || process.arch !== 'x64') return false
  const header = process.report && process.report.getReport ? process.report.getReport().header : {}
  return Boolean(header && header.glibcVersionRuntime)
}

function hasToolchainBinary(dir) {
  return ['cargo', 'rustc'].some((bin) => {
    try {
      fs.accessSync(path.join(dir, bin), fs.constants.X_OK)
      return true
    } catch {
      return false
    }
  })
}

function npmPack(cwd, dest, label) {
  const r = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dest], { cwd, env: cleanEnv() })
  if (r.status !== 0) fail(`npm pack ${label}`, `exit ${r.status}\n${tail(r.output)}`)
  let info
  try {
    info = JSON.parse(r.stdout)[0]
  } catch (err) {
    fail(`npm pack ${label}`, `unparsable --json output: ${err.message}\n${tail(r.stdout)}`)
  }
  return { ...info, tarball: path.join(dest, info.filename), paths: info.files.map((f) => f.path).sort() }
}

// The script run inside the installed project (a separate process with the stripped PATH).
const CHECK_SCRIPT = String.raw`'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const EXPECTED_SHA256 = '6e980c78ddf677ddfa725dcefde674e997182def57ede6d04f8d79136eb4b4a8'
const project = fs.realpathSync(__dirname)
const checks = []
const check = (name, ok, detail) => checks.push({ name, ok: Boolean(ok), detail })

async function main() {
  for (const tool of ['cargo', 'rustc']) {
    const r = spawnSync(tool, ['--version'], { encoding: 'utf8' })
    check(tool + ' not on PATH', r.error && r.error.code === 'ENOENT', r.error ? r.error.code : 'ran: ' + String(r.stdout).trim())
  }

  let otel = null
  try { otel = require.resolve('@opentelemetry/api') } catch {}
  check('@opentelemetry/api not installed', otel === null, otel || 'not resolvable')

  const offloop = require('offloop')
  const entry = fs.realpathSync(require.resolve('offloop'))
  check('offloop resolved from node_modules/offloop', entry === path.join(project, 'node_modules', 'offloop', 'index.js'), entry)

  const expectedBinary = path.join(project, 'node_modules', 'offloop-linux-x64-gnu', 'offloop.linux-x64-gnu.node')
  const loaded = Object.keys(require.cache).filter((k) => k.endsWith('.node')).map((k) => fs.realpathSync(k))
  check('native binary loaded from node_modules/offloop-linux-x64-gnu', loaded.length === 1 && loaded[0] === expectedBinary, loaded.join(', ') || 'no .node in require.cache')
  const viaLoader = fs.realpathSync(require.resolve('offloop-linux-x64-gnu', { paths: [path.join(project, 'node_modules', 'offloop')] }))
  check('offloop-linux-x64-gnu resolves from the root package', viaLoader === expectedBinary, viaLoader)
  const strays = fs.readdirSync(path.join(project, 'node_modules', 'offloop'), { recursive: true }).filter((f) => String(f).endsWith('.node'))
  check('no .node inside node_modules/offloop', strays.length === 0, strays.join(', ') || 'none')

  const input = '{"text":"SELECT 1","values":[1,"a"]}'
  const h = offloop.hashPayload(input, { hashAlgorithm: 'sha256' })
  check('hashPayload sha256 valueHash', h.valueHash === EXPECTED_SHA256, h.valueHash)

  const directory = path.join(project, 'recordings')
  const reports = []
  const exporter = new offloop.OffloopExporter({ directory, hashAlgorithm: 'sha256', onReport: (r) => reports.push(r) })
  const traceId = '0af7651916cd43dd8448eb211c80319c'
  const span = (spanId, parentSpanId, name, kind) => ({
    name,
    kind,
    spanContext: () => ({ traceId, spanId }),
    parentSpanContext: parentSpanId ? { spanId: parentSpanId } : undefined,
    startTime: [1700000000, 0],
    duration: [0, 5000000],
    status: { code: 0 },
    attributes: { 'td.packageName': 'pg', 'td.inputValue': input, 'td.outputValue': '{"rows":[]}' },
    instrumentationScope: { name: 'pack-smoke' },
  })
  const spans = [span('b7ad6b7169203331', null, 'root', 1), span('00f067aa0ba902b7', 'b7ad6b7169203331', 'query', 2)]
  const result = await new Promise((resolve) => exporter.export(spans, resolve))
  check('export() result SUCCESS', result.code === 0, result.error ? result.error.message : 'code ' + result.code)
  await exporter.forceFlush()
  await exporter.shutdown()
  const stats = exporter.stats()
  check('stats: 2 spans written', stats.spansWritten === 2 && stats.spansFailed === 0, JSON.stringify(stats))

  const files = fs.existsSync(directory) ? fs.readdirSync(directory).filter((f) => f.endsWith('.jsonl')) : []
  const lines = files.flatMap((f) => fs.readFileSync(path.join(directory, f), 'utf8').split('\n').filter(Boolean))
  let parsed = []
  try { parsed = lines.map((l) => JSON.parse(l)) } catch (err) { check('JSONL lines parse', false, err.message) }
  const ids = parsed.filter((s) => s.traceId === traceId).map((s) => s.spanId).sort()
  check('JSONL written for both spans', ids.join(',') === '00f067aa0ba902b7,b7ad6b7169203331', files.length + ' file(s), ' + lines.length + ' line(s)')
}

main().then(
  () => finish(),
  (err) => { check('check script ran', false, err && err.stack); finish() },
)
function finish() {
  process.stdout.write('@@RESULTS@@' + JSON.stringify(checks) + '\n')
  process.exitCode = checks.every((c) => c.ok) ? 0 : 1
}
`

function main() {
  const started = Date.now()
  let tmp
  let stagedBackup
  let stagedCreated = false
  try {
    if (!isGlibcX64Linux()) fail('host is linux-x64-gnu', `${process.platform}-${process.arch}; this smoke test packs the linux-x64-gnu binary only`)
    if (!fs.existsSync(BUILT)) fail('built binary present', `${path.relative(ROOT, BUILT)} is missing; run \`npm run build\` first`)
    record('built binary present', true, `${path.relative(ROOT, BUILT)} (${fs.statSync(BUILT).size} bytes)`)

    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'offloop-pack-smoke-'))
    const packs = path.join(tmp, 'tarballs')
    const project = path.join(tmp, 'project')
    fs.mkdirSync(packs)
    fs.mkdirSync(project)

    // (a) stage the binary in the platform package (restored/removed in finally)
    if (fs.existsSync(STAGED)) {
      stagedBackup = path.join(tmp, `${BINARY}.orig`)
      fs.copyFileSync(STAGED, stagedBackup)
    } else {
      stagedCreated = true
    }
    fs.copyFileSync(BUILT, STAGED)
    const builtHash = sha256File(BUILT)
    if (sha256File(STAGED) !== builtHash) fail('stage binary', 'copy differs from the built binary (rebuilt mid-copy?)')
    record('stage binary', true, path.relative(ROOT, STAGED))

    // (b) pack both packages
    const plat = npmPack(PLATFORM_DIR, packs, `offloop-${PLATFORM}`)
    const platExpected = [BINARY, 'README.md', 'package.json']
    if (plat.paths.join() !== platExpected.sort().join()) fail(`npm pack offloop-${PLATFORM}`, `unexpected files: ${plat.paths.join(', ')}`)
    record(`npm pack offloop-${PLATFORM}`, true, `${plat.filename}: ${plat.size} B packed, ${plat.unpackedSize} B unpacked, files ${plat.paths.join(', ')}`)

    const root = npmPack(ROOT, packs, 'offloop')
    const missing = ['index.js', 'index.d.ts', 'binding.js', 'binding.d.ts', 'package.json'].filter((f) => !root.paths.includes(f))
    if (!root.paths.some((f) => f.startsWith('lib/'))) missing.push('lib/')
    const unwanted = root.paths.filter((f) => /\.node$|^crates\/|^target\/|^npm\/|^node_modules\/|\.tgz$/.test(f))
    if (missing.length || unwanted.length) fail('npm pack offloop', `missing: ${missing.join(', ') || '-'}; unwanted: ${unwanted.join(', ') || '-'}`)
    if (root.size > ROOT_TARBALL_MAX_BYTES) fail('npm pack offloop', `tarball ${root.size} B exceeds ${ROOT_TARBALL_MAX_BYTES} B`)
    record('npm pack offloop', true, `${root.filename}: ${root.size} B packed, ${root.unpackedSize} B unpacked, ${root.paths.length} files`)

    // (c) one offline install of both tarballs into an empty project, with an empty private cache
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'offloop-pack-smoke', version: '0.0.0', private: true }, null, 2))
    const install = run(
      'npm',
      ['install', '--offline', '--cache', path.join(tmp, 'npm-cache'), '--no-audit', '--no-fund', '--loglevel=warn', plat.tarball, root.tarball],
      { cwd: project, env: cleanEnv() },
    )
    if (install.status !== 0) fail('npm install (offline, both tarballs)', `exit ${install.status}\n${tail(install.output)}`)
    const installedBinary = path.join(project, 'node_modules', `offloop-${PLATFORM}`, BINARY)
    if (!fs.existsSync(installedBinary)) fail('npm install (offline, both tarballs)', `${installedBinary} missing after install\n${tail(install.output)}`)
    if (sha256File(installedBinary) !== builtHash) fail('npm install (offline, both tarballs)', 'installed binary differs from the built one')
    record('npm install (offline, both tarballs)', true, 'offloop + offloop-linux-x64-gnu installed, binary identical to the build')

    // (d) use it with no Rust toolchain on PATH
    const PATH = (process.env.PATH || '').split(path.delimiter).filter((d) => d && !hasToolchainBinary(d))
    fs.writeFileSync(path.join(project, 'check.js'), CHECK_SCRIPT)
    const r = run(process.execPath, ['check.js'], { cwd: project, env: cleanEnv({ PATH: PATH.join(path.delimiter) }) })
    const marker = r.stdout.split('\n').find((l) => l.startsWith('@@RESULTS@@'))
    if (!marker) fail('check script', `exit ${r.status}, no results\n${tail(r.output)}`)
    for (const c of JSON.parse(marker.slice('@@RESULTS@@'.length))) record(`installed: ${c.name}`, c.ok, c.detail)
    if (r.status !== 0 && results.every((c) => c.ok)) record('check script exit code', false, `exit ${r.status}\n${tail(r.output)}`)
  } catch (err) {
    if (!(err instanceof StepError)) record('pack-smoke ran', false, err && err.stack)
  } finally {
    try {
      if (stagedBackup) fs.copyFileSync(stagedBackup, STAGED)
      else if (stagedCreated) fs.rmSync(STAGED, { force: true })
    } catch (err) {
      record('restore npm/linux-x64-gnu', false, err.message)
    }
    if (tmp) {
      if (process.env.OFFLOOP_SMOKE_KEEP) console.log(`kept ${tmp}`)
      else fs.rmSync(tmp, { recursive: true, force: true })
    }
  }

  const failed = results.filter((c) => !c.ok)
  const secs = ((Date.now() - started) / 1000).toFixed(1)
  if (failed.length === 0 && results.length > 0) {
    console.log(`\npack-smoke: PASS (${results.length} checks, ${secs}s)`)
    return 0
  }
  console.log(`\npack-smoke: FAIL (${failed.length} of ${results.length} checks failed: ${failed.map((c) => c.name).join('; ')}; ${secs}s)`)
  return 1
}

process.exitCode = main()
