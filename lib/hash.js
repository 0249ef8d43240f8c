'use strict'
// hashPayload: the exporter's own hashing code, callable from JS (replay side, tests).

const { binding } = require('./native.js')

function hashPayload(json, options = {}) {
  const input = typeof json === 'string' || Buffer.isBuffer(json) ? json : JSON.stringify(json)
  if (input === undefined) throw new TypeError('offloop: hashPayload needs a JSON string, Buffer or JSON-able value')
  let schemaMerges = options.schemaMerges
  if (schemaMerges !== undefined && schemaMerges !== null && typeof schemaMerges !== 'string') {
    schemaMerges = JSON.stringify(schemaMerges)
  }
  const r = binding.hashPayload(input, {
    hashAlgorithm: options.hashAlgorithm,
    schemaMerges: schemaMerges ?? undefined,
  })
  return {
    valueHash: r.valueHash,
    schemaHash: r.schemaHash,
    schema: JSON.parse(r.schemaJson),
    decodedValue: JSON.parse(r.decodedValueJson),
  }
}

module.exports = { hashPayload }
