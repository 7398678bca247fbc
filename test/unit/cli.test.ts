import { describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { PACKAGE_VERSION } from '../../src/version.js';

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

describe('symfence CLI', () => {
  it('prints help listing the commands, exit 0', async () => {
    const { code, out } = await run('--help');
    expect(code).toBe(0);
    expect(out).toContain('Usage: symfence');
  });

  it('prints the package version', async () => {
    const { code, out } = await run('--version');
    expect(code).toBe(0);
    expect(out.trim()).toBe(PACKAGE_VERSION);
  });

  it('rejects an unknown command with one line and exit 2', async () => {
    const { code, err } = await run('nosuch');
    expect(code).toBe(2);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toMatch(/nosuch|unknown|too many/);
  });

  it('rejects an unknown flag with one line and exit 2', async () => {
    const { code, err } = await run('--bogus');
    expect(code).toBe(2);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toContain('--bogus');
  });

  it('exposes the solver options as run flags, without the ones the campaign owns', async () => {
    const { code, out } = await run('run', '--help');
    expect(code).toBe(0);
    expect(out).toContain('--solver-spawn-thread <auto|worker|main>');
    expect(out).toContain('--solver-slots-per-thread <value>');
    expect(out).toContain('--solver-kill-grace <duration>');
    expect(out).not.toContain('--solver-workers');
    expect(out.match(/--solver-timeout /g)).toHaveLength(1);
  });

  it('rejects a bad solver flag of run before starting anything, naming the flag, exit 2', async () => {
    const { code, err } = await run('run', '--afl-out', '/nonexistent-symfence', '--afl-instance', 'main', '--solver-kill-grace', 'soon', '--', './x', '@@');
    expect(code).toBe(2);
    expect(err).toContain('--solver-kill-grace');
    expect(err).toContain('ERR_INVALID_OPTION');
  });

  it('rejects a solver thread serving no slot, naming the flag and the value, exit 2', async () => {
    const { code, err } = await run('demo', '--duration', '1s', '--solver-slots-per-thread', '0');
    expect(code).toBe(2);
    expect(err).toContain('--solver-slots-per-thread');
    expect(err).toContain('got 0');
    expect(err).toContain('ERR_INVALID_OPTION');
  });
});
