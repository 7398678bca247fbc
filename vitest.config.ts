import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two busy cores: keep file-level parallelism modest so process and thread tests keep their
    // handshakes responsive.
    maxWorkers: 2,
  },
});
