/** Freezes a JSON value and everything in it (already frozen parts are not walked again). */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    if (Array.isArray(value)) for (let i = 0; i < value.length; i += 1) deepFreeze(value[i]);
    else for (const key in value) if (Object.hasOwn(value, key)) deepFreeze((value as Record<string, unknown>)[key]);
    Object.freeze(value);
  }
  return value;
}
