import { existsSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/program.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function cli(...argv: string[]) {
  let out = '';
  let err = '';
  const code = await runCli(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

describe('symfence run argument checks', () => {
  it('lists the campaign options with defaults in --help', async () => {
    const { code, out } = await cli('run', '--help');
    expect(code).toBe(0);
    for (const flag of ['--afl-out', '--afl-instance', '--name', '--workers', '--lease-dir', '--coordinator-id', '--solver-timeout', '--duration', '--json']) {
      expect(out).toContain(flag);
    }
  });

  it('needs --afl-out and --afl-instance (usage error, exit 2, one line)', async () => {
    const noOut = await cli('run', '--afl-instance', 'main', '--', './t', '@@');
    expect(noOut.code).toBe(2);
    expect(noOut.err.trim().split('\n')).toHaveLength(1);
    expect(noOut.err).toContain('--afl-out');
    const noInstance = await cli('run', '--afl-out', '/tmp', '--', './t', '@@');
    expect(noInstance.code).toBe(2);
    expect(noInstance.err).toContain('--afl-instance');
  });

  it('refuses a missing AFL queue with ERR_AFL and exit 2 (a start-up refusal), before creating anything', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'symfence-runcli-'));
    dirs.push(dir);
    const { code, err } = await cli('run', '--afl-out', dir, '--afl-instance', 'main', '--', './t', '@@');
    expect(code).toBe(2);
    expect(err).toContain('ERR_AFL');
    expect(err.trim().split('\n')).toHaveLength(1);
  });

  it('refuses --solver-telemetry preload for a binary it cannot interpose with ERR_PRELOAD_UNSUPPORTED and exit 2, before any seed is run', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'symfence-runcli-'));
    dirs.push(dir);
    mkdirSync(path.join(dir, 'main', 'queue'), { recursive: true });
    writeFileSync(path.join(dir, 'main', 'queue', 'id:000000,orig:seed'), 'seed');
    const { code, err } = await cli('run', '--afl-out', dir, '--afl-instance', 'main', '--afl-target', '/bin/true @@', '--solver-telemetry', 'preload', '--', '/bin/sh', '@@');
    expect(code).toBe(2);
    expect(err).toContain('ERR_PRELOAD_UNSUPPORTED');
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(existsSync(path.join(dir, 'symfence'))).toBe(false);
  });

  it('refuses --name equal to the AFL instance', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'symfence-runcli-'));
    dirs.push(dir);
    mkdirSync(path.join(dir, 'main', 'queue'), { recursive: true });
    const { code, err } = await cli('run', '--afl-out', dir, '--afl-instance', 'main', '--name', 'main', '--', './t', '@@');
    expect(code).toBe(2);
    expect(err).toContain('ERR_USAGE');
  });

  it('names the option and value of a bad flag', async () => {
    const { code, err } = await cli('run', '--afl-out', '/tmp', '--afl-instance', 'main', '--workers', 'many', '--', './t');
    expect(code).toBe(2);
    expect(err).toContain('--workers');
    expect(err).toContain('"many"');
  });

  it('takes the scheduler, --io-* and lease options, naming a bad one (option and value) with exit 2 before anything starts', async () => {
    const { out } = await cli('run', '--help');
    for (const flag of ['--lanes', '--hints', '--guidance', '--scheduler-state-interval', '--io-max-batch', '--io-queue-capacity', '--io-file-barrier', '--lease-store', '--lease-shards', '--lock-timeout', '--lease-file-barrier', '--max-clock-skew']) expect(out).toContain(flag);
    expect(out).not.toContain('--lease-ttl ');
    expect(out).not.toContain('--coordination');
    for (const [flag, value] of [
      ['--lease-store', 'tape'],
      ['--lease-shards', '0'],
      ['--io-max-batch', '0'],
      ['--scheduler-state-interval', 'soon'],
      ['--io-file-barrier', 'sometimes'],
      ['--frontier-targets', '65'],
    ] as const) {
      const { code, err } = await cli('run', '--afl-out', '/nonexistent-afl-out', '--afl-instance', 'main', flag, value, '--', './t');
      expect(code).toBe(2);
      expect(err).toContain('ERR_INVALID_OPTION');
      expect(err).toContain(flag);
    }
  });

  it('refuses a bad --hints file with ERR_HINT_INVALID naming --hints', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'symfence-run-hints-'));
    dirs.push(dir);
    const queue = path.join(dir, 'afl', 'main', 'queue');
    mkdirSync(queue, { recursive: true });
    const hints = path.join(dir, 'hints.jsonl');
    writeFileSync(hints, 'not json\n');
    const { code, err } = await cli('run', '--afl-out', path.join(dir, 'afl'), '--afl-instance', 'main', '--hints', hints, '--afl-target', 'true', '--showmap', 'true', '--', 'true');
    expect(code).not.toBe(0);
    expect(err).toContain('ERR_HINT_INVALID');
    expect(err).toContain(`--hints ${hints} line 1`);
  });
});
