import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { builtFile } from '../../src/util/paths.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const url = (relative: string): string => pathToFileURL(builtFile(relative)).href;

/**
 * Runs `body` as an ES module in a fresh Node process of the build, after `loaded()` is defined:
 * whether any file of the `etcd3` package is in the CommonJS module cache (where an ES module's
 * import of a CommonJS package puts it). Returns the process's stdout.
 */
function inFreshProcess(body: string): string {
  const script = `
    import { createRequire } from 'node:module';
    const Module = createRequire(import.meta.url)('node:module');
    const loaded = () => Object.keys(Module._cache).some((file) => file.includes('/node_modules/etcd3/'));
    ${body}
  `;
  return execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
}

describe('the etcd client is loaded only by a process that connects to etcd', () => {
  it('is not loaded by the library, the CLI modules or a SQLite or files table, and is once an etcd connection is attempted', () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-etcd-lazy-'));
    dirs.push(root);
    const out = inFreshProcess(`
      await import(${JSON.stringify(url('src/index.js'))});
      await import(${JSON.stringify(url('src/cli/program.js'))});
      await import(${JSON.stringify(url('src/coordinator/adapters/campaign-components.js'))});
      const { FencedTargetLeaseTable } = await import(${JSON.stringify(url('src/lease/target-lease-table.js'))});
      const afterImports = loaded();
      for (const store of ['sqlite', 'files']) {
        const table = await FencedTargetLeaseTable.open(${JSON.stringify(root)} + '/' + store, { store, coordination: 'single' });
        const claim = await table.claimGroup([1n], {}, { owner: 'a', nowMs: 1 });
        if (!claim.ok) throw new Error('claim failed');
        await table.close();
      }
      const afterTables = loaded();
      // A connection attempt to a port nothing listens on: refused, but the client was loaded for it.
      const { connectEtcd } = await import(${JSON.stringify(url('src/lease/etcd/etcd-connection.js'))});
      const refused = await connectEtcd({ endpoints: ['127.0.0.1:1'], requestTimeoutMs: 200 }).then(() => 'connected', (e) => e.code);
      console.log(JSON.stringify({ afterImports, afterTables, refused, afterConnect: loaded() }));
      process.exit(0);
    `);
    expect(JSON.parse(out.trim().split('\n').at(-1)!)).toEqual({ afterImports: false, afterTables: false, refused: 'ERR_ETCD_UNAVAILABLE', afterConnect: true });
  });
});
