import { nativeSpawnAvailable, type SpawnMethod } from '../../src/solver/spawn-method.js';

/**
 * Every way this machine can start a solver: both when the addon provides posix_spawn, else only
 * the child_process fallback (SYMFENCE_SKIP_NATIVE builds). Process tests run once per method.
 */
export const SPAWN_METHODS: readonly SpawnMethod[] = nativeSpawnAvailable() ? ['native', 'child-process'] : ['child-process'];
