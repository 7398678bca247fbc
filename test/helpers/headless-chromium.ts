/**
 * Debian's chromium driven through playwright-core, which never downloads a browser: the system
 * binary, headless, with its background network off (the report must render with no network).
 * Where chromium is missing the browser tests skip — except in CI (`CI` set), where a missing
 * browser is a failure: `.ci/run` installs it.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM_PATH = process.env['SYMFENCE_CHROMIUM'] ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'];

const ci = (process.env['CI'] ?? '') !== '' && process.env['CI'] !== 'false' && process.env['CI'] !== '0';

/** Skip the browser tests only off CI and only when the binary is missing. */
export const skipBrowserTests = !ci && !existsSync(CHROMIUM_PATH);

export function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) throw new Error(`chromium not found at ${CHROMIUM_PATH} (CI must install it: apt-get install chromium)`);
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true });
}
