/**
 * What a campaign runs on and what its component factory is given. Kept apart from campaign.ts so
 * the factories (src/coordinator/adapters/) depend on these types, not on `Campaign` itself
 * (docs/architecture.md "Layers").
 */
import type { Logger } from 'pino';
import type { IoOptions } from '../io/io-options.js';
import type { HintSource } from '../scheduler/hints.js';
import type { SchedulerOptions } from '../scheduler/scheduler-options.js';
import type { CampaignCounters } from '../telemetry/counters.js';
import type { CampaignOptions } from './campaign-options.js';
import type { CoordinatorPorts } from './coordinator.js';
import type { Clock } from './ports.js';

/** What a campaign runs on. Built by a factory once the output directory exists. */
export interface CampaignComponents extends CoordinatorPorts {
  /** Non-zero bytes of the global coverage bitmap, for `edgesCovered`. */
  readonly edgesCovered?: () => number;
  /** Releases the components' resources (threads, files). Called once, last. */
  close?(): Promise<void>;
}

export interface CampaignContext {
  readonly options: CampaignOptions;
  /** Scheduler options (`SCHEDULER_OPTIONS`): lanes, budgets, state interval, hints and guidance files. */
  readonly scheduler: SchedulerOptions;
  /** I/O thread options (`IO_OPTIONS`, the `--io-*` flags). */
  readonly io: IoOptions;
  /** Embedder hint sources, consulted before a `--hints` file (docs/scheduler.md "Hints"). */
  readonly hints: readonly HintSource[];
  /** Lease table options as given (`LEASE_TABLE_OPTIONS` input): the store and its settings. */
  readonly leases?: Readonly<Record<string, unknown>>;
  readonly outDir: string;
  readonly coordinatorId: string;
  readonly workers: number;
  readonly logger: Logger;
  readonly counters: CampaignCounters;
  readonly clock: Clock;
}

export type CampaignComponentsFactory = (context: CampaignContext) => Promise<CampaignComponents>;
