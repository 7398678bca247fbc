/**
 * `symfence run`: an AFL++ campaign started through `Campaign.start` with the components of
 * afl-components.ts.
 */
import { checkOptionsObject } from '../../config/values.js';
import { Campaign, resolveComponentOptions, type CampaignRuntime, type CampaignStartOptions } from '../campaign.js';
import { CAMPAIGN_OPTIONS } from '../campaign-options.js';
import { aflComponentsFactory, type AflRunSettings } from './afl-components.js';

export type { AflRunSettings } from './afl-components.js';

/**
 * `symfence run`: an AFL++ campaign (see `Campaign.start` with `solverCommand`). `input` takes the
 * campaign options plus `scheduler`, `io`, `lease` and `hints`, as `Campaign.start` does.
 */
export async function startAflCampaign(
  input: Omit<CampaignStartOptions, 'solverCommand' | 'showmap' | 'aflTarget'>,
  settings: AflRunSettings,
  runtime: Omit<CampaignRuntime, 'components'>,
): Promise<Campaign> {
  checkOptionsObject(input, 'options');
  const { scheduler, io, lease, hints, ...campaign } = input;
  // Checked before the AFL++ checks run, so a bad scheduler, I/O or lease option is reported first.
  resolveComponentOptions({ scheduler, io, lease, hints });
  const components = await aflComponentsFactory(CAMPAIGN_OPTIONS.resolve(campaign), settings);
  return Campaign.start(input, { ...runtime, components });
}
