/*
 * spawnGroup: start a solver with posix_spawn and watch it on the calling thread's libuv loop.
 *
 * Why not child_process: libuv 1.46 (Node 20) starts every child with a real fork(), which copies
 * the page tables of the whole (large, multi-threaded) Node process; from busy worker threads that
 * cost about twice the parent's CPU per run (docs/solver.md). glibc's posix_spawn uses
 * clone(CLONE_VM | CLONE_VFORK): the child borrows the parent's memory until it execs, so nothing
 * is copied.
 *
 *   spawnGroup({ file, argv, env, cwd, stdinFd, stdinBytes }, onStderr, onExit, onClose) -> pid
 *
 * The child, compared with Node's spawn(file, argv, { detached: true, stdio: [in, 'ignore', 'pipe'] }):
 *   - new session and process group (POSIX_SPAWN_SETSID, the setsid() libuv does for `detached`):
 *     pgid = pid, so the caller kills the whole group with kill(-pid, sig);
 *   - empty signal mask and every signal at its default action (Node ignores SIGPIPE; a solver must
 *     not inherit that), as libuv's child does;
 *   - stdin: stdinFd, or a memfd holding stdinBytes (the whole input, then EOF), or /dev/null;
 *     stdout: /dev/null; stderr: the write end of a pipe; every other fd closed;
 *   - cwd via posix_spawn_file_actions_addchdir_np;
 *   - program lookup exactly like the execvp() libuv calls: a name without '/' is searched in the
 *     PATH of `env` (default /bin:/usr/bin), EACCES is remembered while the search goes on, and a
 *     file the kernel cannot execute (ENOEXEC, e.g. a script without #!) is run by /bin/sh.
 *   A program that cannot be started throws an Error whose code is the errno name (ENOENT, EACCES).
 *
 * Watching: a uv_poll_t on a pidfd (readable when the leader exits) and one on the stderr pipe.
 * When the leader has exited, the group gets SIGKILL *before* the leader is reaped (while it is a
 * zombie its pid, and so the pgid, cannot be reused: the kill cannot hit a stranger), then
 * waitid(P_PIDFD) reaps it and onExit(code, signo) runs. libuv's SIGCHLD handler only waits for the
 * pids of its own process handles, so it never reaps ours. stderr is read in chunks of at most
 * 64 KiB, each handed to onStderr(Buffer); EOF closes the pipe. onClose() runs once the leader is
 * reaped and stderr hit EOF (Node's 'close'), after both fds are closed.
 *
 * Spawn shim (options.shim): the program is not exec'd directly but under the symfence_spawn_shim
 * executable (spawn_shim.c), which supervises the run: parent-death signal, RLIMIT_CPU
 * (options.cpuLimitSec), and a subreaper that kills whatever the run left behind, also processes
 * that called setsid(). Then options.file must be the resolved program path (no PATH search here;
 * the caller did it, src/solver/program-lookup.ts), pid/pgid are the shim's, and the caller's
 * "kill now" is SIGUSR1 to the shim (process-launchers.ts). See docs/native.md.
 *
 * Run supervisor (options.supervisor): the same guarantees without a process per run. The program
 * is started by a long-lived `symfence_spawn_shim --serve` of this thread (one per concurrent run,
 * kept between runs): a SPAWN request on its socket with the stdin, stderr and report-pipe fds
 * passed by SCM_RIGHTS (supervisor_protocol.h). The returned pid is the program's; the exit is
 * watched on the report pipe instead of a pidfd (the supervisor writes EXITED with the status and
 * rusage once it has killed and reaped everything of the run); signals go through
 * signalSupervised(pid, signo). See docs/native.md, *Run supervisor*.
 *
 * Threads: all state lives in a per-run struct bound to the env that started it, so several worker
 * threads can spawn at once. If the env is torn down mid-run (worker terminated), an async cleanup
 * hook SIGKILLs the group, reaps the leader, closes the handles and fds, and calls no JS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "run_supervisor.h"
#include "symfence_native.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif


#if SYMFENCE_HAVE_SPAWN

/* Bounded read per readiness event: a flooding solver costs one bounded copy per wake-up. */
#define STDERR_READ_BYTES (64 * 1024)
/* The search path execvp uses when the environment has no PATH (glibc's confstr _CS_PATH). */
#define DEFAULT_SEARCH_PATH "/bin:/usr/bin"

typedef struct spawn_run {
  napi_env env;
  pid_t pid;
  int pidfd;
  int errfd;
  uv_loop_t *loop;
  uv_poll_t exit_poll;
  uv_poll_t err_poll;
  /* Bounds the wait for stderr EOF once the leader was reaped (see on_exit_readable). */
  uv_timer_t drain_timer;
  uint64_t drain_ms;
  int drain_timer_active;
  /* Initialised and not yet handed to uv_close (uv_poll_stop on an unstarted poll is a no-op). */
  int exit_poll_active;
  int err_poll_active;
  /* Initialised handles whose close callback has not run yet; the run is freed at 0. */
  int handles_alive;
  int reaped;
  /* Set when JS must not be called any more (env teardown, or a start that failed half-way). */
  int silent;
  int hook_added;
  /* Started through the spawn shim: "kill now" is SIGUSR1 to the shim, which then kills the run. */
  int supervised;
  /* Started by a long-lived run supervisor: pidfd is then the read end of the run's report pipe,
   * and `sup` the supervisor until its report came (or it died). */
  int served;
  supervisor *sup;
  int has_usage;
  int64_t user_us, system_us, max_rss_kb;
  napi_ref on_stderr;
  napi_ref on_exit;
  napi_ref on_close;
  napi_async_context async_context;
  napi_async_cleanup_hook_handle cleanup_hook;
} spawn_run;

static void release_run(spawn_run *run) {
  if (run->on_stderr) napi_delete_reference(run->env, run->on_stderr);
  if (run->on_exit) napi_delete_reference(run->env, run->on_exit);
  if (run->on_close) napi_delete_reference(run->env, run->on_close);
  if (run->async_context) napi_async_destroy(run->env, run->async_context);
  if (run->hook_added) napi_remove_async_cleanup_hook(run->cleanup_hook);
  if (run->pidfd >= 0) close(run->pidfd);
  if (run->errfd >= 0) close(run->errfd);
  free(run);
}

/* Calls one of the run's JS callbacks as a top-level callback (microtasks drain afterwards). The
 * caller holds a handle scope. A throwing callback becomes an uncaught exception, as in Node. */
static void call_js(spawn_run *run, napi_ref ref, size_t argc, napi_value *argv) {
  napi_env env = run->env;
  napi_value fn, recv, result;
  if (run->silent) return;
  if (napi_get_reference_value(env, ref, &fn) != napi_ok || fn == NULL || napi_get_global(env, &recv) != napi_ok) return;
  if (napi_make_callback(env, run->async_context, recv, fn, argc, argv, &result) == napi_pending_exception) {
    napi_value error;
    if (napi_get_and_clear_last_exception(env, &error) == napi_ok) napi_fatal_exception(env, error);
  }
}

static void on_handle_closed(uv_handle_t *handle) {
  spawn_run *run = handle->data;
  if (handle == (uv_handle_t *)&run->exit_poll) {
    close(run->pidfd);
    run->pidfd = -1;
  } else if (handle == (uv_handle_t *)&run->err_poll) {
    close(run->errfd);
    run->errfd = -1;
  }
  if (--run->handles_alive > 0) return;
  if (!run->silent) {
    napi_handle_scope scope;
    if (napi_open_handle_scope(run->env, &scope) == napi_ok) {
      call_js(run, run->on_close, 0, NULL);
      napi_close_handle_scope(run->env, scope);
    }
  }
  release_run(run);
}

static void stop_poll(uv_poll_t *poll, int *active) {
  if (!*active) return;
  *active = 0;
  uv_poll_stop(poll);
  uv_close((uv_handle_t *)poll, on_handle_closed);
}

static void stop_drain_timer(spawn_run *run) {
  if (!run->drain_timer_active) return;
  run->drain_timer_active = 0;
  uv_timer_stop(&run->drain_timer);
  uv_close((uv_handle_t *)&run->drain_timer, on_handle_closed);
}

/* The leader is gone but something outside its process group (it called setsid(), like AFL++'s
 * fork server child) still holds stderr open: stop reading, so the run ends. */
static void on_drain_timeout(uv_timer_t *timer) {
  spawn_run *run = timer->data;
  stop_drain_timer(run);
  stop_poll(&run->err_poll, &run->err_poll_active);
}

/* Reaps the exited leader; returns 1 when it was reaped, filling code/signo (-1 = not that kind). */
static int reap(spawn_run *run, int options, int *code, int *signo) {
  siginfo_t info;
  int rc;
  memset(&info, 0, sizeof info);
  do rc = waitid((idtype_t)P_PIDFD, (id_t)run->pidfd, &info, WEXITED | options);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    /* ECHILD: someone else waited for it (nothing in Node does). Report it as exited, status unknown. */
    if (errno == EAGAIN) return 0;
    *code = -1;
    *signo = -1;
    return 1;
  }
  if (info.si_pid == 0) return 0;
  *code = info.si_code == CLD_EXITED ? info.si_status : -1;
  *signo = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED ? info.si_status : -1;
  return 1;
}

static void kill_and_reap(spawn_run *run);
static int read_report(spawn_run *run, int *code, int *signo);

static void on_exit_readable(uv_poll_t *poll, int status, int events) {
  spawn_run *run = poll->data;
  int code = -1, signo = -1;
  (void)events;
  if (run->reaped) return;
  if (run->served) {
    /* The supervisor has killed the group and everything the run left behind, and reaped it. */
    if (read_report(run, &code, &signo)) run->reaped = 1;
    else if (status < 0) {
      kill_and_reap(run);
      code = -1;
      signo = SIGKILL;
    } else {
      return;
    }
  } else
  /* Peek first (WNOWAIT): the leader stays a zombie, so its pgid cannot be recycled under the kill. */
  if (reap(run, WNOHANG | WNOWAIT, &code, &signo)) {
    /* Whatever the leader left in its group (forked helpers, grandchildren) dies with the run. */
    kill(-run->pid, SIGKILL);
    reap(run, 0, &code, &signo);
    run->reaped = 1;
  } else if (status < 0) {
    /* libuv stopped this poll on an error and will not call again: end the run ourselves rather
     * than wait forever. Not expected with a pidfd; the run then reports SIGKILL. */
    kill_and_reap(run);
    code = -1;
    signo = SIGKILL;
  } else {
    return;
  }
  stop_poll(&run->exit_poll, &run->exit_poll_active);
  /* The group is dead; stderr normally hits EOF at once. Wait for it at most drain_ms: a holder
   * that left the group cannot be killed through it and must not hold the run open forever. */
  if (run->err_poll_active && run->drain_ms > 0 && !run->drain_timer_active &&
      uv_timer_init(run->loop, &run->drain_timer) == 0) {
    run->drain_timer.data = run;
    run->handles_alive++;
    run->drain_timer_active = 1;
    uv_timer_start(&run->drain_timer, on_drain_timeout, run->drain_ms, 0);
  }
  if (run->silent) return;
  napi_handle_scope scope;
  napi_value args[3];
  if (napi_open_handle_scope(run->env, &scope) != napi_ok) return;
  if (code >= 0) napi_create_int32(run->env, code, &args[0]);
  else napi_get_null(run->env, &args[0]);
  if (signo >= 0) napi_create_int32(run->env, signo, &args[1]);
  else napi_get_null(run->env, &args[1]);
  if (run->has_usage && napi_create_object(run->env, &args[2]) == napi_ok) {
    napi_value v;
    napi_create_double(run->env, (double)run->user_us, &v);
    napi_set_named_property(run->env, args[2], "userUs", v);
    napi_create_double(run->env, (double)run->system_us, &v);
    napi_set_named_property(run->env, args[2], "systemUs", v);
    napi_create_double(run->env, (double)run->max_rss_kb, &v);
    napi_set_named_property(run->env, args[2], "maxRssKb", v);
  } else {
    napi_get_null(run->env, &args[2]);
  }
  call_js(run, run->on_exit, 3, args);
  napi_close_handle_scope(run->env, scope);
}

static void on_stderr_readable(uv_poll_t *poll, int status, int events) {
  spawn_run *run = poll->data;
  char buffer[STDERR_READ_BYTES];
  ssize_t n;
  (void)events;
  if (status < 0) {
    stop_drain_timer(run);
    stop_poll(&run->err_poll, &run->err_poll_active);
    return;
  }
  do n = read(run->errfd, buffer, sizeof buffer);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {
    /* EOF: every holder of the write end (leader and anything it forked) closed it or died. */
    stop_drain_timer(run);
    stop_poll(&run->err_poll, &run->err_poll_active);
    return;
  }
  if (run->silent) return;
  napi_handle_scope scope;
  napi_value chunk;
  void *data;
  if (napi_open_handle_scope(run->env, &scope) != napi_ok) return;
  if (napi_create_buffer_copy(run->env, (size_t)n, buffer, &data, &chunk) == napi_ok) call_js(run, run->on_stderr, 1, &chunk);
  napi_close_handle_scope(run->env, scope);
}

/* Kills the group and reaps the leader without waiting long: used when nobody will watch it. */
static void kill_and_reap(spawn_run *run) {
  int code, signo;
  if (run->reaped) return;
  if (run->served) {
    /* Closing its socket makes the supervisor kill and reap everything of the run, then exit. */
    if (run->sup) supervisor_destroy(run->sup);
    run->sup = NULL;
    run->reaped = 1;
    return;
  }
  /* A shim SIGKILLed at once could not kill what left the group: ask it first (it kills and reaps
   * everything below it, then exits), and SIGKILL the group only if it has not exited after that. */
  int attempts = run->supervised ? 400 : 200;
  if (run->supervised) kill(run->pid, SIGUSR1);
  else kill(-run->pid, SIGKILL);
  /* A SIGKILLed process is normally gone within microseconds; bound the wait to ~200 ms so a
   * process stuck in uninterruptible sleep cannot hang thread teardown (it stays a zombie then). */
  for (int attempt = 0; attempt < attempts; attempt++) {
    if (reap(run, WNOHANG, &code, &signo)) {
      run->reaped = 1;
      return;
    }
    if (run->supervised && attempt == 199) kill(-run->pid, SIGKILL);
    struct timespec pause = { 0, 1000 * 1000 };
    nanosleep(&pause, NULL);
  }
  run->reaped = 1;
}

static void on_env_teardown(napi_async_cleanup_hook_handle handle, void *arg) {
  spawn_run *run = arg;
  (void)handle;
  run->silent = 1;
  kill_and_reap(run);
  stop_drain_timer(run);
  stop_poll(&run->exit_poll, &run->exit_poll_active);
  stop_poll(&run->err_poll, &run->err_poll_active);
}

/* ---- arguments ---------------------------------------------------------------------------- */

static char *string_value(napi_env env, napi_value value, const char *what) {
  napi_valuetype type;
  size_t length;
  char *text;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_string) {
    char message[128];
    snprintf(message, sizeof message, "%s must be a string", what);
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
    return NULL;
  }
  if (napi_get_value_string_utf8(env, value, NULL, 0, &length) != napi_ok) return NULL;
  text = malloc(length + 1);
  if (!text) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  napi_get_value_string_utf8(env, value, text, length + 1, &length);
  if (strlen(text) != length) {
    char message[128];
    snprintf(message, sizeof message, "%s must not contain null bytes", what);
    free(text);
    napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", message);
    return NULL;
  }
  return text;
}

static void free_strings(char **strings) {
  if (!strings) return;
  for (char **s = strings; *s; s++) free(*s);
  free(strings);
}

/* A JS array of strings as a NULL-terminated C array (freed with free_strings). */
static char **string_array(napi_env env, napi_value value, const char *what, uint32_t *count) {
  bool is_array = false;
  uint32_t length;
  char **strings;
  if (napi_is_array(env, value, &is_array) != napi_ok || !is_array) {
    char message[128];
    snprintf(message, sizeof message, "%s must be an array of strings", what);
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
    return NULL;
  }
  if (napi_get_array_length(env, value, &length) != napi_ok) return NULL;
  strings = calloc((size_t)length + 1, sizeof *strings);
  if (!strings) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  for (uint32_t i = 0; i < length; i++) {
    napi_value element;
    if (napi_get_element(env, value, i, &element) != napi_ok || !(strings[i] = string_value(env, element, what))) {
      free_strings(strings);
      return NULL;
    }
  }
  if (count) *count = length;
  return strings;
}

static int named(napi_env env, napi_value object, const char *name, napi_value *value, napi_valuetype *type) {
  if (napi_get_named_property(env, object, name, value) != napi_ok) return 0;
  return napi_typeof(env, *value, type) == napi_ok;
}

/* ---- program lookup ----------------------------------------------------------------------- */

typedef struct spawn_request {
  char *file;
  char **argv;
  uint32_t argc;
  char **envp;
  posix_spawn_file_actions_t *actions;
  posix_spawnattr_t *attr;
} spawn_request;

/* One posix_spawn of `path`; a file without a valid binary format is retried as a /bin/sh script. */
static int spawn_one(const spawn_request *req, const char *path, pid_t *pid) {
  int err = posix_spawn(pid, path, req->actions, req->attr, req->argv, req->envp);
  if (err != ENOEXEC) return err;
  char **script_argv = calloc((size_t)req->argc + 2, sizeof *script_argv);
  if (!script_argv) return ENOMEM;
  script_argv[0] = "/bin/sh";
  script_argv[1] = (char *)path;
  for (uint32_t i = 1; i < req->argc; i++) script_argv[i + 1] = req->argv[i];
  err = posix_spawn(pid, "/bin/sh", req->actions, req->attr, script_argv, req->envp);
  free(script_argv);
  return err;
}

static const char *search_path(char **envp) {
  for (char **e = envp; *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0) return *e + 5;
  return DEFAULT_SEARCH_PATH;
}

/* execvp's search: a path with '/' is used as is; else each PATH element, EACCES remembered. */
static int spawn_search(const spawn_request *req, pid_t *pid) {
  const char *file = req->file;
  if (*file == '\0') return ENOENT;
  if (strchr(file, '/')) return spawn_one(req, file, pid);
  const char *path = search_path(req->envp);
  size_t file_length = strlen(file);
  int got_eacces = 0, err = ENOENT;
  for (const char *p = path;;) {
    const char *end = strchrnul(p, ':');
    size_t dir_length = (size_t)(end - p);
    char *candidate = malloc(dir_length + file_length + 2);
    if (!candidate) return ENOMEM;
    if (dir_length == 0) {
      /* An empty element means the current directory (the child's cwd), as in execvp. */
      memcpy(candidate, file, file_length + 1);
    } else {
      memcpy(candidate, p, dir_length);
      candidate[dir_length] = '/';
      memcpy(candidate + dir_length + 1, file, file_length + 1);
    }
    err = spawn_one(req, candidate, pid);
    free(candidate);
    switch (err) {
      case 0:
        return 0;
      case EACCES:
        got_eacces = 1;
        break;
      case ENOENT: case ESTALE: case ENOTDIR: case ENODEV: case EHOSTUNREACH: case ETIMEDOUT:
        break;
      default:
        return err;
    }
    if (*end == '\0') break;
    p = end + 1;
  }
  return got_eacces ? EACCES : err;
}

/* A memory file holding `bytes`, positioned at 0 (stdin that is all input, then EOF); -errno on failure. */
int symfence_memfd_holding(const char *bytes, size_t length) {
  int fd = memfd_create("symfence-stdin", MFD_CLOEXEC);
  if (fd < 0) return -errno;
  size_t done = 0;
  while (done < length) {
    ssize_t n = write(fd, bytes + done, length - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      close(fd);
      return -err;
    }
    done += (size_t)n;
  }
  if (lseek(fd, 0, SEEK_SET) != 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

/* The supervisor's report of a served run: 1 when it is over (code/signo/usage set), 0 not yet. */
static int read_report(spawn_run *run, int *code, int *signo) {
  sup_reply reply;
  int rc = supervisor_read_report(run->pidfd, &run->sup, &reply);
  if (rc <= 0) return 0;
  *code = reply.code;
  *signo = reply.signo;
  if (reply.type == SUP_EXITED) {
    run->user_us = reply.user_us;
    run->system_us = reply.system_us;
    run->max_rss_kb = reply.max_rss_kb;
    run->has_usage = 1;
  }
  return 1;
}

/* ---- spawnGroup --------------------------------------------------------------------------- */

static int function_ref(napi_env env, napi_value value, const char *what, napi_ref *ref) {
  napi_valuetype type;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_function) {
    char message[128];
    snprintf(message, sizeof message, "%s must be a function", what);
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
    return 0;
  }
  return napi_create_reference(env, value, 1, ref) == napi_ok;
}

static napi_value spawn_group(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value args[4], value, result = NULL;
  napi_valuetype type;
  spawn_request req = { 0 };
  char *cwd = NULL, *shim = NULL, *served_by = NULL;
  char **shim_argv = NULL;
  int64_t cpu_limit_sec = 0;
  int stdin_fd = -1, owned_stdin_fd = -1, errpipe[2] = { -1, -1 };
  int actions_ready = 0, attr_ready = 0;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  spawn_run *run = NULL;
  uv_loop_t *loop;
  pid_t pid = -1;
  int err;

  if (napi_get_cb_info(env, info, &argc, args, NULL, NULL) != napi_ok) return NULL;
  if (argc < 4 || napi_typeof(env, args[0], &type) != napi_ok || type != napi_object) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "spawnGroup(options, onStderr, onExit, onClose)");
    return NULL;
  }
  if (napi_get_uv_event_loop(env, &loop) != napi_ok) return NULL;

  run = calloc(1, sizeof *run);
  if (!run) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  run->env = env;
  run->loop = loop;
  run->pidfd = -1;
  run->errfd = -1;
  run->silent = 1; /* until the run is fully started */

  if (!function_ref(env, args[1], "onStderr", &run->on_stderr) || !function_ref(env, args[2], "onExit", &run->on_exit) ||
      !function_ref(env, args[3], "onClose", &run->on_close))
    goto fail;
  {
    napi_value resource, name;
    if (napi_create_object(env, &resource) != napi_ok ||
        napi_create_string_utf8(env, "symfence:solver-process", NAPI_AUTO_LENGTH, &name) != napi_ok ||
        napi_async_init(env, resource, name, &run->async_context) != napi_ok)
      goto fail;
  }

  if (!named(env, args[0], "file", &value, &type) || !(req.file = string_value(env, value, "options.file"))) goto fail;
  if (!named(env, args[0], "argv", &value, &type) || !(req.argv = string_array(env, value, "options.argv", &req.argc))) goto fail;
  if (req.argc == 0) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", "options.argv must hold at least argv[0]");
    goto fail;
  }
  if (!named(env, args[0], "env", &value, &type) || !(req.envp = string_array(env, value, "options.env", NULL))) goto fail;
  if (!named(env, args[0], "cwd", &value, &type)) goto fail;
  if (type != napi_undefined && type != napi_null && !(cwd = string_value(env, value, "options.cwd"))) goto fail;
  if (!named(env, args[0], "stdinFd", &value, &type)) goto fail;
  if (type == napi_number) {
    double fd;
    napi_get_value_double(env, value, &fd);
    if (!(fd >= -1 && fd <= INT32_MAX) || fd != (double)(int32_t)fd) {
      napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "options.stdinFd must be -1 or an fd");
      goto fail;
    }
    stdin_fd = (int)fd;
  } else if (type != napi_undefined && type != napi_null) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "options.stdinFd must be a number");
    goto fail;
  }
  if (!named(env, args[0], "stderrDrainMs", &value, &type)) goto fail;
  if (type == napi_number) {
    double ms;
    napi_get_value_double(env, value, &ms);
    if (!(ms >= 0 && ms <= 9007199254740991.0)) {
      napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "options.stderrDrainMs must be a non-negative number");
      goto fail;
    }
    run->drain_ms = (uint64_t)ms;
  } else if (type != napi_undefined && type != napi_null) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "options.stderrDrainMs must be a number");
    goto fail;
  }
  if (!named(env, args[0], "shim", &value, &type)) goto fail;
  if (type != napi_undefined && type != napi_null && !(shim = string_value(env, value, "options.shim"))) goto fail;
  if (!named(env, args[0], "supervisor", &value, &type)) goto fail;
  if (type != napi_undefined && type != napi_null && !(served_by = string_value(env, value, "options.supervisor"))) goto fail;
  if (!named(env, args[0], "cpuLimitSec", &value, &type)) goto fail;
  if (type == napi_number) {
    double seconds;
    napi_get_value_double(env, value, &seconds);
    if (!(seconds >= 0 && seconds <= 1e9) || seconds != (double)(int64_t)seconds) {
      napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "options.cpuLimitSec must be a non-negative integer");
      goto fail;
    }
    cpu_limit_sec = (int64_t)seconds;
  } else if (type != napi_undefined && type != napi_null) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "options.cpuLimitSec must be a number");
    goto fail;
  }
  if (!named(env, args[0], "stdinBytes", &value, &type)) goto fail;
  if (type != napi_undefined && type != napi_null) {
    bool is_typed = false;
    napi_typedarray_type array_type;
    size_t length;
    void *data;
    if (napi_is_typedarray(env, value, &is_typed) != napi_ok || !is_typed ||
        napi_get_typedarray_info(env, value, &array_type, &length, &data, NULL, NULL) != napi_ok || array_type != napi_uint8_array) {
      napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "options.stdinBytes must be a Uint8Array");
      goto fail;
    }
    owned_stdin_fd = symfence_memfd_holding(data, length);
    if (owned_stdin_fd < 0) {
      symfence_throw_errno(env, "memfd_create", -owned_stdin_fd);
      goto fail;
    }
    stdin_fd = owned_stdin_fd;
  }

  /* O_CLOEXEC on both ends: no other child (spawned concurrently by another thread) keeps them. */
  if (pipe2(errpipe, O_CLOEXEC) != 0) {
    symfence_throw_errno(env, "pipe2", errno);
    goto fail;
  }
  /* Only our end is non-blocking (pipe2's O_NONBLOCK would also make the solver's writes fail). */
  if (fcntl(errpipe[0], F_SETFL, O_NONBLOCK) != 0) {
    symfence_throw_errno(env, "fcntl", errno);
    goto fail;
  }

  if ((err = posix_spawn_file_actions_init(&actions)) != 0) goto fail_errno_spawn;
  actions_ready = 1;
  if ((err = posix_spawnattr_init(&attr)) != 0) goto fail_errno_spawn;
  attr_ready = 1;
  err = stdin_fd >= 0 ? posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0)
                      : posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (!err) err = posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_RDWR, 0);
  if (!err) err = posix_spawn_file_actions_adddup2(&actions, errpipe[1], 2);
  if (!err && cwd) err = posix_spawn_file_actions_addchdir_np(&actions, cwd);
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34)
  /* Our fds are O_CLOEXEC already; this also closes any a library opened without it. */
  if (!err) err = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
  if (err) goto fail_errno_spawn;
  err = spawn_attr_clean_session(&attr);
  if (err) goto fail_errno_spawn;
  req.actions = &actions;
  req.attr = &attr;

  if (served_by) {
    err = supervisor_spawn(env, served_by, req.file, cwd, req.argv, req.argc, req.envp, stdin_fd, errpipe[1], cpu_limit_sec, &pid,
                           &run->sup, &run->pidfd);
    run->served = 1;
    run->supervised = 1;
  } else if (shim) {
    /* shim <spawner-pid> <cpu-seconds> <program-path> <argv0> [args...] */
    char pid_text[24], cpu_text[24];
    snprintf(pid_text, sizeof pid_text, "%ld", (long)getpid());
    snprintf(cpu_text, sizeof cpu_text, "%lld", (long long)cpu_limit_sec);
    shim_argv = calloc((size_t)req.argc + 5, sizeof *shim_argv);
    if (!shim_argv) {
      err = ENOMEM;
      goto fail_errno_spawn;
    }
    shim_argv[0] = strdup(shim);
    shim_argv[1] = strdup(pid_text);
    shim_argv[2] = strdup(cpu_text);
    shim_argv[3] = strdup(req.file);
    for (uint32_t i = 0; i < req.argc; i++) shim_argv[i + 4] = strdup(req.argv[i]);
    for (uint32_t i = 0; i < req.argc + 4; i++) {
      if (!shim_argv[i]) {
        err = ENOMEM;
        goto fail_errno_spawn;
      }
    }
    err = posix_spawn(&pid, shim, req.actions, req.attr, shim_argv, req.envp);
    run->supervised = 1;
  } else {
    err = spawn_search(&req, &pid);
  }
  if (err) goto fail_errno_spawn;

  close(errpipe[1]);
  errpipe[1] = -1;
  run->pid = pid;
  run->errfd = errpipe[0];
  errpipe[0] = -1;
  /* The child is not reaped by anyone else, so its pid stays valid for pidfd_open even if it exited.
   * A served run already has its report pipe there. */
  if (!run->served) run->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (run->pidfd < 0) {
    err = errno;
    kill(-pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    run->reaped = 1;
    symfence_throw_errno(env, "pidfd_open", err);
    goto fail;
  }
  run->exit_poll.data = run;
  run->err_poll.data = run;
  if ((err = uv_poll_init(loop, &run->exit_poll, run->pidfd)) != 0) goto fail_uv;
  run->handles_alive++;
  run->exit_poll_active = 1;
  if ((err = uv_poll_init(loop, &run->err_poll, run->errfd)) != 0) goto fail_uv;
  run->handles_alive++;
  run->err_poll_active = 1;
  if ((err = uv_poll_start(&run->exit_poll, UV_READABLE, on_exit_readable)) != 0) goto fail_uv;
  if ((err = uv_poll_start(&run->err_poll, UV_READABLE, on_stderr_readable)) != 0) goto fail_uv;
  if (napi_add_async_cleanup_hook(env, on_env_teardown, run, &run->cleanup_hook) != napi_ok) {
    err = -ENOMEM;
    goto fail_uv;
  }
  run->hook_added = 1;
  run->silent = 0;
  napi_create_int32(env, pid, &result);
  goto done;

fail_uv:
  /* Started but not watchable: kill it now, then let the close callbacks free the run. */
  kill_and_reap(run);
  symfence_throw_errno(env, "uv_poll_init", -err);
  if (run->handles_alive > 0) {
    stop_poll(&run->exit_poll, &run->exit_poll_active);
    stop_poll(&run->err_poll, &run->err_poll_active);
    run = NULL; /* freed by the last close callback */
  }
  goto fail;
fail_errno_spawn:
  symfence_throw_errno(env, "spawn", err);
fail:
  if (run) release_run(run);
done:
  if (actions_ready) posix_spawn_file_actions_destroy(&actions);
  if (attr_ready) posix_spawnattr_destroy(&attr);
  if (errpipe[0] >= 0) close(errpipe[0]);
  if (errpipe[1] >= 0) close(errpipe[1]);
  if (owned_stdin_fd >= 0) close(owned_stdin_fd);
  free(req.file);
  free_strings(req.argv);
  free_strings(req.envp);
  free(cwd);
  free(shim);
  free(served_by);
  free_strings(shim_argv);
  return result;
}

int symfence_spawn_init(napi_env env, napi_value exports) {
  napi_value fn, reason;
  int probe = (int)syscall(SYS_pidfd_open, getpid(), 0);
  if (probe < 0) {
    /* Kernel before 5.3, or a seccomp filter: say why, and let JS fall back to child_process. */
    char message[96];
    snprintf(message, sizeof message, "pidfd_open is not available: %s (%s)", strerror(errno), symfence_errno_name(errno));
    if (napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &reason) != napi_ok) return 0;
    return napi_set_named_property(env, exports, "spawnUnsupported", reason) == napi_ok;
  }
  {
    /* waitid(P_PIDFD) came one kernel after pidfd_open (5.4): on our own pidfd a supporting
     * kernel answers ECHILD (not our child), an older one EINVAL. */
    siginfo_t info;
    int rc = waitid((idtype_t)P_PIDFD, (id_t)probe, &info, WEXITED | WNOHANG);
    int err = errno;
    close(probe);
    if (rc != 0 && err == EINVAL) {
      if (napi_create_string_utf8(env, "waitid(P_PIDFD) is not available (Linux >= 5.4 needed)", NAPI_AUTO_LENGTH, &reason) != napi_ok) return 0;
      return napi_set_named_property(env, exports, "spawnUnsupported", reason) == napi_ok;
    }
  }
  if (napi_create_function(env, "spawnGroup", NAPI_AUTO_LENGTH, spawn_group, NULL, &fn) != napi_ok) return 0;
  if (napi_set_named_property(env, exports, "spawnGroup", fn) != napi_ok) return 0;
  return supervisor_export(env, exports);
}

#else

int symfence_spawn_init(napi_env env, napi_value exports) {
  napi_value reason;
  if (napi_create_string_utf8(env, "the addon was built without posix_spawn support (needs glibc >= 2.29 and pidfd_open)",
                              NAPI_AUTO_LENGTH, &reason) != napi_ok)
    return 0;
  return napi_set_named_property(env, exports, "spawnUnsupported", reason) == napi_ok;
}

#endif
