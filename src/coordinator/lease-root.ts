/**
 * Where a campaign keeps its lease tables and shared files (docs/campaign.md "Several
 * coordinators"): the shared `--lease-dir`, or `<outDir>/leases` when it has none; with `--campaign
 * <name>`, the campaign's own namespace under it, `<root>/campaigns/<name>/`, and on etcd the keys
 * under `<etcdPrefix>/campaigns/<name>`. Campaigns of different names see none of each other's
 * work, answers, traces or staged findings.
 */
import path from 'node:path';
import { invalidOption } from '../config/values.js';
import { CAMPAIGNS_DIR, campaignPrefix } from '../lease/table-layout.js';

const CAMPAIGN_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Refuses a campaign name that is not 1–64 letters, digits, `.`, `_` or `-` starting with a letter or digit. */
export function checkCampaignName(name: string | undefined): void {
  if (name === undefined) return;
  if (typeof name !== 'string' || !CAMPAIGN_NAME.test(name)) {
    throw invalidOption('campaign', '1–64 letters, digits, ".", "_" or "-", starting with a letter or digit', name);
  }
}

/** The campaign's lease root: the lease directory (or `<outDir>/leases`), within its namespace when it has one. */
export function campaignLeaseRoot(options: { readonly leaseDir?: string | undefined; readonly campaign?: string | undefined }, outDir: string): string {
  checkCampaignName(options.campaign);
  const base = options.leaseDir !== undefined ? path.resolve(options.leaseDir) : path.join(outDir, 'leases');
  return options.campaign !== undefined ? path.join(base, CAMPAIGNS_DIR, options.campaign) : base;
}

/** The campaign's etcd key prefix: `prefix`, within its namespace when it has one. */
export function campaignEtcdPrefix(prefix: string, campaign: string | undefined): string {
  checkCampaignName(campaign);
  return campaign !== undefined ? campaignPrefix(prefix, campaign) : prefix;
}
