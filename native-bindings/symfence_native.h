/* Shared between the addon's translation units. */
#ifndef SYMFENCE_NATIVE_H
#define SYMFENCE_NATIVE_H

#define NAPI_VERSION 8
#include <node_api.h>

/* The errno's symbolic name ("ENOENT"), or "EUNKNOWN". */
const char *symfence_errno_name(int err);

/* Throws Error(`<syscall> failed: <strerror> (<CODE>)`) with code/errno/syscall, like Node's own. */
void symfence_throw_errno(napi_env env, const char *syscall, int err);

/* Adds spawnGroup (or spawnUnsupported, the reason it is missing) to exports; 0 on N-API failure. */
int symfence_spawn_init(napi_env env, napi_value exports);

#endif
