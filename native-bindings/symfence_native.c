/*
 * symfence native addon: what Node cannot do for the lease tables, and a cheap way to start solvers.
 *
 *   tryLockExclusive(fd) -> boolean   flock(fd, LOCK_EX | LOCK_NB); false on EWOULDBLOCK
 *   unlock(fd)           -> undefined flock(fd, LOCK_UN)
 *   syncfs(fd)           -> undefined syncfs(fd): one barrier for every dirty page of a filesystem
 *   spawnGroup(...)      -> pid       posix_spawn in a new session, watched on this thread's loop
 *                                     (spawn_group.c)
 *
 * flock locks belong to the open file description, so two fds opened separately on the same file
 * exclude each other even inside one process, and the kernel drops the lock when the last fd of
 * the description closes (including when the holder is SIGKILLed). That is exactly the lease
 * tables' lock contract; fcntl locks would be per process and silently shared between threads.
 *
 * Every call is synchronous and short: flock is non-blocking here, and syncfs is only called from
 * the I/O thread, never from the main thread's hot path. Errors throw an Error whose `code` is the
 * errno name (EBADF, ENOLCK, EIO ...) and which carries `errno` and `syscall`, like Node's own.
 *
 * Plain N-API (node_api.h from the local Node headers) so no extra package is downloaded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "symfence_native.h"

const char *symfence_errno_name(int err) {
  switch (err) {
#define E(name) case name: return #name;
    E(EBADF) E(EINTR) E(EINVAL) E(ENOLCK) E(EAGAIN) E(EIO) E(ENOSPC) E(EDQUOT) E(EROFS)
    E(EACCES) E(EPERM) E(ENOSYS) E(EOPNOTSUPP) E(ENOMEM) E(EFAULT) E(ENOENT) E(ENOTDIR)
    E(ENOEXEC) E(EMFILE) E(ENFILE) E(E2BIG) E(ENAMETOOLONG) E(ELOOP) E(ETXTBSY) E(EISDIR)
    E(ESRCH) E(ECHILD)
#undef E
    default: return "EUNKNOWN";
  }
}

/* Throws Error(`<syscall> failed: <strerror> (<CODE>)`) with code/errno/syscall properties. */
void symfence_throw_errno(napi_env env, const char *syscall, int err) {
  char message[160];
  const char *code = symfence_errno_name(err);
  snprintf(message, sizeof message, "%s failed: %s (%s)", syscall, strerror(err), code);
  napi_value msg, code_value, error, errno_value, syscall_value;
  if (napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg) != napi_ok) return;
  if (napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &code_value) != napi_ok) return;
  if (napi_create_error(env, code_value, msg, &error) != napi_ok) return;
  /* napi_create_error only sets `code`; add the same fields Node's fs errors carry. */
  if (napi_create_int32(env, -err, &errno_value) == napi_ok)
    napi_set_named_property(env, error, "errno", errno_value);
  if (napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &syscall_value) == napi_ok)
    napi_set_named_property(env, error, "syscall", syscall_value);
  napi_throw(env, error);
}

/* Reads argument 0 as a non-negative int32 fd; throws TypeError (code ERR_INVALID_ARG_TYPE) otherwise. */
static int fd_argument(napi_env env, napi_callback_info info, int32_t *fd) {
  size_t argc = 1;
  napi_value argv[1];
  napi_valuetype type;
  double value;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return 0;
  if (argc < 1 || napi_typeof(env, argv[0], &type) != napi_ok || type != napi_number) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "fd must be a number");
    return 0;
  }
  if (napi_get_value_double(env, argv[0], &value) != napi_ok) return 0;
  if (!(value >= 0 && value <= INT32_MAX) || value != (double)(int32_t)value) {
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "fd must be an integer in 0..2^31-1");
    return 0;
  }
  *fd = (int32_t)value;
  return 1;
}

static napi_value try_lock_exclusive(napi_env env, napi_callback_info info) {
  int32_t fd;
  napi_value result;
  int rc;
  if (!fd_argument(env, info, &fd)) return NULL;
  do rc = flock(fd, LOCK_EX | LOCK_NB); while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    if (err != EWOULDBLOCK && err != EAGAIN) {
      symfence_throw_errno(env, "flock", err);
      return NULL;
    }
  }
  napi_get_boolean(env, rc == 0, &result);
  return result;
}

static napi_value unlock_fd(napi_env env, napi_callback_info info) {
  int32_t fd;
  int rc;
  if (!fd_argument(env, info, &fd)) return NULL;
  do rc = flock(fd, LOCK_UN); while (rc != 0 && errno == EINTR);
  if (rc != 0) symfence_throw_errno(env, "flock", errno);
  return NULL;
}

static napi_value syncfs_fd(napi_env env, napi_callback_info info) {
  int32_t fd;
  if (!fd_argument(env, info, &fd)) return NULL;
  if (syncfs(fd) != 0) symfence_throw_errno(env, "syncfs", errno);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor properties[] = {
    { "tryLockExclusive", NULL, try_lock_exclusive, NULL, NULL, NULL, napi_enumerable, NULL },
    { "unlock", NULL, unlock_fd, NULL, NULL, NULL, napi_enumerable, NULL },
    { "syncfs", NULL, syncfs_fd, NULL, NULL, NULL, napi_enumerable, NULL },
  };
  if (napi_define_properties(env, exports, sizeof properties / sizeof properties[0], properties) != napi_ok)
    return NULL;
  if (!symfence_spawn_init(env, exports)) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
