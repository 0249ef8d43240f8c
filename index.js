'use strict'
// offloop: span export off the Node.js event loop. See README.md.

const { OffloopExporter } = require('./lib/exporter.js')
const { OffloopSpanProcessor } = require('./lib/processor.js')
const { hashPayload } = require('./lib/hash.js')
const { Recording } = require('./lib/replay.js')

module.exports = {
  OffloopExporter,
  OffloopSpanProcessor,
  hashPayload,
  Recording,
}
