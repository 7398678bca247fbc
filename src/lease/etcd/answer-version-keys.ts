/**
 * The key suffix of an etcd answer version (docs/lease-format.md "Answer versions"): a fixed 16 digits counting down as the version counts up, so that a branch's
 * newest version sorts first after its lease record's key.
 */

/** Largest version an answer record's key can name (`version` is a safe integer). */
export const MAX_ANSWER_VERSION = Number.MAX_SAFE_INTEGER;
const VERSION_DIGITS = 16;

/** The key suffix of answer version `version` (≥ 1): counting down, so the newest sorts first. */
export function versionSuffix(version: number): string {
  return String(MAX_ANSWER_VERSION - version).padStart(VERSION_DIGITS, '0');
}

/** The version a key suffix names; undefined when it names none. */
export function versionOfSuffix(suffix: string): number | undefined {
  if (suffix.length !== VERSION_DIGITS || !/^[0-9]+$/.test(suffix)) return undefined;
  const version = MAX_ANSWER_VERSION - Number(suffix);
  return version >= 1 ? version : undefined;
}
