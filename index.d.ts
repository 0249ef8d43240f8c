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
   * Receives each batch as an encoded `tusk.drift.backend.v1.ExportSpansRequest`, on the JS
   * thread. A returned promise is awaited before the batch counts as written; a throw or
   * rejection marks the batch's spans failed.
   */
  onBatch?: (exportSpansRequest: Buffer) => void | Promise<void>
  /** `ExportSpansRequest.observable_service_id` */
  serviceId?: string
  /** `ExportSpansRequest.sdk_version` (default `offloop/<version>`) */
  sdkVersion?: string
  /** `ExportSpansRequest.sdk_instance_id` */
  sdkInstanceId?: string
  /** Receives every batch report (exporter only). Without it, span errors are emitted as process warnings. */
  onReport?: (report: BatchReport) => void
}

export interface OffloopSpanProcessorOptions extends Omit<OffloopExporterOptions, 'onReport'> {
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
