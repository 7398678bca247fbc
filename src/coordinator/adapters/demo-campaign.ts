/**
 * `symfence demo`: the embedded default campaign. The reference solver (a stand-in for a SymCC
 * binary, see src/reference/) explores the bundled maze from one seed, with the maze's own coverage
 * map as triage; no AFL++ or SymCC is needed. The demo tracks which maze branch outcomes its
 * inputs reach and stops as soon as every one is reached (or when the duration runs out).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { OptionsInput } from '../../config/schema.js';
import { DEMO_MAZE } from '../../reference/demo-maze.js';
import { mazeBranchCount, mazeEdgeHits, reachedBranches, traceMaze, type Maze } from '../../reference/maze.js';
import { referenceSolverCommand } from '../../reference/reference-commands.js';
import type { CoverageBitmap } from '../../solver/coverage-bitmap.js';
import { Campaign, type CampaignRuntime, type CampaignStartOptions, type CampaignSummary } from '../campaign.js';
import type { SOLVER_CAMPAIGN_OPTIONS } from '../../solver/solver-options.js';
import { buildCampaignComponents } from './campaign-components.js';

export const DEMO_MAZE_SPEC = 'builtin:demo';

/** The demo's seed: a printable input of the maze's length that takes no interesting branch. */
export function demoSeedBytes(maze: Maze = DEMO_MAZE): Uint8Array {
  return new Uint8Array(maze.inputLength).fill(0x41);
}

/**
 * Built-in coverage: the maze's own edge map of an input (what afl-showmap would report for the
 * compiled maze), merged into the shared bitmap in-process — no process per generated input.
 * An input that reaches an abort node is a terminal crash.
 */
export function mazeClassifier(maze: Maze, bitmap: CoverageBitmap): (bytes: Uint8Array) => { interesting: boolean; terminal?: 'crash' } {
  return (bytes) => {
    const trace = traceMaze(maze, bytes);
    const novelty = bitmap.claimEdges(mazeEdgeHits(trace, bitmap.sizeBytes));
    return trace.aborted ? { interesting: novelty.newBits > 0, terminal: 'crash' } : { interesting: novelty.newBits > 0 };
  };
}

export interface DemoSummary extends CampaignSummary {
  readonly maze: string;
  readonly branchesReached: number;
  readonly branchesTotal: number;
  readonly complete: boolean;
  readonly findings: number;
  readonly conflicts: number;
}

/** Tracks the union of maze branch outcomes reached by the demo's inputs. */
export class MazeProgress {
  readonly #maze: Maze;
  readonly #reached = new Set<string>();
  readonly total: number;

  constructor(maze: Maze) {
    this.#maze = maze;
    this.total = mazeBranchCount(maze);
  }

  add(input: Uint8Array): void {
    for (const outcome of reachedBranches(this.#maze, input)) this.#reached.add(outcome);
  }

  get reached(): number {
    return this.#reached.size;
  }

  get complete(): boolean {
    return this.#reached.size >= this.total;
  }
}

export interface DemoHandle {
  readonly campaign: Campaign;
  readonly progress: MazeProgress;
  /** Resolves once the campaign stopped, with the maze coverage added. */
  readonly done: Promise<DemoSummary>;
}

/**
 * Starts the demo. `options` are campaign options; `outDir` defaults to the caller's choice (the
 * CLI passes a fresh temporary directory). The seed is written to `<outDir>/seeds/seed`.
 * `settings.solver`: further solver options (caps, kill grace, spawn thread …), as for `run`;
 * `options.scheduler`, `options.io` and `options.hints` as for `Campaign.start`.
 */
export async function startDemo(
  options: Omit<CampaignStartOptions, 'solverCommand' | 'showmap' | 'aflTarget'>,
  runtime: Omit<CampaignRuntime, 'components'>,
  settings: { readonly solver?: OptionsInput<typeof SOLVER_CAMPAIGN_OPTIONS.specs> } = {},
): Promise<DemoHandle> {
  const progress = new MazeProgress(DEMO_MAZE);
  const campaign = await Campaign.start(options, {
    ...runtime,
    components: async (context) => {
      const seedDir = path.join(context.outDir, 'seeds');
      mkdirSync(seedDir, { recursive: true });
      const seedPath = path.join(seedDir, 'seed');
      const bytes = demoSeedBytes();
      writeFileSync(seedPath, bytes);
      progress.add(bytes);
      return buildCampaignComponents(context, {
        command: referenceSolverCommand(DEMO_MAZE_SPEC, 'file'),
        honoursTraceOnly: true,
        classify: (bitmap) => mazeClassifier(DEMO_MAZE, bitmap),
        initialSeeds: [{ path: seedPath, sha256: createHash('sha256').update(bytes).digest('hex'), depth: 0, origin: 'seed' }],
        ...(settings.solver ? { solver: settings.solver } : {}),
      });
    },
  });
  campaign.on('finding', (finding) => {
    try {
      progress.add(readFileSync(finding.path));
    } catch {
      return;
    }
    if (progress.complete) void campaign.stop();
  });
  const done = campaign.done.then((summary): DemoSummary => ({
    ...summary,
    maze: DEMO_MAZE.name,
    branchesReached: progress.reached,
    branchesTotal: progress.total,
    complete: progress.complete,
    findings: summary.counters.interesting + summary.counters.crashes + summary.counters.hangs,
    conflicts: summary.counters.conflicts,
  }));
  return { campaign, progress, done };
}
