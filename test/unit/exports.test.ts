// The public entries of the package, read the way an embedder reads them: through package.json
// `exports` (the package imports itself by name), from the built files. A broken exports map, a
// missing .d.ts or an accidental addition or removal of a name fails here; each entry's names are
// snapshotted on their own (docs/campaign.md "Embedding").
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const PACKAGE = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, Record<string, string>>;
};

/** Subpath → its source entry. The built file is what `exports` names; the source is what tsc compiles. */
const ENTRIES: ReadonlyArray<readonly [subpath: string, source: string]> = [
  ['.', 'src/index.ts'],
  ['./leases', 'src/api/leases.ts'],
  ['./scheduler', 'src/api/scheduler.ts'],
  ['./solver', 'src/api/solver.ts'],
  ['./testing', 'src/api/testing.ts'],
];

function specifierOf(subpath: string): string {
  return subpath === '.' ? PACKAGE.name : `${PACKAGE.name}/${subpath.slice(2)}`;
}

/** Every name a declaration file exports (values and types), by parsing it. */
function declaredNames(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const names: string[] = [];
  for (const statement of source.statements) {
    if (ts.isExportDeclaration(statement) && statement.exportClause && ts.isNamedExports(statement.exportClause)) {
      for (const element of statement.exportClause.elements) names.push(element.name.text);
    } else if (ts.canHaveModifiers(statement) && ts.getModifiers(statement)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) {
      if (ts.isVariableStatement(statement)) {
        for (const d of statement.declarationList.declarations) if (ts.isIdentifier(d.name)) names.push(d.name.text);
      } else if ('name' in statement && statement.name && ts.isIdentifier(statement.name as ts.Node)) {
        names.push((statement.name as ts.Identifier).text);
      }
    }
  }
  return [...new Set(names)].sort();
}

it('package.json exports exactly the root and the four building-block entries, each with types before default', () => {
  expect(PACKAGE.name).toBe('symfence');
  expect(Object.keys(PACKAGE.exports)).toEqual(ENTRIES.map(([subpath]) => subpath));
  for (const [subpath, source] of ENTRIES) {
    const entry = PACKAGE.exports[subpath]!;
    // TypeScript takes the first matching condition: `types` must come first.
    expect(Object.keys(entry), subpath).toEqual(['types', 'default']);
    const built = source.replace(/^src\//, './dist/src/').replace(/\.ts$/, '');
    expect(entry, subpath).toEqual({ types: `${built}.d.ts`, default: `${built}.js` });
  }
});

describe.each(ENTRIES)('entry %s', (subpath, source) => {
  it('resolves through the exports map to the built file and exports exactly the snapshotted names', async () => {
    const entry = PACKAGE.exports[subpath]!;
    const specifier = specifierOf(subpath);
    expect(fileURLToPath(import.meta.resolve(specifier))).toBe(path.join(ROOT, entry.default!));
    const built = (await import(specifier)) as Record<string, unknown>;
    const runtime = Object.keys(built).sort();

    const declarations = path.join(ROOT, entry.types!);
    expect(existsSync(declarations), `${declarations} (run npm run build)`).toBe(true);
    const declared = declaredNames(declarations);
    // Every value has a declaration; the rest of the declared names are types.
    expect(runtime.filter((name) => !declared.includes(name))).toEqual([]);
    const types = declared.filter((name) => !runtime.includes(name));

    // The built entry matches the source (a stale dist/ would snapshot old names).
    const fromSource = (await import(path.join(ROOT, source))) as Record<string, unknown>;
    expect(runtime, `dist/ is older than ${source}: run npm run build`).toEqual(Object.keys(fromSource).sort());

    const name = subpath === '.' ? 'root' : subpath.slice(2);
    await expect(`${JSON.stringify({ runtime, types }, null, 2)}\n`).toMatchFileSnapshot(`__snapshots__/exports/${name}.json`);
  });
});
