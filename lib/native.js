'use strict'
// Loads the native binding and turns user options into its options.

const path = require('node:path')
const binding = require('../binding.js')

const HASH_ALGORITHMS = ['blake3', 'sha256']
const FORMATS = ['jsonl', 'proto']

function optionalNumber(options, name) {
  const v = options[name]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
    throw new TypeError(`offloop: ${name} must be a positive number, got ${String(v)}`)
  }
  return v
}

function nativeOptions(options = {}, extra = {}) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('offloop: options must be an object')
  }
  const { hashAlgorithm = 'blake3', format = 'jsonl', onBatch } = options
  if (!HASH_ALGORITHMS.includes(hashAlgorithm)) {
    throw new TypeError(`offloop: hashAlgorithm must be one of ${HASH_ALGORITHMS.join(', ')}, got ${String(hashAlgorithm)}`)
  }
  if (!FORMATS.includes(format)) {
    throw new TypeError(`offloop: format must be one of ${FORMATS.join(', ')}, got ${String(format)}`)
  }
  if (onBatch !== undefined && typeof onBatch !== 'function') {
    throw new TypeError('offloop: onBatch must be a function')
  }
  let directory = options.directory
  if (directory === undefined && onBatch === undefined) directory = path.resolve('recordings')
  if (directory !== undefined && directory !== null) {
    if (typeof directory !== 'string' || directory === '') throw new TypeError('offloop: directory must be a non-empty string')
    directory = path.resolve(directory)
  } else {
    directory = undefined
  }
  for (const name of ['environment', 'serviceId', 'sdkVersion', 'sdkInstanceId']) {
    if (options[name] !== undefined && typeof options[name] !== 'string') {
      throw new TypeError(`offloop: ${name} must be a string`)
    }
  }
  const workers = optionalNumber(options, 'workers')
  const threads = optionalNumber(options, 'threads')
  return {
    directory,
    hashAlgorithm,
    format,
    environment: options.environment,
    maxSpanBytes: optionalNumber(options, 'maxSpanBytes'),
    maxQueueBytes: optionalNumber(options, 'maxQueueBytes'),
    exportTimeoutMillis: optionalNumber(options, 'exportTimeoutMillis'),
    workers: workers === undefined ? undefined : Math.floor(workers),
    threads: threads === undefined ? undefined : Math.floor(threads),
    serviceId: options.serviceId,
    sdkVersion: options.sdkVersion,
    sdkInstanceId: options.sdkInstanceId,
    ...extra,
  }
}

// The native side awaits the returned promise; a throw or rejection fails that batch's spans
// (reported in stats and the batch report), it never crashes the process.
function wrapOnBatch(onBatch) {
  if (typeof onBatch !== 'function') return undefined
  return (bytes) => new Promise((resolve) => resolve(onBatch(bytes))).then(() => undefined)
}

// `onReport` (processor mode only) receives the report of every batch the native processor
// forms; the exporter gets its reports from export() instead.
function createNative(options, extra, onReport) {
  return new binding.NativeExporter(nativeOptions(options, extra), wrapOnBatch(options && options.onBatch), onReport)
}

module.exports = { binding, createNative, nativeOptions }
