/**
 * Vega-Lite → Vega → SVG, in Node without a browser or canvas: `vega-lite` compiles the spec,
 * a headless `vega.View` (renderer `none`) lays it out and serialises the scene to SVG markup.
 * Text widths are estimated (no canvas is installed), which only affects label spacing.
 * Vega is loaded on first use: every other command (and `import 'symfence'`) starts without it.
 */
import type { TopLevelSpec } from 'vega-lite';

/**
 * The SVG of a spec. `idPrefix` is put in front of every element id (and its `url(#…)` references)
 * so several charts can be inlined in one HTML page without their clip paths colliding.
 */
export async function renderSvg(spec: TopLevelSpec, idPrefix: string): Promise<string> {
  const [{ parse, View }, { compile }] = await Promise.all([import('vega'), import('vega-lite')]);
  const vegaSpec = compile(spec).spec;
  const view = new View(parse(vegaSpec), { renderer: 'none' });
  try {
    const svg = await view.toSVG();
    return svg.replace(/\bid="([^"]+)"/g, `id="${idPrefix}-$1"`).replace(/url\(#([^)]+)\)/g, `url(#${idPrefix}-$1)`);
  } finally {
    view.finalize();
  }
}
