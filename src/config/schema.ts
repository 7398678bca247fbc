/**
 * One options schema per component, and the single place where library options, CLI flags and
 * `SYMFENCE_*` environment variables meet.
 *
 * A component declares its options once with `defineOptionSchema()`: kind, default, range, flag,
 * environment variable and a one-line description. From that declaration come the frozen defaults,
 * the pure resolver (which rejects unknown keys and names option, expected form and value in every
 * error), the commander flags and the environment mapping. Precedence, lowest first:
 * defaults < environment < flags < explicit library input.
 */
import { invalidOption, checkRange, parseBoolean, parseDurationMs, parseFiniteNumber, parseInteger, parseNonEmptyString, parseSizeBytes } from './values.js';

interface BaseSpec {
  /** One line for `--help` and the docs. */
  readonly description: string;
  /** Long flag name without dashes (e.g. `solver-timeout`); omitted = not settable from the CLI. */
  readonly flag?: string;
  /** Environment variable (e.g. `SYMFENCE_SOLVER_TIMEOUT`); omitted = not read from the env. */
  readonly env?: string;
  /**
   * How `--help` states the default when the literal one does not say it, e.g. an optional string
   * whose absence means `<afl-out>/<name>`. The description never states a default itself:
   * `--help` adds exactly one.
   */
  readonly defaultHelp?: string;
}

interface IntegerSpec extends BaseSpec {
  readonly kind: 'integer';
  readonly default: number;
  readonly min?: number;
  readonly max?: number;
}
interface NumberSpec extends BaseSpec {
  readonly kind: 'number';
  readonly default: number;
  readonly min?: number;
  readonly max?: number;
}
/** Milliseconds; accepts `30s`, `5m`, `250ms`, plain numbers. */
interface DurationSpec extends BaseSpec {
  readonly kind: 'duration';
  readonly default: number;
  readonly min?: number;
  readonly max?: number;
}
/** Bytes; accepts `64k`, `1M`, plain numbers. */
interface SizeSpec extends BaseSpec {
  readonly kind: 'size';
  readonly default: number;
  readonly min?: number;
  readonly max?: number;
}
interface BooleanSpec extends BaseSpec {
  readonly kind: 'boolean';
  readonly default: boolean;
}
interface StringSpec extends BaseSpec {
  readonly kind: 'string';
  /** `undefined` = optional with no default. */
  readonly default: string | undefined;
}
interface EnumSpec<V extends string = string> extends BaseSpec {
  readonly kind: 'enum';
  readonly values: readonly V[];
  readonly default: V;
}

export type OptionSpec = IntegerSpec | NumberSpec | DurationSpec | SizeSpec | BooleanSpec | StringSpec | EnumSpec;
export type OptionSpecs = Readonly<Record<string, OptionSpec>>;

type ValueOf<S extends OptionSpec> = S extends EnumSpec<infer V>
  ? V
  : S extends BooleanSpec
    ? boolean
    : S extends StringSpec
      ? S['default'] extends string
        ? string
        : string | undefined
      : number;

/** The resolved, validated, frozen options of a schema. */
export type ResolvedOptions<S extends OptionSpecs> = { readonly [K in keyof S]: ValueOf<S[K]> };
/** What a caller may pass: any subset, values in their accepted forms (numbers or strings). */
export type OptionsInput<S extends OptionSpecs> = { readonly [K in keyof S]?: ValueOf<S[K]> | string | number };

export interface OptionSchema<S extends OptionSpecs> {
  /** Component name used in messages (e.g. `solver`). */
  readonly component: string;
  readonly specs: S;
  /** Frozen defaults. */
  readonly defaults: ResolvedOptions<S>;
  /**
   * Pure resolver: defaults overlaid with `input`; every value parsed and range-checked; unknown
   * keys rejected. Throws `InvalidOptionError` naming the option, expected form and value.
   */
  resolve(input?: object): ResolvedOptions<S>;
}

export function defineOptionSchema<const S extends OptionSpecs>(component: string, specs: S): OptionSchema<S> {
  const frozenSpecs = Object.freeze({ ...specs }) as S;
  const defaults = Object.freeze(
    Object.fromEntries(Object.entries(frozenSpecs).map(([key, spec]) => [key, spec.default])),
  ) as ResolvedOptions<S>;
  return Object.freeze({
    component,
    specs: frozenSpecs,
    defaults,
    resolve(input: object = {}): ResolvedOptions<S> {
      return resolveWithSpecs(frozenSpecs, defaults, input);
    },
  });
}

/**
 * The same schema without some options, for a command where another component's schema owns
 * them (e.g. `symfence run` takes the solver timeout from the campaign options).
 */
export function omitOptions<S extends OptionSpecs, K extends keyof S & string>(schema: OptionSchema<S>, keys: readonly K[]): OptionSchema<Omit<S, K>> {
  const kept = Object.fromEntries(Object.entries(schema.specs).filter(([key]) => !(keys as readonly string[]).includes(key)));
  return defineOptionSchema(schema.component, kept as Omit<S, K>);
}

function resolveWithSpecs<S extends OptionSpecs>(specs: S, defaults: ResolvedOptions<S>, input: object): ResolvedOptions<S> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw invalidOption('options', 'an object', input);
  }
  const out: Record<string, unknown> = { ...defaults };
  for (const [key, raw] of Object.entries(input)) {
    const spec = specs[key];
    if (!spec) {
      throw invalidOption(key, `one of the known options (${Object.keys(specs).join(', ')})`, raw);
    }
    if (raw === undefined) continue;
    out[key] = parseOptionValue(key, spec, raw);
  }
  return Object.freeze(out) as ResolvedOptions<S>;
}

/** Parses and range-checks one value against its spec. */
export function parseOptionValue(name: string, spec: OptionSpec, raw: unknown): unknown {
  switch (spec.kind) {
    case 'integer':
      return checkRange(name, parseInteger(name, raw), spec.min, spec.max);
    case 'number':
      return checkRange(name, parseFiniteNumber(name, raw), spec.min, spec.max);
    case 'duration':
      return checkRange(name, parseDurationMs(name, raw), spec.min, spec.max, 'ms');
    case 'size':
      return checkRange(name, parseSizeBytes(name, raw), spec.min, spec.max, 'bytes');
    case 'boolean':
      return parseBoolean(name, raw);
    case 'string':
      return parseNonEmptyString(name, raw);
    case 'enum':
      if (typeof raw === 'string' && spec.values.includes(raw)) return raw;
      throw invalidOption(name, `one of ${spec.values.join(', ')}`, raw);
  }
}

/**
 * Reads the schema's environment variables. A set variable with a bad value is an error that names
 * the variable (it is the user's spelling of the option).
 */
export function optionsFromEnv<S extends OptionSpecs>(schema: OptionSchema<S>, env: NodeJS.ProcessEnv = process.env): OptionsInput<S> {
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(schema.specs)) {
    if (!spec.env) continue;
    const raw = env[spec.env];
    if (raw === undefined || raw === '') continue;
    out[key] = parseOptionValue(spec.env, spec, raw);
  }
  return out as OptionsInput<S>;
}

/** camelCase key commander uses for a kebab-case flag. */
function flagKey(flag: string): string {
  return flag.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/**
 * Picks the schema's flags out of commander's parsed options. A bad value names the flag.
 */
export function optionsFromFlags<S extends OptionSpecs>(schema: OptionSchema<S>, parsed: Readonly<Record<string, unknown>>): OptionsInput<S> {
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(schema.specs)) {
    if (!spec.flag) continue;
    const raw = parsed[flagKey(spec.flag)];
    if (raw === undefined) continue;
    out[key] = parseOptionValue(`--${spec.flag}`, spec, raw);
  }
  return out as OptionsInput<S>;
}

/** defaults < env < flags < explicit; the result is validated as a whole. */
export function resolveLayered<S extends OptionSpecs>(
  schema: OptionSchema<S>,
  layers: { env?: NodeJS.ProcessEnv; flags?: Readonly<Record<string, unknown>>; explicit?: object },
): ResolvedOptions<S> {
  return schema.resolve({
    ...(layers.env ? optionsFromEnv(schema, layers.env) : {}),
    ...(layers.flags ? optionsFromFlags(schema, layers.flags) : {}),
    ...(layers.explicit ?? {}),
  });
}

/** Human description of a spec's default, for `--help`. */
export function describeDefault(spec: OptionSpec): string {
  if (spec.defaultHelp !== undefined) return spec.defaultHelp;
  if (spec.default === undefined) return 'none';
  switch (spec.kind) {
    case 'duration':
      return formatDuration(spec.default);
    case 'size':
      return formatSize(spec.default);
    default:
      return String(spec.default);
  }
}

export function formatDuration(ms: number): string {
  if (ms >= 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms >= 1000 && ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

export function formatSize(bytes: number): string {
  if (bytes >= 1024 ** 2 && bytes % 1024 ** 2 === 0) return `${bytes / 1024 ** 2}M`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024}k`;
  return `${bytes}`;
}

export { invalidOption };
