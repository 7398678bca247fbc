/**
 * What a campaign runs on and what its component factory is given. Kept apart from campaign.ts so
 * the factories (src/coordinator/adapters/) depend on these types, not on `Campaign` itself
 * (docs/architecture.md "Layers").
 */
import type { Logger } from 'pino';
import type { IoOptions } from '../io/io-options.js';
import type { CampaignLeaseOptions } from '../lease/lease-table-options.js';
import type { HintSource } from '../scheduler/hints.js';
import type { SchedulerOptions } from '../scheduler/scheduler-options.js';
import type { SchedulerStats } from '../scheduler/scheduler.js';
import type { AflPeersSnapshot } from '../triage/afl-peers.js';
import type { YieldFigures } from '../telemetry/yield-figures.js';
import type { CampaignCounters } from '../telemetry/counters.js';
import type { CampaignOptions } from './campaign-options.js';
import type { CoordinatorPorts } from './coordinator.js';
import type { Clock } from './ports.js';

/** What a campaign runs on. Built by a factory once the output directory exists. */
export interface CampaignComponents extends CoordinatorPorts {
  /** Non-zero bytes of the global coverage bitmap, for `edgesCovered`. */
  readonly edgesCovered?: () => number;
  /** The AFL++ instances beside the campaign: their coverage and imports of our inputs (AFL++ campaigns only). */
  readonly aflPeers?: () => AflPeersSnapshot;
  /** The scheduler's coverage frontier figures, for stats.json. */
  readonly frontier?: () => SchedulerStats['frontier'];
  /** Measured yield of full and directed runs (first runs chosen by yield only). */
  readonly yield?: () => YieldFigures;
  /** Releases the components' resources (threads, files). Called once, last. */
  close?(): Promise<void>;
}

export interface CampaignContext {
  readonly options: CampaignOptions;
  /** Scheduler options (`SCHEDULER_OPTIONS`): lanes, budgets, state interval, hints and guidance files. */
  readonly scheduler: SchedulerOptions;
  /** I/O thread options (`IO_OPTIONS`, the `--io-*` flags). */
  readonly io: IoOptions;
  /** Lease table options (`CAMPAIGN_LEASE_OPTIONS`: store, shards, lock timeout, barriers …). */
  readonly lease: CampaignLeaseOptions;
  /** Embedder hint sources, consulted before a `--hints` file (docs/scheduler.md "Hints"). */
  readonly hints: readonly HintSource[];
  readonly outDir: string;
  readonly coordinatorId: string;
  readonly workers: number;
  readonly logger: Logger;
  readonly counters: CampaignCounters;
  readonly clock: Clock;
}

export type CampaignComponentsFactory = (context: CampaignContext) => Promise<CampaignComponents>;
