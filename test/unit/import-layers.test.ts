/**
 * The layering rule of docs/architecture.md "Layers": the folders of src/ import each other without
 * cycles, and no module reaches itself through run-time imports.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cycleThrough, cyclicComponents, folderOf, graphOf, moduleReferences, scanImports, type Graph, type ImportEdge } from '../helpers/import-graph.js';

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

  it('names a folder by its first directory under src/ and a top-level file by itself', () => {
    expect(folderOf(path.join('src', 'scheduler', 'lanes', 'cstg-lane.ts'))).toBe('src/scheduler');
    expect(folderOf(path.join('src', 'errors.ts'))).toBe('src/errors.ts');
  });
});
