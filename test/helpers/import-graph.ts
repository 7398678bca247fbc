/**
 * The import graph of `src/`, read with the TypeScript parser (so an `import` in a comment or a
 * string is not an edge): every `import … from`, `export … from`, `import('…')` call and
 * `import('…')` type with a relative string literal. Used by test/unit/import-layers.test.ts to
 * enforce the layering rule of docs/architecture.md "Layers".
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

export interface ImportEdge {
  /** Importing file, relative to the package root (`src/lease/files/record-files.ts`). */
  readonly from: string;
  /** Imported file, relative to the package root. */
  readonly to: string;
  /** The specifier as written. */
  readonly specifier: string;
  /** `import type`, `export type … from` or an `import('…')` type: gone at run time. */
  readonly typeOnly: boolean;
}

export interface ImportScan {
  readonly files: readonly string[];
  readonly edges: readonly ImportEdge[];
  /** Relative specifiers that name no file (`from → specifier`); tsc would refuse them too. */
  readonly unresolved: readonly string[];
}

function listTs(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return listTs(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** The module specifiers of one source text, with whether each is type-only. */
export function moduleReferences(fileName: string, text: string): { specifier: string; typeOnly: boolean }[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: { specifier: string; typeOnly: boolean }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      // `import { type A, type B } from` is type-only too; `import './x'` (no clause) is not.
      const allTypes =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            clause.namedBindings !== undefined &&
            ts.isNamedImports(clause.namedBindings) &&
            clause.namedBindings.elements.length > 0 &&
            clause.namedBindings.elements.every((e) => e.isTypeOnly)));
      found.push({ specifier: node.moduleSpecifier.text, typeOnly: allTypes });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      const allTypes =
        node.isTypeOnly ||
        (node.exportClause !== undefined &&
          ts.isNamedExports(node.exportClause) &&
          node.exportClause.elements.length > 0 &&
          node.exportClause.elements.every((e) => e.isTypeOnly));
      found.push({ specifier: node.moduleSpecifier.text, typeOnly: allTypes });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [first] = node.arguments;
      if (first !== undefined && ts.isStringLiteralLike(first)) found.push({ specifier: first.text, typeOnly: false });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push({ specifier: node.argument.literal.text, typeOnly: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function resolveRelative(fromFile: string, specifier: string): string | undefined {
  const base = path.resolve(path.dirname(fromFile), specifier);
  const candidates = [base.replace(/\.js$/, '.ts'), `${base}.ts`, path.join(base, 'index.ts'), base];
  return candidates.find((candidate) => existsSync(candidate) && statSync(candidate).isFile());
}

/** Scans every `.ts` file under `<root>/src`; edges are between files inside `src/`. */
export function scanImports(root: string): ImportScan {
  const files = listTs(path.join(root, 'src')).sort();
  const edges: ImportEdge[] = [];
  const unresolved: string[] = [];
  for (const file of files) {
    const from = path.relative(root, file);
    for (const { specifier, typeOnly } of moduleReferences(file, readFileSync(file, 'utf8'))) {
      if (!specifier.startsWith('.')) continue;
      const target = resolveRelative(file, specifier);
      if (target === undefined) {
        unresolved.push(`${from} → ${specifier}`);
        continue;
      }
      const to = path.relative(root, target);
      if (to.startsWith(`src${path.sep}`)) edges.push({ from, to, specifier, typeOnly });
    }
  }
  return { files: files.map((f) => path.relative(root, f)), edges, unresolved };
}

/** `src/<folder>` for a file in a folder of src/; the file itself for one directly in src/. */
export function folderOf(file: string): string {
  const parts = file.split(path.sep);
  return parts.length <= 2 ? parts.join('/') : `${parts[0]}/${parts[1]}`;
}

/** The lease stores, one folder each under src/lease/ (docs/architecture.md "Layers"). */
export const LEASE_STORE_FOLDERS = ['files', 'sqlite', 'etcd'] as const;

/**
 * `src/lease/<store>` for a file of one store's folder, `src/lease` for the shared lease semantics
 * directly in src/lease/, undefined outside src/lease/.
 */
export function leasePartOf(file: string): string | undefined {
  const parts = file.split(path.sep);
  if (parts[0] !== 'src' || parts[1] !== 'lease') return undefined;
  if (parts.length === 3) return 'src/lease';
  return (LEASE_STORE_FOLDERS as readonly string[]).includes(parts[2]!) ? `src/lease/${parts[2]}` : `src/lease/${parts[2]}?`;
}

/** Directed graph as adjacency sets; every endpoint is a key. */
export type Graph = ReadonlyMap<string, ReadonlySet<string>>;

export function graphOf(pairs: Iterable<readonly [string, string]>): Graph {
  const graph = new Map<string, Set<string>>();
  for (const [a, b] of pairs) {
    if (!graph.has(a)) graph.set(a, new Set());
    if (!graph.has(b)) graph.set(b, new Set());
    if (a !== b) graph.get(a)!.add(b);
  }
  return graph;
}

/** Strongly connected components with more than one node (Tarjan), each sorted, sorted by first node. */
export function cyclicComponents(graph: Graph): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) components.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) connect(v);
  return components.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** One concrete cycle through `start` inside `component` (`a → b → … → a`), by breadth-first search. */
export function cycleThrough(graph: Graph, component: readonly string[], start: string): string[] {
  const inside = new Set(component);
  const parent = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let at = v; at !== start; at = parent.get(at)!) path.splice(1, 0, at);
        return [...path, start];
      }
      if (!parent.has(w)) {
        parent.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}
