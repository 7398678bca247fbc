/*
 * The addon's side of the run supervisors (`symfence_spawn_shim --serve`, spawn_shim.c): start
 * them, hand them runs, read their reports. docs/native.md, *Run supervisor*.
 *
 * Each env (thread) owns its supervisors (napi instance data): a supervisor's parent-death signal
 * follows the thread that started it. One run per supervisor at a time; a new one is started
 * when every one of the thread's is busy, and up to SUPERVISORS_IDLE_MAX idle ones are kept.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run_supervisor.h"

#if SYMFENCE_HAVE_SPAWN


/* One long-lived supervisor process, one run at a time. Owned by the env (thread) that started it:
 * its parent-death signal follows that thread. */
struct supervisor {
  pid_t pid;
  int sock;
  int busy;
  pid_t run_pid;
  struct supervisor_registry *registry;
  struct supervisor *next;
};

struct supervisor_registry {
  supervisor *all;
};

/* Idle supervisors kept per thread beyond this are closed when their run ends. */
#define SUPERVISORS_IDLE_MAX 8

static void unlink_supervisor(supervisor *sup) {
  if (!sup->registry) return;
  for (supervisor **p = &sup->registry->all; *p; p = &(*p)->next) {
    if (*p == sup) {
      *p = sup->next;
      break;
    }
  }
  sup->registry = NULL;
}

/* Closes the socket (the supervisor then kills whatever it runs and exits) and reaps it, waiting
 * about 200 ms before a SIGKILL (its program dies with it then: parent-death signal), then ~200 ms more. */
void supervisor_destroy(supervisor *sup) {
  unlink_supervisor(sup);
  if (sup->sock >= 0) close(sup->sock);
  sup->sock = -1;
  /* Our own child, unreaped until here: its pid cannot have been reused under these calls. */
  for (int attempt = 0; attempt < 400; attempt++) {
    pid_t rc = waitpid(sup->pid, NULL, WNOHANG);
    if (rc < 0 && errno == EINTR) continue;
    if (rc != 0) break;
    if (attempt == 199) kill(sup->pid, SIGKILL);
    struct timespec pause = { 0, 1000 * 1000 };
    nanosleep(&pause, NULL);
  }
  free(sup);
}

static void finalize_registry(napi_env env, void *data, void *hint) {
  supervisor_registry *registry = data;
  (void)env;
  (void)hint;
  while (registry->all) {
    supervisor *sup = registry->all;
    if (sup->busy) {
      /* Its run's own teardown ends it. */
      registry->all = sup->next;
      sup->registry = NULL;
    } else {
      supervisor_destroy(sup);
    }
  }
  free(registry);
}

static supervisor_registry *registry_of(napi_env env) {
  void *data = NULL;
  if (napi_get_instance_data(env, &data) != napi_ok) return NULL;
  if (data) return data;
  supervisor_registry *registry = calloc(1, sizeof *registry);
  if (!registry) return NULL;
  if (napi_set_instance_data(env, registry, finalize_registry, NULL) != napi_ok) {
    free(registry);
    return NULL;
  }
  return registry;
}

/* Starts `<path> --serve <our pid>` in a new session with its end of a socketpair as fd 3. */
static int start_supervisor(supervisor_registry *registry, const char *path, supervisor **out) {
  int sv[2], err = 0, fd3 = -1;
  pid_t pid;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return errno;
  /* Above 3, so dup2(fd3, 3) always makes a fresh fd without close-on-exec. */
  fd3 = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
  close(sv[1]);
  if (fd3 < 0) {
    err = errno;
    close(sv[0]);
    return err;
  }
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  err = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (!err) err = posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_RDWR, 0);
  if (!err) err = posix_spawn_file_actions_adddup2(&actions, fd3, SUPERVISOR_FD);
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34)
  if (!err) err = posix_spawn_file_actions_addclosefrom_np(&actions, SUPERVISOR_FD + 1);
#endif
  if (!err) err = spawn_attr_clean_session(&attr);
  if (!err) {
    char pid_text[24];
    char *argv[] = { (char *)path, "--serve", pid_text, NULL };
    char *envp[] = { NULL };
    snprintf(pid_text, sizeof pid_text, "%ld", (long)getpid());
    err = posix_spawn(&pid, path, &actions, &attr, argv, envp);
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fd3);
  if (err) {
    close(sv[0]);
    return err;
  }
  supervisor *sup = calloc(1, sizeof *sup);
  if (!sup) {
    close(sv[0]);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return ENOMEM;
  }
  sup->pid = pid;
  sup->sock = sv[0];
  sup->registry = registry;
  sup->next = registry->all;
  registry->all = sup;
  *out = sup;
  return 0;
}

/* Back from a run: keep it for the next one, unless enough are idle already. */
static void release_supervisor(supervisor *sup) {
  sup->busy = 0;
  sup->run_pid = 0;
  int idle = 0;
  if (sup->registry)
    for (supervisor *s = sup->registry->all; s; s = s->next) idle += !s->busy;
  if (!sup->registry || idle > SUPERVISORS_IDLE_MAX) supervisor_destroy(sup);
}

/* The payload of a SPAWN request (supervisor_protocol.h); malloc'd, length in *bytes. */
static char *spawn_payload(const char *file, const char *cwd, char **argv, char **envp, uint32_t *envc, size_t *bytes) {
  size_t total = strlen(file) + 1 + (cwd ? strlen(cwd) : 0) + 1;
  uint32_t count = 0;
  for (char **a = argv; *a; a++) total += strlen(*a) + 1;
  for (char **e = envp; *e; e++, count++) total += strlen(*e) + 1;
  char *payload = malloc(total ? total : 1), *p = payload;
  if (!payload) return NULL;
#define PUT(s) do { size_t n_ = strlen(s) + 1; memcpy(p, (s), n_); p += n_; } while (0)
  PUT(file);
  PUT(cwd ? cwd : "");
  for (char **a = argv; *a; a++) PUT(*a);
  for (char **e = envp; *e; e++) PUT(*e);
#undef PUT
  *envc = count;
  *bytes = total;
  return payload;
}

/* Sends one SPAWN and waits for its reply. Returns 0 (pid set), the program's start errno, or
 * -errno when talking to the supervisor failed (then it is unusable). */
static int request_spawn(supervisor *sup, const sup_request *req, const char *payload, size_t bytes, int payload_fd,
                         int stdin_fd, int stderr_fd, int report_fd, pid_t *pid) {
  int fds[4], nfds = 0;
  if (payload_fd >= 0) fds[nfds++] = payload_fd;
  if (stdin_fd >= 0) fds[nfds++] = stdin_fd;
  fds[nfds++] = stderr_fd;
  fds[nfds++] = report_fd;
  union {
    char buffer[CMSG_SPACE(sizeof fds)];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct iovec iov[2] = { { (void *)req, sizeof *req }, { (void *)payload, payload_fd >= 0 ? 0 : bytes } };
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  msg.msg_control = control.buffer;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
  memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
  ssize_t n;
  do n = sendmsg(sup->sock, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  sup_reply reply;
  do n = recv(sup->sock, &reply, sizeof reply, 0);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof reply) return n < 0 ? -errno : -EPIPE;
  if (reply.type == SUP_STARTED) {
    *pid = reply.pid;
    return 0;
  }
  return reply.err > 0 ? reply.err : EPROTO;
}

/* See run_supervisor.h. */
int supervisor_spawn(napi_env env, const char *path, const char *file, const char *cwd, char **argv, uint32_t argc, char **envp,
                     int stdin_fd, int stderr_fd, int64_t cpu_seconds, pid_t *pid, supervisor **sup_out, int *report_fd) {
  supervisor_registry *registry = registry_of(env);
  if (!registry) return ENOMEM;
  uint32_t envc = 0;
  size_t bytes = 0;
  char *payload = spawn_payload(file, cwd, argv, envp, &envc, &bytes);
  if (!payload) return ENOMEM;
  int payload_fd = -1, report[2] = { -1, -1 }, err = 0;
  if (bytes > SUPERVISOR_INLINE_MAX) {
    payload_fd = symfence_memfd_holding(payload, bytes);
    if (payload_fd < 0) {
      free(payload);
      return -payload_fd;
    }
  }
  sup_request request;
  memset(&request, 0, sizeof request);
  request.type = SUP_SPAWN;
  request.flags = (stdin_fd >= 0 ? SUP_HAS_STDIN : 0) | (payload_fd >= 0 ? SUP_PAYLOAD_IN_MEMFD : 0);
  request.argc = argc;
  request.envc = envc;
  request.cpu_seconds = cpu_seconds;
  request.payload_bytes = bytes;
  if (pipe2(report, O_CLOEXEC) != 0) {
    err = errno;
    goto done;
  }
  if (fcntl(report[0], F_SETFL, O_NONBLOCK) != 0) {
    err = errno;
    goto done;
  }
  /* An idle supervisor may have died since its last run (killed from outside): then one fresh try. */
  for (int attempt = 0; attempt < 2; attempt++) {
    supervisor *sup = NULL;
    for (supervisor *s = registry->all; s; s = s->next)
      if (!s->busy) {
        sup = s;
        break;
      }
    if (!sup && (err = start_supervisor(registry, path, &sup)) != 0) goto done;
    sup->busy = 1;
    int rc = request_spawn(sup, &request, payload, bytes, payload_fd, stdin_fd, stderr_fd, report[1], pid);
    if (rc == 0) {
      sup->run_pid = *pid;
      *sup_out = sup;
      *report_fd = report[0];
      report[0] = -1;
      err = 0;
      goto done;
    }
    if (rc > 0) {
      release_supervisor(sup);
      err = rc;
      goto done;
    }
    supervisor_destroy(sup);
    err = -rc;
  }
done:
  if (report[0] >= 0) close(report[0]);
  if (report[1] >= 0) close(report[1]);
  if (payload_fd >= 0) close(payload_fd);
  free(payload);
  return err;
}

/* See run_supervisor.h. */
int supervisor_read_report(int report_fd, supervisor **sup, sup_reply *reply) {
  ssize_t n;
  do n = read(report_fd, reply, sizeof *reply);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  supervisor *owner = *sup;
  *sup = NULL;
  if (n == (ssize_t)sizeof *reply && reply->type == SUP_EXITED) {
    if (owner) release_supervisor(owner);
    return 1;
  }
  /* EOF without a report: the supervisor died, and its run with it (parent-death signal). */
  memset(reply, 0, sizeof *reply);
  reply->code = -1;
  reply->signo = SIGKILL;
  if (owner) supervisor_destroy(owner);
  return 1;
}

/* signalSupervised(pid, signo) -> boolean: signal the process group of a supervised run of this
 * thread through its supervisor (which has not reaped it, so the group cannot be a stranger's). */
static napi_value signal_supervised(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value args[2], result;
  int32_t pid = 0, signo = 0;
  int sent = 0;
  if (napi_get_cb_info(env, info, &argc, args, NULL, NULL) != napi_ok) return NULL;
  if (argc < 2 || napi_get_value_int32(env, args[0], &pid) != napi_ok || napi_get_value_int32(env, args[1], &signo) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "signalSupervised(pid, signo) takes two numbers");
    return NULL;
  }
  void *data = NULL;
  napi_get_instance_data(env, &data);
  supervisor_registry *registry = data;
  for (supervisor *s = registry ? registry->all : NULL; s && pid > 0 && signo > 0; s = s->next) {
    if (!s->busy || s->run_pid != pid) continue;
    sup_request request;
    memset(&request, 0, sizeof request);
    request.type = SUP_SIGNAL;
    request.signo = signo;
    ssize_t n;
    do n = send(s->sock, &request, sizeof request, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    sent = n == (ssize_t)sizeof request;
    break;
  }
  napi_get_boolean(env, sent, &result);
  return result;
}

int supervisor_export(napi_env env, napi_value exports) {
  napi_value fn;
  if (napi_create_function(env, "signalSupervised", NAPI_AUTO_LENGTH, signal_supervised, NULL, &fn) != napi_ok) return 0;
  return napi_set_named_property(env, exports, "signalSupervised", fn) == napi_ok;
}

#else

int supervisor_export(napi_env env, napi_value exports) {
  (void)env;
  (void)exports;
  return 1;
}

#endif

int spawn_attr_clean_session(posix_spawnattr_t *attr) {
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  int err = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  if (!err) err = posix_spawnattr_setsigmask(attr, &none);
  if (!err) err = posix_spawnattr_setsigdefault(attr, &all);
  return err;
}
