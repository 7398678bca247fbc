/**
 * No failure is swallowed without a reason written next to it: every `catch` whose block does
 * nothing, and every `.catch(() => undefined)` / `.catch(() => {})`, carries a comment (on its
 * line, the line above, or inside the block) saying why nothing is lost.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

function listTs(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return listTs(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** `file:line` of every silent catch in `text` without a comment near it. */
export function uncommentedSilentCatches(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const lines = text.split('\n');
  const commented = (line: number): boolean => /\/\/|\/\*|\*\//.test(lines[line] ?? '') || /\/\/|\*\/\s*$/.test(lines[line - 1] ?? '');
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCatchClause(node) && node.block.statements.length === 0) {
      const inside = text.slice(node.block.getStart(source), node.block.getEnd());
      const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      if (!/\/\/|\/\*/.test(inside) && !commented(line)) found.push(`${path.relative(ROOT, file)}:${line + 1}`);
    }
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === 'catch' && node.arguments.length === 1) {
      const handler = node.arguments[0]!;
      if (ts.isArrowFunction(handler) && handler.parameters.length === 0) {
        const body = handler.body;
        const silent = (ts.isBlock(body) && body.statements.length === 0) || (ts.isIdentifier(body) && body.text === 'undefined');
        const line = source.getLineAndCharacterOfPosition(node.expression.name.getStart(source)).line;
        if (silent && !commented(line)) found.push(`${path.relative(ROOT, file)}:${line + 1}`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

it('finds a silent catch without a comment, and accepts one with its reason', () => {
  expect(uncommentedSilentCatches('x.ts', 'try { f(); } catch {}\np.catch(() => undefined);')).toEqual(['x.ts:1', 'x.ts:2']);
  expect(uncommentedSilentCatches('x.ts', 'try { f(); } catch {\n  // nothing was written\n}\n// best effort: expires anyway\np.catch(() => undefined);')).toEqual([]);
});

it('has no silent catch in src/ without a comment saying why nothing is lost', () => {
  const found = listTs(path.join(ROOT, 'src')).flatMap((file) => uncommentedSilentCatches(file, readFileSync(file, 'utf8')));
  expect(found).toEqual([]);
});
