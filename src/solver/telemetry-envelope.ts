/**
 * Default telemetry parser of the solver pool: checks only the envelope of `symfence-telemetry/1`
 * (valid JSON, an object, the right `schema`). The strict field-level parser belongs to the
 * scheduler (`parseTelemetry` in `src/scheduler/telemetry.ts`) and is injected into `SolverPool`
 * through its `parseTelemetry` option; this default keeps the pool usable without it.
 */
import { TelemetryInvalidError } from '../errors.js';
import { TELEMETRY_SCHEMA } from '../scheduler/telemetry.js';

export type TelemetryParser<T> = (text: string) => T;

export function parseTelemetryEnvelope(text: string): Readonly<Record<string, unknown>> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new TelemetryInvalidError(`telemetry is not valid JSON: ${(error as Error).message}`, { reason: 'json' });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new TelemetryInvalidError('telemetry must be a JSON object', { reason: 'type' });
  }
  const schema = (parsed as { schema?: unknown }).schema;
  if (schema !== TELEMETRY_SCHEMA) {
    throw new TelemetryInvalidError(`telemetry schema must be ${TELEMETRY_SCHEMA}`, { reason: 'schema', schema: String(schema) });
  }
  return parsed as Readonly<Record<string, unknown>>;
}
