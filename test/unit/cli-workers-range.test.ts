// `--workers`: the range printed by --help, the campaign schema and the solver pool's schema are
// one range; values at its edges are accepted, one past them refused naming the flag and value.
import { describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { optionsFromFlags } from '../../src/config/schema.js';
import { CAMPAIGN_OPTIONS } from '../../src/coordinator/campaign-options.js';
import { SOLVER_OPTIONS } from '../../src/solver/solver-options.js';

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

function helpRange(help: string): [number, number] {
  const line = help.split('\n').find((l) => l.trimStart().startsWith('--workers'));
  const match = /(\d+)-(\d+)/.exec(line ?? '');
  if (!match) throw new Error(`no range in the --workers help line: ${line}`);
  return [Number(match[1]), Number(match[2])];
}

describe('--workers range', () => {
  it('prints the schema range in the help of run and demo, and the solver pool accepts its maximum', async () => {
    const spec = CAMPAIGN_OPTIONS.specs.workers;
    for (const command of ['run', 'demo']) {
      const { code, out } = await cli(command, '--help');
      expect(code).toBe(0);
      expect(helpRange(out)).toEqual([spec.min, spec.max]);
    }
    expect(SOLVER_OPTIONS.specs.workers.max).toBe(spec.max);
    expect(SOLVER_OPTIONS.resolve({ workers: spec.max }).workers).toBe(spec.max);
  });

  it('accepts 0 and the maximum, and refuses -1 and the maximum + 1 with ERR_INVALID_OPTION naming --workers and the value', async () => {
    const max = CAMPAIGN_OPTIONS.specs.workers.max;
    expect(CAMPAIGN_OPTIONS.resolve(optionsFromFlags(CAMPAIGN_OPTIONS, { workers: '0' })).workers).toBe(0);
    expect(CAMPAIGN_OPTIONS.resolve(optionsFromFlags(CAMPAIGN_OPTIONS, { workers: String(max) })).workers).toBe(max);
    for (const bad of ['-1', String(max + 1)]) {
      for (const command of ['demo', 'run']) {
        const argv = command === 'run' ? ['run', '--afl-out', '/nonexistent', '--afl-instance', 'main', '--workers', bad, '--', './t', '@@'] : ['demo', '--workers', bad];
        const { code, err } = await cli(...argv);
        expect(code, `${command} ${bad}`).toBe(2);
        const lines = err.trim().split('\n');
        expect(lines).toHaveLength(1);
        expect(lines[0]).toContain('[ERR_INVALID_OPTION]');
        expect(lines[0]).toContain('--workers');
        expect(lines[0]).toContain(bad);
      }
    }
  });
});
