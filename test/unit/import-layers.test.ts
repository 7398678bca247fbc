/**
 * The layering rule of docs/architecture.md "Layers": the folders of src/ import each other without
 * cycles, and no module reaches itself through run-time imports.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cycleThrough, cyclicComponents, folderOf, graphOf, LEASE_STORE_FOLDERS, leasePartOf, moduleReferences, scanImports, type Graph, type ImportEdge } from '../helpers/import-graph.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * Folder cycles that still exist, each as its sorted member list joined by ` ↔ `. This list may
 * only shrink: a cycle that is not listed (or that grew a member) fails, and so does an entry
 * that no longer occurs, so a fixed cycle is taken off the list in the same change.
 * Empty: src/ has no folder cycle today.
 */
const ALLOWED_FOLDER_CYCLES: readonly string[] = [];

/**
 * Module cycles through run-time imports (type-only imports are erased and cannot change
 * evaluation order), same rules as above. Empty today.
 */
const ALLOWED_RUNTIME_MODULE_CYCLES: readonly string[] = [];

/**
 * Imports from the shared lease semantics (src/lease/*.ts) into one store's folder, as
 * `from → to`. The shared modules hold the records, operations, tables, backend contract and
 * inspection, and know no store; only these edges may cross. Same rules as above: an edge not
 * listed fails, and a listed edge that no longer occurs fails.
 */
const ALLOWED_SHARED_TO_STORE_IMPORTS: readonly string[] = [
  // The opener: the one place that knows which stores exist.
  'src/lease/open-backend.ts → src/lease/etcd/etcd-backend.ts',
  'src/lease/open-backend.ts → src/lease/files/file-backend.ts',
  'src/lease/open-backend.ts → src/lease/files/record-scan.ts',
  'src/lease/open-backend.ts → src/lease/sqlite/sqlite-backend.ts',
  // `auto` asks whether SQLite loads here before it picks the SQLite store.
  'src/lease/store-choice.ts → src/lease/sqlite/sqlite-database.ts',
  // Every store's table root on this host guards lease-table.json with the file store's flock lock.
  'src/lease/table-meta.ts → src/lease/files/record-lock.ts',
  'src/lease/table-root.ts → src/lease/files/record-files.ts',
  'src/lease/table-root.ts → src/lease/files/record-lock.ts',
];

const scan = scanImports(ROOT);

function describeCycles(graph: Graph, components: readonly string[][], edges: readonly ImportEdge[], nodeOf: (file: string) => string): string {
  return components
    .map((component) => {
      const cycle = cycleThrough(graph, component, component[0]!);
      const hops = cycle.slice(1).map((to, i) => {
        const from = cycle[i]!;
        const witnesses = edges.filter((e) => nodeOf(e.from) === from && nodeOf(e.to) === to).map((e) => `      ${e.from} → ${e.specifier}`);
        return `    ${from} → ${to}\n${witnesses.slice(0, 5).join('\n')}${witnesses.length > 5 ? `\n      … ${witnesses.length - 5} more` : ''}`;
      });
      return `  cycle ${cycle.join(' → ')}\n${hops.join('\n')}`;
    })
    .join('\n');
}

function checkAgainstAllowList(components: readonly string[][], allowed: readonly string[]): { unexpected: string[][]; stale: string[] } {
  const keys = components.map((c) => c.join(' ↔ '));
  return {
    unexpected: components.filter((_, i) => !allowed.includes(keys[i]!)),
    stale: allowed.filter((entry) => !keys.includes(entry)),
  };
}

describe('import layers of src/', () => {
  it('reads a non-trivial graph in which every relative import names a file', () => {
    expect(scan.unresolved).toEqual([]);
    expect(scan.files.length).toBeGreaterThan(100);
    const folders = new Set(scan.edges.map((e) => `${folderOf(e.from)} → ${folderOf(e.to)}`));
    // Edges the architecture relies on; if the scanner stopped seeing imports these would vanish.
    expect(folders).toContain('src/coordinator → src/lease');
    expect(folders).toContain('src/lease → src/fs');
    expect(folders).toContain('src/io → src/lease');
    // The dynamic import Campaign.start uses to load the AFL++ components.
    expect(scan.edges).toContainEqual(expect.objectContaining({ from: path.join('src', 'coordinator', 'campaign.ts'), specifier: './adapters/afl-components.js', typeOnly: false }));
  });

  it('has no cycle between folders beyond the allow-list, which only shrinks', () => {
    const graph = graphOf(scan.edges.map((e) => [folderOf(e.from), folderOf(e.to)] as const));
    const components = cyclicComponents(graph);
    const { unexpected, stale } = checkAgainstAllowList(components, ALLOWED_FOLDER_CYCLES);
    const report = unexpected.length > 0 ? `folder import cycles (docs/architecture.md "Layers"):\n${describeCycles(graph, unexpected, scan.edges, folderOf)}` : '';
    expect(report).toBe('');
    expect(stale, 'allow-listed folder cycles that are gone: remove them from ALLOWED_FOLDER_CYCLES').toEqual([]);
  });

  it('has no module that reaches itself through run-time imports beyond the allow-list', () => {
    const runtime = scan.edges.filter((e) => !e.typeOnly);
    const graph = graphOf(runtime.map((e) => [e.from, e.to] as const));
    const components = cyclicComponents(graph);
    const { unexpected, stale } = checkAgainstAllowList(components, ALLOWED_RUNTIME_MODULE_CYCLES);
    const report = unexpected.length > 0 ? `run-time module cycles:\n${describeCycles(graph, unexpected, runtime, (f) => f)}` : '';
    expect(report).toBe('');
    expect(stale, 'allow-listed module cycles that are gone: remove them from ALLOWED_RUNTIME_MODULE_CYCLES').toEqual([]);
  });
});

describe('import layers of src/lease/', () => {
  const leaseEdges = scan.edges.flatMap((e) => {
    const from = leasePartOf(e.from);
    const to = leasePartOf(e.to);
    return from !== undefined && to !== undefined && from !== to ? [{ ...e, fromPart: from, toPart: to }] : [];
  });
  const witness = (e: ImportEdge): string => `${e.from.split(path.sep).join('/')} → ${e.to.split(path.sep).join('/')}`;

  it('keeps every lease module either in the shared top or in one store folder', () => {
    const parts = new Set(scan.files.map(leasePartOf).filter((p) => p !== undefined));
    expect([...parts].sort()).toEqual(['src/lease', ...LEASE_STORE_FOLDERS.map((s) => `src/lease/${s}`)].sort());
  });

  it('has no store folder that imports another store folder', () => {
    const crossing = leaseEdges.filter((e) => e.fromPart !== 'src/lease' && e.toPart !== 'src/lease').map(witness);
    expect(crossing).toEqual([]);
    // The stores build on the shared semantics; if the scanner stopped seeing that, this would fail.
    for (const store of LEASE_STORE_FOLDERS) expect(leaseEdges.some((e) => e.fromPart === `src/lease/${store}` && e.toPart === 'src/lease')).toBe(true);
  });

  it('imports a store folder from the shared lease modules only through the allow-listed edges, which only shrink', () => {
    const found = [...new Set(leaseEdges.filter((e) => e.fromPart === 'src/lease').map(witness))].sort();
    expect(found.filter((edge) => !ALLOWED_SHARED_TO_STORE_IMPORTS.includes(edge)), 'shared lease module importing a store folder').toEqual([]);
    expect(ALLOWED_SHARED_TO_STORE_IMPORTS.filter((edge) => !found.includes(edge)), 'allow-listed edges that are gone: remove them').toEqual([]);
  });
});

describe('the import scanner and cycle finder', () => {
  it('sees static, re-export, dynamic and type-position imports, and marks which are type-only', () => {
    const refs = moduleReferences(
      'x.ts',
      [
        "import { a } from './a.js';",
        "import type { B } from './b.js';",
        "import { type C, type D } from './c.js';",
        "import { type E, f } from './e.js';",
        "export { g } from './g.js';",
        "export type { H } from './h.js';",
        "const m = await import('./m.js');",
        "let t: import('./t.js').T;",
        "// import { z } from './in-a-comment.js';",
        "const s = \"import { y } from './in-a-string.js'\";",
      ].join('\n'),
    );
    expect(refs).toEqual([
      { specifier: './a.js', typeOnly: false },
      { specifier: './b.js', typeOnly: true },
      { specifier: './c.js', typeOnly: true },
      { specifier: './e.js', typeOnly: false },
      { specifier: './g.js', typeOnly: false },
      { specifier: './h.js', typeOnly: true },
      { specifier: './m.js', typeOnly: false },
      { specifier: './t.js', typeOnly: true },
    ]);
  });

  it('finds a cycle between folders and prints its path, and finds none in a layered graph', () => {
    const cyclic = graphOf([
      ['src/lease', 'src/io'],
      ['src/io', 'src/scheduler'],
      ['src/scheduler', 'src/lease'],
      ['src/cli', 'src/lease'],
    ]);
    const components = cyclicComponents(cyclic);
    expect(components).toEqual([['src/io', 'src/lease', 'src/scheduler']]);
    expect(cycleThrough(cyclic, components[0]!, 'src/io')).toEqual(['src/io', 'src/scheduler', 'src/lease', 'src/io']);
    expect(cyclicComponents(graphOf([['src/cli', 'src/lease'], ['src/lease', 'src/fs'], ['src/cli', 'src/fs']]))).toEqual([]);
  });

  it('names the lease part of a file: the shared top, a store folder, or an unknown folder', () => {
    expect(leasePartOf(path.join('src', 'lease', 'lease-record.ts'))).toBe('src/lease');
    expect(leasePartOf(path.join('src', 'lease', 'sqlite', 'sqlite-rows.ts'))).toBe('src/lease/sqlite');
    expect(leasePartOf(path.join('src', 'lease', 'other', 'x.ts'))).toBe('src/lease/other?');
    expect(leasePartOf(path.join('src', 'io', 'io-thread.ts'))).toBeUndefined();
  });

  it('names a folder by its first directory under src/ and a top-level file by itself', () => {
    expect(folderOf(path.join('src', 'scheduler', 'lanes', 'cstg-lane.ts'))).toBe('src/scheduler');
    expect(folderOf(path.join('src', 'errors.ts'))).toBe('src/errors.ts');
  });
});
