'use strict'
// A local OTLP/HTTP sink for the benchmarks: listens on 127.0.0.1 only, reads and discards each
// request body, replies 200 (`{}` for JSON, an empty body for protobuf). GET /stats returns
// `{ requests, bytes }` received so far. Runs in its own process:
//
//   const sink = await startSink()   // forks this file
//   sink.url                         // http://127.0.0.1:<port>
//   await sink.stop()

const http = require('node:http')
const { fork } = require('node:child_process')

function serve() {
  let requests = 0
  let bytes = 0
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/stats') {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ requests, bytes }))
      return
    }
    req.on('data', (chunk) => {
      bytes += chunk.length
    })
    req.on('end', () => {
      requests++
      const json = String(req.headers['content-type'] || '').includes('json')
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' })
      res.end(json ? '{}' : '')
    })
  })
  server.keepAliveTimeout = 60_000
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }))
  process.on('disconnect', () => process.exit(0))
}

/** Forks the sink; resolves `{ url, stop() }` once it listens. */
function startSink() {
  return new Promise((resolve, reject) => {
    const child = fork(__filename, ['--serve'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`sink exited early (${code})`)))
    child.once('message', ({ port }) => {
      child.removeAllListeners('exit')
      resolve({
        url: `http://127.0.0.1:${port}`,
        stop: () =>
          new Promise((done) => {
            if (child.exitCode !== null) return done()
            child.once('exit', () => done())
            child.disconnect()
          }),
      })
    })
  })
}

if (require.main === module && process.argv.includes('--serve')) serve()

module.exports = { startSink }
