/**
 * `symfence/testing`: fixtures for tests and demos — the reference solver and its mazes (a
 * SymCC-contract solver without SymCC, docs/reference-solver.md), the fault-injecting fs layer
 * (docs/architecture.md "Fault injection"), and in-memory stand-ins that ship in the package.
 */
export { DEMO_MAZE } from '../reference/demo-maze.js';
export { parseMaze, walkMaze, mazeBranchCount, reachedBranches, mazeCoverageMap, branchId } from '../reference/maze.js';
export type { Maze, MazeNode, MazeTest, MazeStep, MazeWalk } from '../reference/maze.js';
export { mazeToC } from '../reference/maze-c.js';
export { runReference } from '../reference/reference-run.js';
export type { ReferenceRun, ReferenceTelemetry } from '../reference/reference-run.js';
export { referenceSolverCommand, referenceTriage } from '../reference/reference-commands.js';
export { MazeProgress, mazeClassifier, demoSeedBytes } from '../coordinator/adapters/demo-campaign.js';

// The fs layer every durable write goes through, and its fault-injecting wrapper.
export { NodeFsLayer } from '../fs/fs-layer.js';
export type { FsLayer, FsOperation, FsStat } from '../fs/fs-layer.js';
export { FaultInjectingFsLayer } from '../fs/fault-fs-layer.js';
export type { FaultRule, HookRule, FsCall, BarrierCounts, PathMatcher } from '../fs/fault-fs-layer.js';

// In-memory stand-ins.
export { MapLocalReservations } from '../scheduler/map-local-reservations.js';
