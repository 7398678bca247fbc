/**
 * Test hooks of the CLI, enabled only by environment variables a test sets for a child process.
 *
 * `SYMFENCE_TEST_HOLD_AFTER_BEGIN_COMMIT=<file>`: the first time a result with at least one finding
 * has passed `beginCommit`, the coordinator writes `{ "workId", "pid" }` to `<file>` (atomically:
 * temp then rename) and then never proceeds with that job — the test kills the process there,
 * which is exactly the crash window commit recovery closes.
 *
 * `SYMFENCE_TEST_HOLD_ANSWERED_AFTER_BEGIN_COMMIT=<file>`: the same, for the first result whose
 * manifest keeps answers (a run that settled a question): held before its group release, so none
 * of its answers reached the shared table.
 */
import { writeFileAtomicSync } from '../fs/durable-files.js';
import type { CoordinatorHooks } from '../coordinator/coordinator.js';

export const HOLD_AFTER_BEGIN_COMMIT_ENV = 'SYMFENCE_TEST_HOLD_AFTER_BEGIN_COMMIT';
export const HOLD_ANSWERED_AFTER_BEGIN_COMMIT_ENV = 'SYMFENCE_TEST_HOLD_ANSWERED_AFTER_BEGIN_COMMIT';

export function testHooksFromEnv(env: NodeJS.ProcessEnv): CoordinatorHooks | undefined {
  const anyFile = env[HOLD_AFTER_BEGIN_COMMIT_ENV];
  const answeredFile = env[HOLD_ANSWERED_AFTER_BEGIN_COMMIT_ENV];
  const file = anyFile !== undefined && anyFile !== '' ? anyFile : answeredFile;
  if (file === undefined || file === '') return undefined;
  const answeredOnly = file !== anyFile;
  let held = false;
  return {
    afterBeginCommit: async ({ workId, findings, settled }) => {
      if (held || (answeredOnly ? settled === 0 : findings === 0)) return;
      held = true;
      writeFileAtomicSync(file, JSON.stringify({ workId, pid: process.pid }));
      await new Promise<never>(() => {});
    },
  };
}
