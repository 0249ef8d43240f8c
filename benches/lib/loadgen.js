'use strict'
// A small closed-loop HTTP load generator for the app-impact benchmark, run as its own process:
// `concurrency` keep-alive connections each send a request, wait for the whole response, and
// send the next, until `durationMs` has passed or `maxRequests` were sent. Only loopback
// targets are accepted. The first `warmupMs` are not recorded; when the measured phase starts
// the process sends `{ phase: 'measure' }` to its parent, and at the end the result:
// `{ requests, errors, elapsedMs, rps, p50Ms, p90Ms, p99Ms, maxMs, meanMs }`.

const http = require('node:http')

async function generate({ url, concurrency, durationMs, warmupMs, maxRequests }) {
  const target = new URL(url)
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(target.hostname)) throw new Error(`loadgen: refusing non-loopback target ${url}`)
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })
  const latencies = []
  let errors = 0
  let sent = 0
  let measuring = warmupMs <= 0
  let tMeasure = performance.now()
  const tStart = performance.now()
  const deadline = tStart + warmupMs + durationMs
  if (!measuring) {
    setTimeout(() => {
      measuring = true
      tMeasure = performance.now()
      process.send({ phase: 'measure' })
    }, warmupMs)
  } else process.send({ phase: 'measure' })

  const once = (path) =>
    new Promise((resolve) => {
      const req = http.get({ host: target.hostname, port: target.port, path, agent }, (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode === 200))
        res.on('error', () => resolve(false))
      })
      req.on('error', () => resolve(false))
      req.setTimeout(30_000, () => req.destroy())
    })

  async function worker() {
    while (performance.now() < deadline && (!measuring || latencies.length + errors < maxRequests)) {
      const n = sent++
      const t = performance.now()
      const ok = await once(`${target.pathname}?trace=${n}`)
      if (!measuring || t < tMeasure) continue
      if (ok) latencies.push(performance.now() - t)
      else errors++
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  const elapsedMs = performance.now() - tMeasure
  agent.destroy()
  const sorted = Float64Array.from(latencies).sort()
  const pct = (p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : 0)
  return {
    requests: latencies.length,
    errors,
    elapsedMs,
    rps: latencies.length / (elapsedMs / 1000),
    p50Ms: pct(50),
    p90Ms: pct(90),
    p99Ms: pct(99),
    maxMs: sorted.length ? sorted[sorted.length - 1] : 0,
    meanMs: latencies.reduce((a, b) => a + b, 0) / (latencies.length || 1),
  }
}

if (require.main === module) {
  generate(JSON.parse(process.argv[2])).then(
    (r) => process.send(r, () => process.disconnect()),
    (err) => process.send({ error: err.stack || String(err) }, () => process.disconnect()),
  )
}

module.exports = { generate }
