/**
 * `symfence run`: an AFL++ campaign started through `Campaign.start` with the components of
 * afl-components.ts.
 */
import type { OptionsInput } from '../../config/schema.js';
import { Campaign, type CampaignRuntime } from '../campaign.js';
import { CAMPAIGN_OPTIONS } from '../campaign-options.js';
import { aflComponentsFactory, type AflRunSettings } from './afl-components.js';

export { aflComponentsFactory } from './afl-components.js';
export type { AflRunSettings } from './afl-components.js';

/** `symfence run`: an AFL++ campaign (see `Campaign.start` with `solverCommand`). */
export async function startAflCampaign(
  input: OptionsInput<typeof CAMPAIGN_OPTIONS.specs>,
  settings: AflRunSettings,
  runtime: Omit<CampaignRuntime, 'components'>,
): Promise<Campaign> {
  const components = await aflComponentsFactory(CAMPAIGN_OPTIONS.resolve(input), settings);
  return Campaign.start(input, { ...runtime, components });
}
