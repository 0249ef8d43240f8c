'use strict'
// One record run: deterministic span content (seeded) through a real SDK into an
// OffloopExporter. Used in-process and, as a CLI, in a separate process, so two runs share
// nothing but the content.
//
//   node record-run.js '{"directory":"…","hashAlgorithm":"sha256","sdk":1,"processor":"SimpleSpanProcessor","workers":2}'

const { OffloopExporter } = require('../..')
const { SDKS, makeProvider, createSpans, pgAttributes } = require('./otel.js')
const { mulberry32, genPayload, genMerges } = require('./tusk-reference.js')

const SEED = 20240611
const COUNT = 96

/** td.* attributes for span `i`: pg spans and seeded generated payloads with merges. */
function contentAttributes(count = COUNT, seed = SEED) {
  const rng = mulberry32(seed)
  const out = []
  for (let i = 0; i < count; i++) {
    if (i % 3 === 0) {
      out.push(pgAttributes(i))
      continue
    }
    const input = genMerges(rng, genPayload(rng))
    const output = genMerges(rng, genPayload(rng))
    const attrs = {
      'td.name': `generated #${i}`,
      'td.packageName': 'http',
      'td.packageType': 1,
      'td.inputValue': JSON.stringify(input.value),
      'td.outputValue': JSON.stringify(output.value),
    }
    if (input.merges) attrs['td.inputSchemaMerges'] = JSON.stringify(input.merges)
    if (output.merges) attrs['td.outputSchemaMerges'] = JSON.stringify(output.merges)
    out.push(attrs)
  }
  return out
}

async function recordRun({ directory, hashAlgorithm, sdk = 0, processor = 'BatchSpanProcessor', workers }) {
  const s = typeof sdk === 'number' ? SDKS[sdk] : sdk
  const exporter = new OffloopExporter({ directory, hashAlgorithm, workers })
  const provider = makeProvider(s, [new s.mod[processor](exporter)])
  const attrs = contentAttributes()
  createSpans(provider.getTracer('tusk-drift-sdk'), attrs.length, (i) => attrs[i], { perTrace: 8 })
  await provider.forceFlush()
  await exporter.forceFlush()
  await provider.shutdown()
  return exporter.stats()
}

module.exports = { contentAttributes, recordRun, COUNT }

if (require.main === module) {
  recordRun(JSON.parse(process.argv[2])).then(
    (stats) => process.stdout.write(JSON.stringify(stats)),
    (err) => {
      console.error(err)
      process.exit(1)
    },
  )
}
