/**
 * The report's lease-table health table: for each lease directory the coordinators use (their
 * private `<out-dir>/leases`, or one shared directory listed once), the counts `symfence leases`
 * prints — held (leased, not expired), expired, committing, done, corrupt — from the same
 * lock-free inspection. A directory that cannot be inspected is a row saying why, not a failed
 * report: the charts do not depend on it.
 */
import path from 'node:path';
import { LEASE_TABLE_OPTIONS } from '../lease/lease-table-options.js';
import { nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';

export interface LeaseHealthRow {
  /** The lease directory, and the coordinators (labels) that use it. */
  readonly leaseDir: string;
  readonly usedBy: readonly string[];
  /** The table root, its kind (`work`, `target`); absent when the directory could not be inspected. */
  readonly table?: string;
  readonly kind?: string;
  readonly held?: number;
  readonly expired?: number;
  readonly committing?: number;
  readonly done?: number;
  readonly corrupt?: number;
  /** Why there are no counts (no such directory, not a lease directory, read failure). */
  readonly problem?: string;
}

interface LeaseHealthOptions {
  readonly nowMs: number;
  /** TTL for records that carry none (default: the lease tables' default TTL). */
  readonly leaseTtlMs?: number;
  readonly fsLayer?: FsLayer;
}

/** One row per table of each distinct lease directory, in the order the directories are given. */
export async function leaseHealth(uses: readonly { readonly leaseDir: string; readonly label: string }[], options: LeaseHealthOptions): Promise<LeaseHealthRow[]> {
  const byDir = new Map<string, string[]>();
  for (const use of uses) {
    const dir = path.resolve(use.leaseDir);
    byDir.set(dir, [...(byDir.get(dir) ?? []), use.label]);
  }
  const rows: LeaseHealthRow[] = [];
  for (const [leaseDir, usedBy] of byDir) {
    try {
      // Loaded on first use, after the charts are rendered, not when the report module is
      // imported: the lease stores (the etcd client among them) cost ~30 MB of RSS, which then
      // does not add to the renderer's peak.
      const { inspectLeaseDirectory } = await import('../lease/lease-inspect.js');
      const tables = await inspectLeaseDirectory(leaseDir, {
        nowMs: options.nowMs,
        leaseTtlMs: options.leaseTtlMs ?? LEASE_TABLE_OPTIONS.defaults.leaseTtlMs,
        fsLayer: options.fsLayer ?? nodeFsLayer,
      });
      for (const t of tables) {
        const c = t.counts;
        rows.push({ leaseDir, usedBy, table: t.root, kind: t.kind, held: c.leased - c.expired, expired: c.expired, committing: c.committing, done: c.done, corrupt: c.corrupt });
      }
    } catch (error) {
      rows.push({ leaseDir, usedBy, problem: error instanceof Error ? error.message : String(error) });
    }
  }
  return rows;
}
