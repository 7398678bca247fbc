import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { runCliCaptured } from '../helpers/cli-in-process.js';
import { LEASE_TABLE_OPTIONS } from '../../src/lease/lease-table-options.js';
import { openTarget, openWork, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore, type StoreContext } from '../helpers/lease-stores.js';

/** The store's table options as the variables a user sets for `symfence leases` (`SYMFENCE_ETCD_ENDPOINTS`, …). */
let storeEnv: Record<string, string> = {};

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const saved = Object.fromEntries(Object.keys(storeEnv).map((name) => [name, process.env[name]]));
  Object.assign(process.env, storeEnv);
  try {
    return await runCliCaptured(...argv);
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

function envOf(options: Record<string, unknown>): Record<string, string> {
  const specs = LEASE_TABLE_OPTIONS.specs as Record<string, { env?: string }>;
  return Object.fromEntries(Object.entries(options).flatMap(([key, value]) => (specs[key]?.env && key !== 'store' ? [[specs[key]!.env!, String(value)]] : [])));
}

async function campaignDir(store: StoreContext): Promise<{ dir: string; workRoot: string; corruptPath: string }> {
  const dir = await tempRoot();
  const workRoot = path.join(dir, 'work');
  const work = await openWork(workRoot, { coordination: 'single', ...store.options() });
  const now = Date.now();
  const a = await work.claim('a'.repeat(64), { p: 1 }, { owner: 'alpha', nowMs: now });
  await work.claim('b'.repeat(64), { p: 2 }, { owner: 'alpha', nowMs: now - 3_600_000 });
  const c = await work.claim('c'.repeat(64), { p: 3 }, { owner: 'beta', nowMs: now });
  if (!a.ok || !c.ok) throw new Error('setup');
  await work.beginCommit('c'.repeat(64), c.token, { nowMs: now });
  const d = await work.claim('d'.repeat(64), { p: 4 }, { owner: 'beta', nowMs: now });
  if (!d.ok) throw new Error('setup');
  await work.complete('d'.repeat(64), d.token, { nowMs: now });
  const targets = await openTarget(path.join(dir, 'targets'), { coordination: 'single', ...store.options() });
  await targets.claimGroup([1n, 2n, 3n], { job: 1 }, { owner: 'alpha', nowMs: now });
  // Two branches answered on input f…f, kept as released records (the campaign's shared answers).
  const answered = await targets.claimGroup([4n, 5n, 6n], { job: 2 }, { owner: 'alpha', nowMs: now, input: 'f'.repeat(64) });
  if (!answered.ok) throw new Error('setup');
  // …and member 6 left open there: a question whose attempts and back-off the campaign keeps.
  await targets.releaseGroup([4n, 5n, 6n], answered.token, { nowMs: now, answers: { input: 'f'.repeat(64), settled: [4n, 5n], open: [6n] } });
  // Two shared traces beside the tables (and a temp and a stray name, which are not traces).
  await mkdir(path.join(dir, 'traces'), { recursive: true });
  await writeFile(path.join(dir, 'traces', `${'1'.repeat(64)}.${'2'.repeat(64)}`), 'x'.repeat(100));
  await writeFile(path.join(dir, 'traces', `${'3'.repeat(64)}.${'4'.repeat(64)}`), 'y'.repeat(23));
  await writeFile(path.join(dir, 'traces', '.symfence-io-1-2.tmp'), 'z');
  await writeFile(path.join(dir, 'traces', 'notes.txt'), 'z');
  const corruptPath = await store.recordLocation(workRoot, 'e'.repeat(64));
  await store.writeRaw(workRoot, 'e'.repeat(64), '{"schema":1');
  return { dir, workRoot, corruptPath };
}

describeEachStore('symfence leases', (store) => {
  beforeEach(() => {
    storeEnv = envOf(store.options());
  });

  it('prints counts by status and owner for every table under a directory', async () => {
    const { dir } = await campaignDir(store);
    const { code, out } = await run('leases', dir);
    expect(code).toBe(0);
    expect(out).toContain('leased 2 (expired 1)  committing 1  done 1  corrupt 1');
    expect(out).toContain('owner alpha: leased 2 (expired 1)');
    expect(out).toContain(`(target table, ${await store.layoutLabel(path.join(dir, 'targets'))})`);
    // Done: the three answer records (the answer generation record is no lease and is not counted).
    expect(out).toContain('leased 3 (expired 0)  committing 0  done 3  corrupt 0');
    // Bytes: {"answered":true,"settled":["f…f"]} twice (96 each), {"open":[["f…f",1,<13-digit ms>]]} once (95).
    // Generation 1: one release wrote answer records (etcd keeps no answer generation record).
    expect(out).toContain(`answers: 2 branches answered, 2 (input, branch) pairs, 1 open questions, 287 bytes, generation ${store.name === 'etcd' ? 0 : 1}`);
    // Released lease records are gone on every store; no answer version was replaced (etcd).
    expect(out).not.toContain('superseded');
    // The traces live in the lease directory whatever the store, but for etcd (kept in etcd).
    if (store.name === 'etcd') expect(out).not.toContain('traces:');
    else expect(out).toContain(`${path.join(dir, 'traces')}\n  traces: 2 stored (123 bytes, cap ${512 * 1024 * 1024} bytes)`);
  });

  it('prints machine-readable JSON with --json', async () => {
    const { dir, workRoot } = await campaignDir(store);
    const { code, out } = await run('leases', dir, '--json');
    expect(code).toBe(0);
    const parsed = JSON.parse(out) as { tables: { root: string; kind: string; counts: Record<string, number>; owners: Record<string, Record<string, number>> }[] };
    const work = parsed.tables.find((t) => t.kind === 'work')!;
    expect(work.root).toBe(workRoot);
    expect(work.counts).toEqual({ leased: 2, expired: 1, committing: 1, done: 1, corrupt: 1 });
    expect(work.owners.beta).toEqual({ leased: 0, expired: 0, committing: 1, done: 1 });
    expect(work).not.toHaveProperty('answers');
    expect(parsed.tables.find((t) => t.kind === 'target')).toMatchObject({ answers: { branches: 2, pairs: 2, open: 1, bytes: 287, generation: store.name === 'etcd' ? 0 : 1, superseded: 0, supersededBytes: 0 } });
    expect((parsed as unknown as { traces: unknown[] }).traces).toEqual(store.name === 'etcd' ? [] : [{ dir: path.join(dir, 'traces'), count: 2, bytes: 123, capBytes: 512 * 1024 * 1024 }]);
  });

  it('check lists every corrupt record and exits 1', async () => {
    const { dir, corruptPath } = await campaignDir(store);
    const { code, out, err } = await run('leases', 'check', dir);
    expect(code).toBe(1);
    expect(out).toContain(`corrupt ${corruptPath}: not valid JSON`);
    expect(err).toContain('ERR_LEASE_CORRUPT');
  });

  it('check exits 0 on a clean table', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { coordination: 'single', ...store.options() });
    await table.claim('a'.repeat(64), { p: 1 }, { owner: 'alpha', nowMs: Date.now() });
    const { code, out } = await run('leases', 'check', root);
    expect(code).toBe(0);
    expect(out).toContain('no corrupt record');
  });

  it('refuses a directory that holds no lease table with exit 2', async () => {
    const root = await tempRoot();
    const { code, err } = await run('leases', root);
    expect(code).toBe(2);
    expect(err).toContain('ERR_USAGE');
    expect(err.trim().split('\n')).toHaveLength(1);
  });

  it('rejects a bad --lease-ttl naming the flag', async () => {
    const root = await tempRoot();
    await openWork(root, { coordination: 'single', ...store.options() });
    const { code, err } = await run('leases', root, '--lease-ttl', 'soon');
    expect(code).toBe(2);
    expect(err).toContain('--lease-ttl');
  });

  it('documents both commands, their flags and their exit codes in --help, exiting 0', async () => {
    const top = await run('leases', '--help');
    expect(top.code).toBe(0);
    for (const text of ['check', '--json', '--lease-ttl', '--trace-store-max <size>', 'Exit codes', 'leased, expired, committing, done']) expect(top.out).toContain(text);
    // commander wraps the descriptions: compared with the line breaks folded.
    expect(top.out.replace(/\s+/g, ' ')).toContain('default: 512M; env: SYMFENCE_TRACE_STORE_MAX');
    const check = await run('leases', 'check', '--help');
    expect(check.code).toBe(0);
    for (const text of ['<dir>', '--json', 'Exit codes: 0 no corrupt record, 1 at least one']) expect(check.out).toContain(text);
  });

  it('check --json prints every table with its corrupt list and still exits 1', async () => {
    const { dir, corruptPath } = await campaignDir(store);
    const { code, out } = await run('leases', 'check', dir, '--json');
    expect(code).toBe(1);
    const parsed = JSON.parse(out) as { tables: { corrupt: { path: string; reason: string }[] }[] };
    expect(parsed.tables.flatMap((t) => t.corrupt.map((c) => c.path))).toEqual([corruptPath]);
  });

  it('check honours --lease-ttl given after the directory', async () => {
    const { dir } = await campaignDir(store);
    const { out } = await run('leases', 'check', dir, '--json', '--lease-ttl', '1ms');
    const parsed = JSON.parse(out) as { leaseTtlMs: number };
    expect(parsed.leaseTtlMs).toBe(1);
  });

  it('prints an owner holding a newline and ANSI escapes on one line with the escapes visible, and raw in --json', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { coordination: 'single', ...store.options() });
    const owner = 'a\nFAKE LINE\x1b[31m\u009b\u007f\\';
    await table.claim('a'.repeat(64), { p: 1 }, { owner, nowMs: Date.now() });
    const { code, out } = await run('leases', root);
    expect(code).toBe(0);
    const lines = out.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[2]).toBe('  owner a\\nFAKE LINE\\x1b[31m\\x9b\\x7f\\\\: leased 1 (expired 0)  committing 0  done 0');
    expect(out).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    const json = await run('leases', root, '--json');
    const parsed = JSON.parse(json.out) as { tables: { owners: Record<string, unknown> }[] };
    expect(Object.keys(parsed.tables[0]!.owners)).toEqual([owner]);
  });

  it('shows the traces\' cap from --trace-store-max, else SYMFENCE_TRACE_STORE_MAX, in text and --json, for leases and check', async () => {
    const { dir } = await campaignDir(store);
    const flagged = await run('leases', dir, '--trace-store-max', '64M');
    expect(flagged.code).toBe(0);
    if (store.name !== 'etcd') expect(flagged.out).toContain(`traces: 2 stored (123 bytes, cap ${64 * 1024 * 1024} bytes)`);
    storeEnv = { ...storeEnv, SYMFENCE_TRACE_STORE_MAX: '2M' };
    const json = JSON.parse((await run('leases', 'check', dir, '--json')).out) as { traces: { capBytes: number }[] };
    expect(json.traces.map((t) => t.capBytes)).toEqual(store.name === 'etcd' ? [] : [2 * 1024 * 1024]);
    const checked = await run('leases', 'check', dir);
    if (store.name !== 'etcd') expect(checked.out).toContain(`traces: 2 stored in ${path.join(dir, 'traces')} (123 bytes, cap ${2 * 1024 * 1024} bytes)\ntemps: `);
  });

  it.each([
    ['12q', '12q'],
    ['1k', '1024'], // below one trace of the largest size; the range error names the value in bytes
  ])('rejects --trace-store-max %s naming the option and the value, exit 2', async (value, named) => {
    const root = await tempRoot();
    await openWork(root, { coordination: 'single', ...store.options() });
    for (const argv of [['leases', root], ['leases', 'check', root]]) {
      const { code, err } = await run(...argv, '--trace-store-max', value);
      expect(code).toBe(2);
      expect(err).toContain('ERR_INVALID_OPTION');
      expect(err).toContain('--trace-store-max');
      expect(err).toContain(named);
    }
  });

  it('check refuses a traces path that is not a directory with exit 2, naming it', async () => {
    if (store.name === 'etcd') return; // the traces are in etcd: the lease root's traces/ is not read
    const root = await tempRoot();
    await openWork(path.join(root, 'work'), { coordination: 'single', ...store.options() });
    await writeFile(path.join(root, 'traces'), 'not a directory');
    const { code, err } = await run('leases', 'check', root);
    expect(code).toBe(2);
    expect(err).toContain('ERR_USAGE');
    expect(err).toContain(path.join(root, 'traces'));
    expect(err.trim().split('\n')).toHaveLength(1);
  });

  it('check names a missing directory with exit 2 and one stderr line', async () => {
    const root = await tempRoot();
    const { code, err } = await run('leases', 'check', path.join(root, 'missing'));
    expect(code).toBe(2);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toContain('missing');
  });
});
