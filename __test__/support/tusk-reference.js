'use strict';

// Reference implementations for parity tests.
//
// Exposes the *real* code shipped by the installed devDependencies:
//   - @use-tusk/drift-node-sdk  (pure JS): JsonSchemaHelper / SpanTransformer.
//     The package only exports `TuskDrift`, so we compile its dist file with a
//     one-line export appended (the classes themselves are untouched).
//   - @use-tusk/drift-core-node (Rust napi binding, prebuilt .node files).
//
// Plus a seeded, deterministic payload / schema-merge generator.
//
// Loading side effects of the SDK dist (checked on Node 20):
//   - no timers, sockets, process listeners, global or require() patching;
//   - BUT evaluating the bundle constructs `TuskDrift = new TuskDriftSDK()`,
//     which reads process.env.TUSK_DRIFT_MODE and looks for
//     <project root>/.tusk/config.yaml, logging
//     "[TuskDrift] No config file found at ..." via console.error when missing.
//   We neutralize that by swapping the console methods for capturing stubs
//   during the synchronous compile (captured lines: `tuskJsLoadLog()`), and by
//   setting the bundle's own logger to "silent" afterwards (JsonSchemaHelper
//   only logs at debug level anyway; SpanTransformer may logger.warn).
//   The compiled module is NOT inserted into require.cache.

const fs = require('fs');
const path = require('path');
const Module = require('module');

const PROJECT_ROOT = path.resolve(__dirname, '..', '..');

function resolveFromProject(request) {
  return require.resolve(request, { paths: [PROJECT_ROOT] });
}

// ---------------------------------------------------------------------------
// JS reference (drift-node-sdk)
// ---------------------------------------------------------------------------

let jsCache; // undefined = not tried; null = failed; object = loaded
let jsReason = null;
let jsLoadLog = [];

// Top-level bindings in dist/index.cjs that we re-export. Extra enums are
// exposed for convenience; the required pair is JsonSchemaHelper/SpanTransformer.
const EXPORT_SNIPPET =
  '\n;module.exports.__offloopRef = { JsonSchemaHelper, SpanTransformer, ' +
  'JsonSchemaType, EncodingType, DecodedType, TdSpanAttributes };\n' +
  ';try { initializeGlobalLogger({ logLevel: "silent" }); } catch (_) {}\n';

/**
 * @returns {{JsonSchemaHelper: Function, SpanTransformer: Function,
 *            JsonSchemaType: object, EncodingType: object, DecodedType: object,
 *            TdSpanAttributes: object} | null}
 *   null when the SDK cannot be loaded; see tuskJsUnavailableReason().
 */
function loadTuskJs() {
  if (jsCache !== undefined) return jsCache;
  jsCache = null;
  let filename;
  try {
    // package "exports" maps require('.') to ./dist/index.cjs
    filename = resolveFromProject('@use-tusk/drift-node-sdk');
  } catch (e) {
    jsReason = `@use-tusk/drift-node-sdk not resolvable: ${e.message}`;
    return null;
  }
  if (!/\.cjs$/.test(filename)) {
    jsReason = `unexpected entry point ${filename} (expected dist/index.cjs)`;
    return null;
  }
  let src;
  try {
    src = fs.readFileSync(filename, 'utf8');
  } catch (e) {
    jsReason = `cannot read ${filename}: ${e.message}`;
    return null;
  }
  if (!/^var JsonSchemaHelper = class JsonSchemaHelper\b/m.test(src) ||
      !/^var SpanTransformer = class SpanTransformer\b/m.test(src)) {
    jsReason = `${filename} has no top-level JsonSchemaHelper/SpanTransformer (SDK layout changed)`;
    return null;
  }
  // The file ends with a `//# sourceMappingURL=` comment without a trailing
  // newline, so the snippet must start on a new line.
  src += EXPORT_SNIPPET;

  const mod = new Module(filename, null);
  mod.filename = filename;
  mod.paths = Module._nodeModulePaths(path.dirname(filename));

  const methods = ['log', 'info', 'warn', 'error', 'debug', 'trace'];
  const saved = {};
  const log = [];
  for (const m of methods) {
    saved[m] = console[m];
    console[m] = (...args) => { log.push({ level: m, args: args.map(String).join(' ') }); };
  }
  try {
    mod._compile(src, filename);
  } catch (e) {
    jsReason = `compiling ${filename} failed: ${e && e.stack || e}`;
    return null;
  } finally {
    for (const m of methods) console[m] = saved[m];
    jsLoadLog = log;
  }
  const ref = mod.exports && mod.exports.__offloopRef;
  if (!ref || typeof ref.JsonSchemaHelper !== 'function' ||
      typeof ref.JsonSchemaHelper.generateSchemaAndHash !== 'function' ||
      typeof ref.SpanTransformer !== 'function') {
    jsReason = 'compiled SDK did not expose JsonSchemaHelper.generateSchemaAndHash / SpanTransformer';
    return null;
  }
  jsCache = Object.freeze({ ...ref });
  jsReason = null;
  return jsCache;
}

/** @returns {string|null} why loadTuskJs() returned null (null if it loaded or was not tried). */
function tuskJsUnavailableReason() {
  return jsReason;
}

/** @returns {{level: string, args: string}[]} console output swallowed while compiling the SDK. */
function tuskJsLoadLog() {
  return jsLoadLog.slice();
}

// ---------------------------------------------------------------------------
// Rust reference (drift-core-node)
// ---------------------------------------------------------------------------

let rustCache;
let rustReason = null;

/**
 * @returns {object|null} the @use-tusk/drift-core-node module (normalizeJson,
 *   deterministicHash, normalizeAndHash, processExportPayload, ...) or null;
 *   see tuskRustUnavailableReason().
 */
function loadTuskRust() {
  if (rustCache !== undefined) return rustCache;
  rustCache = null;
  let mod;
  try {
    mod = require(resolveFromProject('@use-tusk/drift-core-node'));
  } catch (e) {
    rustReason = `@use-tusk/drift-core-node failed to load: ${e && e.message || e}`;
    return null;
  }
  if (!mod || typeof mod.processExportPayload !== 'function') {
    rustReason = '@use-tusk/drift-core-node has no processExportPayload()';
    return null;
  }
  try {
    const r = mod.processExportPayload('{}');
    if (!r || typeof r.decodedValueHash !== 'string') throw new Error('unexpected result shape');
  } catch (e) {
    rustReason = `@use-tusk/drift-core-node processExportPayload('{}') failed: ${e && e.message || e}`;
    return null;
  }
  rustCache = mod;
  rustReason = null;
  return rustCache;
}

/** @returns {string|null} */
function tuskRustUnavailableReason() {
  return rustReason;
}

// ---------------------------------------------------------------------------
// referenceHash
// ---------------------------------------------------------------------------

/**
 * The real JsonSchemaHelper.generateSchemaAndHash(value, merges).
 * @returns {{schema: object, decodedValueHash: string, decodedSchemaHash: string}}
 * @throws if the JS reference is unavailable, or if the reference itself throws
 *   (e.g. value === undefined, or null root with an `encoding` merge).
 */
function referenceHash(value, merges) {
  const ref = loadTuskJs();
  if (!ref) throw new Error(`Tusk JS reference unavailable: ${jsReason}`);
  return ref.JsonSchemaHelper.generateSchemaAndHash(value, merges);
}

// ---------------------------------------------------------------------------
// Deterministic generator
// ---------------------------------------------------------------------------

/** Standard mulberry32 PRNG: returns () => float in [0, 1). */
function mulberry32(seed) {
  let a = seed >>> 0;
  return function rng() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const int = (rng, lo, hi) => lo + Math.floor(rng() * (hi - lo + 1)); // inclusive
const pick = (rng, arr) => arr[Math.floor(rng() * arr.length)];
const chance = (rng, p) => rng() < p;

const EDGE_NUMBERS = [
  0, -0, 1, -1, 1e21, 1e-7, 0.000001, 2 ** 53 + 2, 20000000000000000000,
  -1.5e300, 0.1 + 0.2, 5e-324, 1.7976931348623157e308, 9007199254740993,
  2 ** 53, -(2 ** 53), 1e20, 123.456, -1e-7, 1.5, 2 ** 31, -(2 ** 31), 2 ** 32,
  100, 1e16, 4294967295,
];

// Code-point pools. Astral vs U+E000–U+FFFF matters for key sort order
// (UTF-16 code-unit order vs UTF-8 byte / code-point order).
const CHAR_POOLS = [
  () => 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.:/',
  () => '"\\\'/`{}[],:',
  () => '\u0000\u0001\u0007\b\t\n\u000b\f\r\u001b\u001f\u007f\u0080\u009f',
  () => '\u2028\u2029\u00a0\u00e9\u00ff\u0301\u200b\u200d',
  () => '\ue000\ue0ff\uf8ff\uf900\ufb01\ufeff\uff01\uffe0\ufffd\ufffe\uffff',
  () => '\u4e2d\u6587\u0416\u05d0\u0627',
];
const ASTRAL = [
  '\u{1F600}', '\u{1F4A9}', '\u{1D11E}', '\u{10000}', '\u{10FFFF}', '\u{1F1FA}\u{1F1F8}',
  '\u{1F468}\u200d\u{1F469}', '\u{20BB7}', '\u{E0001}',
];
const SPECIAL_STRINGS = [
  '', ' ', 'null', 'true', '0', '-0', '1e21', '{}', '[]', '{"a":1}', 'NaN',
  'eyJrIjoidiJ9', '\\u0000', '</script>', 'a\u0000b', '\ud83d\ude00',
];

function genString(rng, opts, maxLen = 12) {
  if (chance(rng, 0.12)) return pick(rng, SPECIAL_STRINGS);
  const len = int(rng, 0, maxLen);
  let s = '';
  for (let i = 0; i < len; i++) {
    const r = rng();
    if (r < 0.12) s += pick(rng, ASTRAL);
    else if (opts.loneSurrogates && r < 0.14) s += pick(rng, ['\ud800', '\udfff', '\udc00x']);
    else {
      const pool = CHAR_POOLS[Math.floor(rng() * CHAR_POOLS.length)]();
      s += pool[Math.floor(rng() * pool.length)];
    }
  }
  return s;
}

// Keys that look like array indices / integers (V8 orders canonical array
// indices <= 2**32-2 first, numerically, in Object.keys and JSON.stringify)
// and keys that are easy to confuse.
const SPECIAL_KEYS = [
  '0', '1', '2', '9', '10', '01', '00', '-1', '1.0', '1e3', ' 1', '4294967294',
  '4294967295', '4294967296', '9007199254740993',
  'a', 'A', 'a ', ' a', 'aa', 'a\u0000', '\u00e9', 'e\u0301', '\ufeffa', '',
  '\ue000', '\uffff', '\u{1F600}', '\u{10000}', 'z\u{1F600}', 'z\ue000',
  'constructor', 'toString', 'hasOwnProperty', 'valueOf',
  'body', 'headers', 'text', 'values', 'type', 'properties', 'items',
];

function genKey(rng, opts) {
  if (opts.protoKeys && chance(rng, 0.01)) return '__proto__';
  if (chance(rng, 0.55)) return pick(rng, SPECIAL_KEYS);
  return genString(rng, opts, 6);
}

function genNumber(rng) {
  const r = rng();
  if (r < 0.45) return pick(rng, EDGE_NUMBERS);
  if (r < 0.7) return int(rng, -1000, 1000);
  if (r < 0.85) return int(rng, -(2 ** 40), 2 ** 40);
  // random double with a random exponent
  const mant = (rng() * 2 - 1) * 10;
  return Number((mant * 10 ** int(rng, -30, 30)).toPrecision(int(rng, 1, 17)));
}

function setOwn(obj, key, val) {
  // plain assignment would set the prototype for "__proto__"
  Object.defineProperty(obj, key, { value: val, enumerable: true, writable: true, configurable: true });
}

function genValue(rng, depth, opts) {
  const leafOnly = depth >= opts.maxDepth;
  const r = rng();
  if (!leafOnly && r < 0.18) return genObject(rng, depth + 1, opts);
  if (!leafOnly && r < 0.32) return genArray(rng, depth + 1, opts);
  const l = rng();
  if (l < 0.38) return genString(rng, opts);
  if (l < 0.72) return genNumber(rng);
  if (l < 0.84) return chance(rng, 0.5);
  if (l < 0.94 || leafOnly) return null;
  return chance(rng, 0.5) ? {} : [];
}

function genObject(rng, depth, opts) {
  const obj = {};
  if (chance(rng, 0.1)) return obj;
  const n = int(rng, 1, 6);
  for (let i = 0; i < n; i++) setOwn(obj, genKey(rng, opts), genValue(rng, depth, opts));
  return obj;
}

function genArray(rng, depth, opts) {
  if (chance(rng, 0.12)) return [];
  const n = int(rng, 1, 5);
  const arr = [];
  for (let i = 0; i < n; i++) arr.push(genValue(rng, depth, opts));
  return arr;
}

/**
 * Random JSON-able payload: always a plain object at the root (1..8 keys),
 * nesting depth <= opts.maxDepth (default 6, root counts as depth 1).
 * May contain -0 (JSON.stringify turns it into 0).
 * opts: { maxDepth = 6, loneSurrogates = false, protoKeys = true }
 *   protoKeys: rarely emits an own "__proto__" key (defined via defineProperty).
 */
function genPayload(rng, opts = {}) {
  const o = { maxDepth: 6, loneSurrogates: false, protoKeys: true, ...opts };
  const root = {};
  const n = int(rng, 0, 8);
  for (let i = 0; i < n; i++) setOwn(root, genKey(rng, o), genValue(rng, 1, o));
  return root;
}

function toBase64Variant(rng, text) {
  let b64 = Buffer.from(text, 'utf8').toString('base64');
  const v = rng();
  if (v < 0.2) {
    // url-safe alphabet, padding stripped
    b64 = b64.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  } else if (v < 0.35) {
    // MIME-style line breaks and stray spaces
    b64 = b64.replace(/.{1,8}/g, (m) => m + pick(rng, ['\n', '\r\n', ' ', '\t', '']));
  } else if (v < 0.42) {
    b64 = b64.replace(/=+$/, ''); // missing padding
  }
  return b64;
}

function genJsonText(rng, opts) {
  const r = rng();
  if (r < 0.15) {
    // invalid JSON
    return pick(rng, [
      '{not json', '{"a":1,}', 'undefined', "{'a':1}", '[1,2', 'plain text \u00e9', '', 'NaN',
      '{"a":1}garbage', '\u{1F600}',
    ]);
  }
  let v;
  if (r < 0.65) v = genObject(rng, 3, opts);
  else if (r < 0.8) v = genArray(rng, 3, opts);
  else v = genValue(rng, opts.maxDepth, opts); // scalar
  let text = JSON.stringify(v);
  if (r > 0.55 && r < 0.6) text = JSON.stringify(v, null, 2);
  if (chance(rng, 0.1)) text = '  ' + text + '\n';
  return text;
}

/**
 * Random Tusk schema merges for some top-level keys of `payload`.
 * Does not mutate `payload`; returns a shallow-copied value where keys with an
 * {encoding:1, ...} merge may have been replaced by a base64 string.
 * Merge kinds: {encoding:1, decodedType:1} (base64 of JSON text, sometimes
 * invalid JSON / url-safe / whitespace), {encoding:1} without decodedType,
 * {matchImportance:0|1|0.5}, {decodedType:1} without encoding; rarely a merge
 * for a key absent from the payload. merges is null ~15% of the time.
 * @returns {{value: object, merges: object|null}}
 */
function genMerges(rng, payload, opts = {}) {
  const o = { maxDepth: 6, loneSurrogates: false, protoKeys: false, ...opts };
  const value = {};
  for (const k of Object.keys(payload)) setOwn(value, k, payload[k]);
  if (chance(rng, 0.15)) return { value, merges: null };
  const merges = {};
  for (const key of Object.keys(value)) {
    if (key === '__proto__' || !chance(rng, 0.45)) continue;
    const kind = rng();
    if (kind < 0.35) {
      setOwn(merges, key, { encoding: 1, decodedType: 1 });
      if (chance(rng, 0.9)) value[key] = toBase64Variant(rng, genJsonText(rng, o));
    } else if (kind < 0.55) {
      setOwn(merges, key, { encoding: 1 });
      if (chance(rng, 0.85)) {
        const text = chance(rng, 0.6) ? genJsonText(rng, o) : genString(rng, o, 20);
        value[key] = toBase64Variant(rng, text);
      }
    } else if (kind < 0.85) {
      setOwn(merges, key, { matchImportance: pick(rng, [0, 1, 0.5]) });
    } else {
      setOwn(merges, key, { decodedType: 1 });
    }
  }
  if (chance(rng, 0.1)) {
    merges[pick(rng, ['missingKey', 'body', 'zz'])] =
      pick(rng, [{ encoding: 1, decodedType: 1 }, { matchImportance: 0 }]);
  }
  return { value, merges };
}

// ---------------------------------------------------------------------------
// Parity vectors
// ---------------------------------------------------------------------------

/** Hand-written vectors with known expected hashes (sha256 of canonical JSON). */
const REFERENCE_VECTORS = Object.freeze([
  {
    name: 'empty-object',
    value: {},
    merges: null,
    expect: {
      valueHash: '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a',
      schemaHash: 'ab249fbec6dbf0d17e3d2eae4ede338e9d8b20f6f442559935a494a5ad09f9a5',
    },
  },
  {
    name: 'pg-query-no-merges',
    value: { text: 'SELECT 1', values: [1, 'a'] },
    merges: null,
    expect: {
      valueHash: '6e980c78ddf677ddfa725dcefde674e997182def57ede6d04f8d79136eb4b4a8',
      schemaHash: 'd556154172a9ec3523dc5aef54575a356c2e4c15a8649afb12f42122e87dd968',
    },
  },
  {
    name: 'pg-query-match-importance-0',
    value: { text: 'SELECT $1', values: [42] },
    merges: { values: { matchImportance: 0 } },
    expect: {
      valueHash: '2c3e9a035824dff185a0ffad5b044307bf2d123f487c8afb4bdbd7ac57d87c20',
      schemaHash: 'bd8d7c8de7c78412b3c53258af006fa1cf43b101ef549899a8e388950a5a190f',
    },
  },
  {
    name: 'http-base64-json-body',
    value: { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'eyJrIjoidiJ9' },
    merges: { body: { encoding: 1, decodedType: 1 }, headers: { matchImportance: 0 } },
    expect: {
      valueHash: 'd5b30f5201ae23f8736fd9c2da2750ad946fa3716ae873e74f597c943dffff9a',
      schemaHash: 'e3afd1fcd38fc046cf9c62c6d2a4cb194bac52b0993c0a5510b279df9cd8d1da',
    },
  },
  {
    name: 'index-like-keys',
    value: { 10: 'a', 9: 'b' },
    merges: null,
    expect: {
      valueHash: '32c76047634ee8d61aeb727dee6fcb2507b60cc4fe6ecce96d04274d6a9c8c03',
    },
  },
]);

/**
 * Build parity vectors with the real JsonSchemaHelper: REFERENCE_VECTORS
 * followed by `count` generated cases from mulberry32(seed).
 * Each: { name, value, merges|null, valueHash, schemaHash, schema }.
 * Serialize with JSON.stringify (schema objects are plain data).
 */
function buildParityVectors({ seed = 42, count = 30 } = {}) {
  const out = [];
  for (const v of REFERENCE_VECTORS) {
    const r = referenceHash(v.value, v.merges || undefined);
    out.push({ name: v.name, value: v.value, merges: v.merges, valueHash: r.decodedValueHash, schemaHash: r.decodedSchemaHash, schema: r.schema });
  }
  const rng = mulberry32(seed);
  for (let i = 0; i < count; i++) {
    const { value, merges } = genMerges(rng, genPayload(rng));
    const r = referenceHash(value, merges || undefined);
    out.push({ name: `gen-seed${seed}-${i}`, value, merges, valueHash: r.decodedValueHash, schemaHash: r.decodedSchemaHash, schema: r.schema });
  }
  return out;
}

module.exports = {
  loadTuskJs,
  tuskJsUnavailableReason,
  tuskJsLoadLog,
  loadTuskRust,
  tuskRustUnavailableReason,
  referenceHash,
  mulberry32,
  genPayload,
  genMerges,
  REFERENCE_VECTORS,
  buildParityVectors,
};
