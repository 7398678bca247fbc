/**
 * Builds `LeaseIoError`s that keep the underlying errno error as `cause` (the registry's error
 * constructor takes message and details only).
 */
import { LeaseIoError } from '../errors.js';

export function leaseIoError(message: string, details: Readonly<Record<string, unknown>>, cause: unknown): InstanceType<typeof LeaseIoError> {
  const error = new LeaseIoError(message, details);
  (error as { cause?: unknown }).cause = cause;
  return error;
}
