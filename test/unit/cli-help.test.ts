import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { Command as CommanderCommand } from 'commander';
import { addSchemaFlags } from '../../src/cli/flags.js';
import { buildProgram, runCli } from '../../src/cli/program.js';
import { defineOptionSchema } from '../../src/config/schema.js';
import { CAMPAIGN_OPTIONS } from '../../src/coordinator/campaign-options.js';
import { LEASE_STORE_OPTIONS } from '../../src/lease/lease-table-options.js';
import { SOLVER_CAMPAIGN_OPTIONS } from '../../src/solver/solver-options.js';
import { LOGGER_OPTIONS } from '../../src/telemetry/logger.js';
import { IO_OPTIONS } from '../../src/io/io-options.js';
import { CAMPAIGN_LEASE_OPTIONS } from '../../src/lease/lease-table-options.js';
import { SCHEDULER_OPTIONS } from '../../src/scheduler/scheduler-options.js';

/** Every command of the tree, by its full name (`leases check`), the program excluded. */
function commandsOf(program: Command): { name: string; argv: string[] }[] {
  const out: { name: string; argv: string[] }[] = [];
  const walk = (cmd: Command, prefix: string[]): void => {
    for (const sub of cmd.commands) {
      const argv = [...prefix, sub.name()];
      out.push({ name: argv.join(' '), argv });
      walk(sub, argv);
    }
  };
  walk(program, []);
  return out;
}

async function helpOf(argv: readonly string[]): Promise<string> {
  let out = '';
  const code = await runCli([...argv, '--help'], { stdout: (t) => (out += t), stderr: () => undefined });
  expect(code).toBe(0);
  return out;
}

/** The `Options:` section as one entry per option, wrapped continuation lines joined. */
function optionEntries(help: string): string[] {
  const lines = help.split('\n');
  const start = lines.indexOf('Options:');
  expect(start).toBeGreaterThanOrEqual(0);
  const entries: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === '' || !line.startsWith(' ')) break;
    if (/^ {2}-/.test(line)) entries.push(line.trim());
    else entries[entries.length - 1] += ` ${line.trim()}`;
  }
  return entries;
}

/** The env var of each schema flag a command registers (the schemas its --help documents). */
const envOfFlag = (schemas: readonly { specs: object }[]): Map<string, string> =>
  new Map(
    schemas.flatMap((schema) =>
      Object.values(schema.specs as Record<string, { flag?: string; env?: string }>).flatMap((spec) => (spec.flag && spec.env ? [[spec.flag, spec.env] as const] : [])),
    ),
  );
const SCHEMA_ENV: Readonly<Record<string, Map<string, string>>> = {
  run: envOfFlag([CAMPAIGN_OPTIONS, SOLVER_CAMPAIGN_OPTIONS, LEASE_STORE_OPTIONS, LOGGER_OPTIONS]),
  demo: envOfFlag([SOLVER_CAMPAIGN_OPTIONS, LOGGER_OPTIONS]),
};

describe('--help of every command', () => {
  const commands = commandsOf(buildProgram({ stdout: () => undefined, stderr: () => undefined })).filter((c) => c.name !== 'help');

  it('covers run, demo, leases, leases check, status and report', () => {
    expect(commands.map((c) => c.name)).toEqual(expect.arrayContaining(['run', 'demo', 'leases', 'leases check', 'status', 'report']));
  });

  it('report: names its output default, what it reads, and its exit codes; status documents --watch', async () => {
    const report = await helpOf(['report']);
    expect(report).toContain('Usage: symfence report [options] <out-dir...>');
    expect(optionEntries(report).find((e) => e.startsWith('--output-dir '))).toContain('(default: <first out-dir>/symfence-report)');
    expect(report).toContain('ERR_PLOT_DATA_INVALID');
    const status = await helpOf(['status']);
    expect(optionEntries(status).find((e) => e.startsWith('--watch-interval '))).toContain('(default: 2s)');
    expect(status).toContain('--watch needs a terminal');
  });

  it.each(commands.map((c) => [c.name, c.argv] as const))('%s: states at most one default per option, and a documented env var exactly once', async (name, argv) => {
    const entries = optionEntries(await helpOf(argv));
    expect(entries.length).toBeGreaterThan(0);
    for (const entry of entries) {
      expect(entry.match(/default:/g)?.length ?? 0, entry).toBeLessThanOrEqual(1);
      expect(entry.match(/env:/g)?.length ?? 0, entry).toBeLessThanOrEqual(1);
      expect(entry.match(/SYMFENCE_[A-Z_]+/g)?.length ?? 0, entry).toBeLessThanOrEqual(1);
      const flag = /^(?:-\w, )?--([a-z0-9-]+)/.exec(entry)?.[1];
      const env = flag === undefined ? undefined : SCHEMA_ENV[name]?.get(flag);
      if (env !== undefined) expect(entry, entry).toContain(`env: ${env}`);
    }
  });

  it('run: states the true default of the options whose absence is derived', async () => {
    const entries = optionEntries(await helpOf(['run']));
    const entry = (flag: string): string => entries.find((e) => e.startsWith(`--${flag} `))!;
    expect(entry('out-dir')).toContain('(default: <afl-out>/<name>; env: SYMFENCE_OUT_DIR)');
    expect(entry('lease-dir')).toContain('(default: private, <out-dir>/leases; env: SYMFENCE_LEASE_DIR)');
    expect(entry('coordinator-id')).toContain('(default: <hostname>:<pid>; env: SYMFENCE_COORDINATOR_ID)');
    expect(entry('name')).toContain('(default: symfence; env: SYMFENCE_NAME)');
  });
});

describe('every campaign option is reachable', () => {
  const schemas = [CAMPAIGN_OPTIONS, SOLVER_CAMPAIGN_OPTIONS, SCHEDULER_OPTIONS, IO_OPTIONS, CAMPAIGN_LEASE_OPTIONS, LOGGER_OPTIONS];

  it('has a flag and an environment variable for every option of the schemas run takes', () => {
    const missing = schemas.flatMap((schema) =>
      Object.entries(schema.specs).flatMap(([key, spec]) => (spec.flag && spec.env ? [] : [`${schema.component}.${key}`])),
    );
    expect(missing).toEqual([]);
  });

  it('lists every one of those flags in run --help', async () => {
    const help = await helpOf(['run']);
    const flags = schemas.flatMap((schema) => Object.values(schema.specs).map((spec) => `--${spec.flag!}`));
    expect(flags.filter((flag) => !help.includes(flag))).toEqual([]);
    expect(flags.length).toBeGreaterThan(40);
  });
});

describe('addSchemaFlags', () => {
  it('refuses a schema whose description states its own default, so help cannot print two', () => {
    const schema = defineOptionSchema('example', {
      dir: { kind: 'string', default: undefined, flag: 'dir', description: 'a directory (default: somewhere)' },
    });
    expect(() => addSchemaFlags(new CommanderCommand('x'), schema)).toThrow(/--dir of example/);
  });
});
