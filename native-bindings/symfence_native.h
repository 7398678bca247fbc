/* Shared between the addon's translation units. */
#ifndef SYMFENCE_NATIVE_H
#define SYMFENCE_NATIVE_H

#define NAPI_VERSION 8
#include <node_api.h>
#include <stddef.h>
#include <sys/syscall.h>

/* posix_spawn with addchdir_np (glibc >= 2.29) and pidfd_open: the native spawn path. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 29)) && defined(SYS_pidfd_open)
#define SYMFENCE_HAVE_SPAWN 1
#else
#define SYMFENCE_HAVE_SPAWN 0
#endif

/* A memory file holding `bytes`, positioned at 0; -errno on failure (spawn_group.c). */
int symfence_memfd_holding(const char *bytes, size_t length);

/* The errno's symbolic name ("ENOENT"), or "EUNKNOWN". */
const char *symfence_errno_name(int err);

/* Throws Error(`<syscall> failed: <strerror> (<CODE>)`) with code/errno/syscall, like Node's own. */
void symfence_throw_errno(napi_env env, const char *syscall, int err);

/* Adds spawnGroup (or spawnUnsupported, the reason it is missing) to exports; 0 on N-API failure. */
int symfence_spawn_init(napi_env env, napi_value exports);

#endif
