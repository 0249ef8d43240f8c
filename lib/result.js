'use strict'
// Maps a native batch report to an OpenTelemetry ExportResult.

// ExportResultCode from @opentelemetry/core (kept as numbers to avoid the dependency).
const SUCCESS = 0
const FAILED = 1

function summarize(report, errors) {
  const shown = errors
    .slice(0, 3)
    .map((e) => `span ${e.spanId || '#' + e.index} [${e.stage}]: ${e.message}`)
    .join('; ')
  const more = errors.length > 3 ? `; and ${errors.length - 3} more` : ''
  return `${errors.length} of ${report.spans} spans failed: ${shown}${more}`
}

// The export fails (for OTel) when the batch was refused or a sink could not write: that is
// an infrastructure problem the SDK should hear about. Spans rejected for their own content
// (bad JSON, bad ids) fail alone and are reported as data (`onReport`, `stats()`, a warning),
// so one bad span does not make `forceFlush()` reject for the whole batch.
function reportError(report) {
  if (report.rejected) {
    const error = new Error(`offloop: ${report.rejected}`)
    error.report = report
    return error
  }
  const sinkErrors = report.errors.filter((e) => e.stage === 'sink')
  if (sinkErrors.length === 0) return undefined
  const error = new Error(`offloop: ${summarize(report, sinkErrors)}`)
  error.report = report
  return error
}

// Warns about spans rejected for their content: the first 5 batches, then every 100th.
let warned = 0
function warnSpanErrors(report) {
  const failures = report.errors.filter((e) => !e.dropped && e.stage !== 'sink')
  if (failures.length === 0) return
  warned++
  if (warned > 5 && warned % 100 !== 0) return
  process.emitWarning(`offloop: ${summarize(report, failures)}`, { code: 'OFFLOOP_SPAN_ERROR' })
}

module.exports = { SUCCESS, FAILED, reportError, warnSpanErrors }
