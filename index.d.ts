// Type definitions for offloop (the JS shim in index.js). The native binding's own types are
// generated into binding.d.ts by napi-rs.

/** Minimal structural view of an OpenTelemetry ReadableSpan (sdk-trace-base 1.x and 2.x). */
export interface ReadableSpanLike {
  readonly name: string
  readonly kind: number
  spanContext(): { traceId: string; spanId: string }
  /** sdk-trace-base 2.x */
  readonly parentSpanContext?: { spanId: string }
  /** sdk-trace-base 1.x */
  readonly parentSpanId?: string
  readonly startTime: [number, number]
  readonly duration: [number, number]
  readonly status: { code: number; message?: string }
  readonly attributes: Record<string, unknown>
  /** sdk-trace-base 2.x */
  readonly instrumentationScope?: { name: string }
  /** sdk-trace-base 1.x */
  readonly instrumentationLibrary?: { name: string }
}

/** OpenTelemetry ExportResult: code 0 = SUCCESS, 1 = FAILED. */
export interface ExportResult {
  code: 0 | 1
  error?: Error & { report?: BatchReport }
}

export type HashAlgorithm = 'blake3' | 'sha256'

export interface OffloopExporterOptions {
  /** Recordings directory (created if missing). Default `./recordings` unless `onBatch` is the only sink. */
  directory?: string
  /** Value/schema hash digest. `'sha256'` reproduces the Tusk Drift JS SDK hashes. Default `'blake3'`. */
  hashAlgorithm?: HashAlgorithm
  /** Written as `environment` into every recorded span. */
  environment?: string
  /** `'jsonl'` (Tusk CleanSpanData lines, default) or `'proto'` (length-delimited `tusk.drift.core.v1.Span`). */
  format?: 'jsonl' | 'proto'
  /** A span whose td.inputValue + td.outputValue + 50 kB exceeds this blocks its trace. Default 1 MiB. */
  maxSpanBytes?: number
  /** Span bytes accepted but not yet written; beyond it new batches/spans are dropped and counted. Default 64 MiB. */
  maxQueueBytes?: number
  /** Batches processed at once on the native pool. Default: CPU cores − 1 (at least 1). */
  workers?: number
  /**
   * Threads that share the spans of one batch. They run at background priority (nice 10 on
   * Linux), so the JS thread gets a contended core at once. Default: all CPU cores; 1
   * processes each batch on a single thread.
   */
  threads?: number
  /**
   * Receives each batch as an encoded `tusk.drift.backend.v1.ExportSpansRequest`, on the JS
   * thread. A returned promise is awaited before the batch counts as written; a throw or
   * rejection marks the batch's spans failed.
   */
  onBatch?: (exportSpansRequest: Buffer) => void | Promise<void>
  /** Longest wait for `onBatch` to settle; after it the batch's spans fail (ms). Default 30000. */
  exportTimeoutMillis?: number
  /** `ExportSpansRequest.observable_service_id` */
  serviceId?: string
  /** `ExportSpansRequest.sdk_version` (default `offloop/<version>`) */
  sdkVersion?: string
  /** `ExportSpansRequest.sdk_instance_id` */
  sdkInstanceId?: string
  /**
   * Receives every batch report (the exporter's batches; the processor's natively formed
   * batches, on the JS thread). Without it, span errors are emitted as process warnings.
   */
  onReport?: (report: BatchReport) => void
}

export interface OffloopSpanProcessorOptions extends OffloopExporterOptions {
  /** Longest a span waits before its batch is formed (ms). Default 1000. */
  scheduledDelayMillis?: number
  /** Most spans per batch. Default 512. */
  maxExportBatchSize?: number
}

/** One span that was not written. */
export interface SpanErrorReport {
  /** Position in its batch. */
  index: number
  traceId: string
  spanId: string
  /** 'frame' | 'validate' | 'filter' | 'input' | 'output' | 'attributes' | 'sink' | 'shutdown' */
  stage: string
  /** What was wrong, naming the field, e.g. `td.inputValue: invalid JSON: …`. */
  message: string
  /** True when dropped by policy (filters), false when it failed. */
  dropped: boolean
}

export interface BatchReport {
  spans: number
  written: number
  dropped: number
  failed: number
  durationMs: number
  errors: SpanErrorReport[]
  /** Set when the whole batch was refused (queue full, after shutdown). */
  rejected?: string
}

/** `spansReceived === spansWritten + spansDropped + spansFailed + spansInFlight` at every call. */
export interface OffloopStats {
  spansReceived: number
  spansWritten: number
  spansDropped: number
  spansFailed: number
  spansInFlight: number
  batches: number
  bytesQueued: number
  lastBatchMs: number
  workers: number
}

/** An OpenTelemetry SpanExporter; works under BatchSpanProcessor and SimpleSpanProcessor. */
export declare class OffloopExporter {
  constructor(options?: OffloopExporterOptions)
  export(spans: ReadableSpanLike[], resultCallback: (result: ExportResult) => void): void
  /** Resolves when every batch handed to export() before the call is written. */
  forceFlush(): Promise<void>
  /** Flushes, then refuses further exports. Safe to call more than once. */
  shutdown(): Promise<void>
  stats(): OffloopStats
}

/** An OpenTelemetry SpanProcessor (drop-in for BatchSpanProcessor) with batching in native code. */
export declare class OffloopSpanProcessor {
  constructor(options?: OffloopSpanProcessorOptions)
  onStart(span: unknown, parentContext?: unknown): void
  onEnd(span: ReadableSpanLike): void
  forceFlush(): Promise<void>
  shutdown(): Promise<void>
  stats(): OffloopStats
}

export interface HashPayloadOptions {
  hashAlgorithm?: HashAlgorithm
  /** Tusk schema merges `{ key: { encoding?, decodedType?, matchImportance? } }`, as an object or JSON text. */
  schemaMerges?: Record<string, unknown> | string | null
}

export interface HashPayloadResult {
  valueHash: string
  schemaHash: string
  /** The inferred JsonSchema (camelCase keys, numeric enums). */
  schema: Record<string, unknown>
  /** The value the hash covers: merges decoded, keys in canonical order. */
  decodedValue: unknown
}

/**
 * Hashes a payload with exactly the exporter's code. `json` is JSON text (string or Buffer) or
 * a JSON-able value (stringified first). Throws a TypeError-like error naming the problem for
 * invalid input.
 */
export declare function hashPayload(json: string | Buffer | unknown, options?: HashPayloadOptions): HashPayloadResult

// ---------------------------------------------------------------------------------------------
// Replay

export interface RecordingOptions {
  /** Digest the recording's hashes are recomputed with (and requests hashed with). Default `'blake3'`. */
  hashAlgorithm?: HashAlgorithm
  /** How many skipped lines `stats().skipped` describes (all are counted). Default 10. */
  maxSkippedReasons?: number
}

/** An outbound call to answer (Tusk `MockRequestData`). */
export interface MockRequest {
  /** The test's trace id; omit (or `''`) for calls outside a test. `testId` is accepted as a synonym. */
  traceId?: string
  testId?: string
  name?: string
  /** `pg`, `http`, … (schema levels only consider spans of this package). */
  packageName?: string
  submoduleName?: string
  /** Accepted for Tusk `MockRequestData` compatibility; matching does not use it. */
  instrumentationName?: string
  /** The input value: a JSON-able value or JSON text, normalized as the instrumentation records it. */
  inputValue: unknown
  /** Tusk schema merges `{ key: { encoding?, decodedType?, matchImportance? } }`, object or JSON text. */
  inputSchemaMerges?: Record<string, unknown> | string | null
  /** Made before the app was ready. Default false. */
  isPreAppStart?: boolean
  /** Accepted for Tusk `MockRequestData` compatibility; matching does not use it. */
  kind?: number
  /** Accepted for Tusk `MockRequestData` compatibility; matching does not use it. */
  stackTrace?: string
}

/** `tusk.drift.backend.v1.MatchType` names (codes 1–4). */
export type MatchTypeName =
  | 'INPUT_VALUE_HASH'
  | 'INPUT_VALUE_HASH_REDUCED_SCHEMA'
  | 'INPUT_SCHEMA_HASH'
  | 'INPUT_SCHEMA_HASH_REDUCED_SCHEMA'

export interface RequestHashes {
  /** The request's input value hash, as the exporter would record it. */
  valueHash: string
  /**
   * The request's input schema hash: on a miss, and on a match at a schema level. A match at
   * a value level leaves it out (it never walks the request's schema).
   */
  schemaHash?: string
}

export interface MockFound {
  found: true
  /** The recorded output value: the answer. */
  outputValue: unknown
  metadata?: unknown
  timestamp?: { seconds: number; nanos: number }
  traceId: string
  spanId: string
  name: string
  packageName: string
  matchType: MatchTypeName
  matchTypeCode: 1 | 2 | 3 | 4
  matchScope: 'TRACE' | 'GLOBAL'
  /** Cascade priority (README "Replay"): 1–10 in the trace, 12–15 across traces. */
  priority: number
  /** No unused candidate was left: this span had been handed out before. */
  reused: boolean
  description: string
  /** Best similarity score when several schema-level candidates were ranked. */
  similarityScore?: number
  /** Up to 5 runners-up of a similarity ranking. */
  topCandidates: { spanId: string; score: number }[]
  requestHashes: RequestHashes
}

export interface MockMissed {
  found: false
  /** Why nothing matched: the levels tried, an unknown trace, a package the recording lacks. */
  reason: string
  requestHashes: RequestHashes
}

export type MockResult = MockFound | MockMissed

export interface ReplayStats {
  files: number
  traces: number
  spans: number
  /** Lines or records skipped (torn, corrupt, not a span). */
  skippedLines: number
  /** The first few, with file and line (line 0: the whole file). */
  skipped: { file: string; line: number; reason: string }[]
  duplicateSpans: number
  loadMs: number
  hashAlgorithm: HashAlgorithm
  matches: number
  matchesByType: Record<MatchTypeName, number>
  /** Matches per cascade priority (only priorities that matched). */
  matchesByPriority: Record<number, number>
  misses: number
}

export interface RecordedSpanInfo {
  traceId: string
  spanId: string
  name: string
  packageName: string
  isPreAppStart: boolean
  used: boolean
  file: string
  line: number
  /** Recomputed at load with the recording's digest. */
  inputValueHash: string
  inputSchemaHash: string
  reducedInputValueHash: string
  reducedInputSchemaHash: string
  /** As stored in the file (reporting only). */
  storedInputValueHash: string
  storedInputSchemaHash: string
}

/** A loaded recording that answers outbound calls (replay). */
export declare class Recording {
  /** Loads every `*trace*.jsonl` / `*trace*.pb` file in `directory`, off the JS thread. */
  static open(directory: string, options?: RecordingOptions): Promise<Recording>
  /** The recording behind `handle` (from `recording.handle()`), in any worker thread of this process. */
  static fromHandle(handle: number): Recording
  /** Process-wide number of this recording, to pass to worker threads. */
  handle(): number
  /** Hash levels of the cascade, synchronous (microseconds). Consumes the matched span. Throws for an input that is not valid JSON. */
  findMock(request: MockRequest): MockResult
  /** The whole cascade, similarity ranking included, on the native pool. */
  findMockAsync(request: MockRequest): Promise<MockResult>
  stats(): ReplayStats
  describeSpan(traceId: string, spanId: string): RecordedSpanInfo | null
}
