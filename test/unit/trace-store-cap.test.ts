// The trace store's cap (docs/campaign.md "Shared traces"): the pure eviction plan, the option
// that sets the cap (API, environment variable, flag), validated like every campaign option, and
// its counters in stats.json and `symfence status`.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MAX_TRACE_EVICTIONS_PER_PASS, TRACE_EVICTION_LOW_WATER, planTraceEviction, type KeptTrace } from '../../src/commit/trace-store-cap.js';
import { CAMPAIGN_OPTIONS } from '../../src/coordinator/campaign-options.js';
import { optionsFromEnv, optionsFromFlags } from '../../src/config/schema.js';
import { createCounters } from '../../src/telemetry/counters.js';
import { makeSnapshot, parseStatsFile } from '../../src/telemetry/stats-file.js';
import { formatCampaignStatus } from '../../src/telemetry/campaign-status.js';

const trace = (i: number, bytes = 100): KeptTrace => ({ workId: `w${i}`, name: `w${i}.t`, bytes });

describe('planTraceEviction', () => {
  it('evicts nothing while the stored traces fit in the cap', () => {
    const stored = [trace(1), trace(2)];
    expect(planTraceEviction(stored, new Set(['w1', 'w2']), new Map([['w1.t', 1], ['w2.t', 2]]), 200)).toEqual({ storedBytes: 200, evict: [] });
  });

  it('evicts the least recently used first, down to the low-water mark, ties by name', () => {
    const stored = [1, 2, 3, 4, 5].map((i) => trace(i));
    const lastUse = new Map([['w1.t', 50], ['w2.t', 10], ['w3.t', 10], ['w4.t', 40], ['w5.t', 60]]);
    // 500 bytes against a cap of 400: down to 360, so two go.
    expect(planTraceEviction(stored, new Set(stored.map((t) => t.workId)), lastUse, 400).evict).toEqual(['w2.t', 'w3.t']);
  });

  it('never evicts a trace whose work is not evictable, and counts one gone since the listing as freed', () => {
    const stored = [1, 2, 3].map((i) => trace(i));
    // w1 is the oldest but not settled; w2 is gone (no last use): 300 − 100 = 200 > 180, so w3 goes.
    expect(planTraceEviction(stored, new Set(['w2', 'w3']), new Map([['w1.t', 1], ['w3.t', 5]]), 200).evict).toEqual(['w3.t']);
    expect(planTraceEviction(stored, new Set(), new Map([['w1.t', 1]]), 1).evict).toEqual([]);
  });

  it('removes at most the per-pass bound', () => {
    const stored = Array.from({ length: MAX_TRACE_EVICTIONS_PER_PASS + 10 }, (_, i) => trace(i, 1));
    const plan = planTraceEviction(stored, new Set(stored.map((t) => t.workId)), new Map(stored.map((t, i) => [t.name, i])), 1);
    expect(plan.evict).toHaveLength(MAX_TRACE_EVICTIONS_PER_PASS);
    expect(plan.evict[0]).toBe('w0.t');
  });

  it('leaves at most the low-water share of the cap when everything is evictable, and keeps every trace used after an evicted one', () => {
    fc.assert(
      fc.property(fc.array(fc.record({ bytes: fc.integer({ min: 1, max: 1000 }), use: fc.integer({ min: 0, max: 50 }) }), { maxLength: 60 }), fc.integer({ min: 1, max: 20_000 }), (rows, cap) => {
        const stored = rows.map((r, i) => trace(i, r.bytes));
        const lastUse = new Map(rows.map((r, i) => [`w${i}.t`, r.use]));
        const plan = planTraceEviction(stored, new Set(stored.map((t) => t.workId)), lastUse, cap);
        const evicted = new Set(plan.evict);
        const left = stored.filter((t) => !evicted.has(t.name)).reduce((sum, t) => sum + t.bytes, 0);
        if (plan.storedBytes <= cap) expect(plan.evict).toEqual([]);
        else expect(left).toBeLessThanOrEqual(Math.floor(cap * TRACE_EVICTION_LOW_WATER));
        const newestEvicted = Math.max(-1, ...plan.evict.map((n) => lastUse.get(n)!));
        for (const t of stored) if (!evicted.has(t.name)) expect(lastUse.get(t.name)!).toBeGreaterThanOrEqual(newestEvicted);
      }),
    );
  });
});

describe('traceStoreMaxBytes', () => {
  it('defaults to 512 MiB and takes sizes from the API, SYMFENCE_TRACE_STORE_MAX and --trace-store-max', () => {
    expect(CAMPAIGN_OPTIONS.defaults.traceStoreMaxBytes).toBe(512 * 1024 * 1024);
    expect(CAMPAIGN_OPTIONS.resolve({ traceStoreMaxBytes: '2G' }).traceStoreMaxBytes).toBe(2 * 1024 ** 3);
    expect(optionsFromEnv(CAMPAIGN_OPTIONS, { SYMFENCE_TRACE_STORE_MAX: '64M' })).toEqual({ traceStoreMaxBytes: 64 * 1024 * 1024 });
    expect(optionsFromFlags(CAMPAIGN_OPTIONS, { traceStoreMax: '1M' })).toEqual({ traceStoreMaxBytes: 1024 * 1024 });
  });

  it.each([
    [() => CAMPAIGN_OPTIONS.resolve({ traceStoreMaxBytes: 'lots' }), 'traceStoreMaxBytes', 'lots'],
    [() => CAMPAIGN_OPTIONS.resolve({ traceStoreMaxBytes: 1000 }), 'traceStoreMaxBytes', '1000'],
    [() => optionsFromEnv(CAMPAIGN_OPTIONS, { SYMFENCE_TRACE_STORE_MAX: '-5' }), 'SYMFENCE_TRACE_STORE_MAX', '-5'],
    [() => optionsFromFlags(CAMPAIGN_OPTIONS, { traceStoreMax: '2048G' }), '--trace-store-max', '2199023255552'],
  ])('refuses a bad value with ERR_INVALID_OPTION naming the option and the value (%#)', (resolve, option, value) => {
    let error: unknown;
    try {
      resolve();
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: 'ERR_INVALID_OPTION' });
    expect((error as Error).message).toContain(option);
    expect((error as Error).message).toContain(value);
  });
});

describe('trace store counters in stats.json and symfence status', () => {
  it('round-trips tracesEvicted and traceAdoptMissing and prints them beside the adopted traces, and reads an older file without them as 0', () => {
    const counters = { ...createCounters(), tracesAdopted: 7, traceAdoptFailures: 1, traceAdoptMissing: 3, tracesEvicted: 12 };
    const snap = makeSnapshot({ coordinator: 'c', name: 'symfence', state: 'running', startedMs: 0, updatedMs: 60_000, statsIntervalMs: 5000, workers: 1, counters });
    const stats = parseStatsFile('stats.json', JSON.stringify(snap));
    expect(stats.counters).toMatchObject({ traceAdoptMissing: 3, tracesEvicted: 12 });
    const text = formatCampaignStatus({ path: 'stats.json', liveness: 'running', stats });
    expect(text).toContain('traces adopted 7 (deferred 0, failed 1, own relearned 0, evicted before adoption 3)');
    expect(text).toContain('traces evicted 12');
    const older = JSON.parse(JSON.stringify(snap)) as { counters: Record<string, unknown> };
    delete older.counters['traceAdoptMissing'];
    delete older.counters['tracesEvicted'];
    expect(parseStatsFile('stats.json', JSON.stringify(older)).counters).toMatchObject({ traceAdoptMissing: 0, tracesEvicted: 0 });
  });
});
