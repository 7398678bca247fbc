/**
 * Test hooks of the CLI, enabled only by environment variables a test sets for a child process.
 *
 * `SYMFENCE_TEST_HOLD_AFTER_BEGIN_COMMIT=<file>`: the first time a result with at least one finding
 * has passed `beginCommit`, the coordinator writes `{ "workId", "pid" }` to `<file>` (atomically:
 * temp then rename) and then never proceeds with that job — the test kills the process there,
 * which is exactly the crash window commit recovery closes.
 */
import { writeFileAtomicSync } from '../fs/durable-files.js';
import type { CoordinatorHooks } from '../coordinator/coordinator.js';

export const HOLD_AFTER_BEGIN_COMMIT_ENV = 'SYMFENCE_TEST_HOLD_AFTER_BEGIN_COMMIT';

export function testHooksFromEnv(env: NodeJS.ProcessEnv): CoordinatorHooks | undefined {
  const file = env[HOLD_AFTER_BEGIN_COMMIT_ENV];
  if (file === undefined || file === '') return undefined;
  let held = false;
  return {
    afterBeginCommit: async ({ workId, findings }) => {
      if (held || findings === 0) return;
      held = true;
      writeFileAtomicSync(file, JSON.stringify({ workId, pid: process.pid }));
      await new Promise<never>(() => {});
    },
  };
}
