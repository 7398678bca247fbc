/*
 * symfence_spawn_shim: the supervisor of one solver (or afl-showmap) run. docs/native.md, *Spawn shim*.
 *
 *   symfence_spawn_shim <spawner-pid> <cpu-seconds> <program-path> <argv0> [args...]
 *
 * Why: posix_spawn cannot run code in the child, and two guarantees need code there:
 *   - nothing of the run may outlive its coordinator: a SIGKILLed coordinator runs no timer and no
 *     cleanup, so the run has to notice by itself (PR_SET_PDEATHSIG) and kill everything it started;
 *   - nothing may outlive the run either, including processes that left the process group with
 *     setsid(): only an ancestor can still find them, because orphans re-parent to the nearest
 *     subreaper (PR_SET_CHILD_SUBREAPER). The shim is that subreaper — one per run, so it may
 *     wait(-1) freely, unlike the Node process, whose children belong to libuv.
 *
 * Process layout: the spawner starts the shim in a new session (pid = sid = pgid S). The shim
 * forks the program into its own process group P (so the shim can SIGKILL the whole group without
 * killing itself), with PR_SET_PDEATHSIG = SIGKILL (the program dies if the shim is SIGKILLed) and
 * RLIMIT_CPU = <cpu-seconds> soft, +1 hard (a CPU-spinning program dies even if every supervisor
 * is gone), then execs <program-path> (an ENOEXEC file runs under /bin/sh, as execvp does). The
 * program gets the shim's environment, fds, an empty signal mask and default dispositions.
 *
 * Signals the shim acts on:
 *   SIGTERM, SIGINT   forwarded to the program's group -P (the polite stop of a timeout/cancel);
 *   SIGUSR1           "kill the run now": sent by the spawner instead of SIGKILL, and the
 *                     parent-death signal (the spawning thread exited: coordinator gone).
 * When the program exits, or on SIGUSR1, the shim SIGKILLs group P and then every process left
 * below it (its own children, which every orphan of the run becomes), reaps them all, and exits
 * the way the program did (same exit code, or the same signal re-raised without a core dump).
 * Nothing else is done: no output of its own unless a start fails (exit 127 with one line on stderr).
 *
 *   symfence_spawn_shim --serve <spawner-pid>
 *
 * The same supervision for run after run, without a process per run (docs/native.md, *Run
 * supervisor*): a long-lived supervisor on the SOCK_SEQPACKET socket at fd 3 (protocol in
 * supervisor_protocol.h), one run at a time, so every orphan that re-parents to it is its one
 * live run's. Each SPAWN vforks the program with the child set-up above, and with the fds it was
 * passed; when the program exits (or a SIGNAL SIGKILL ends it) the group and every process below
 * the supervisor are killed and reaped before EXITED (status, rusage) goes on the run's report
 * pipe. The parent-death signal (SIGUSR1), SIGTERM/SIGINT/SIGHUP and EOF on the socket all mean
 * "kill the run and exit".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "supervisor_protocol.h"

#define SHIM_FAILED 127

extern char **environ;

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "symfence_spawn_shim: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
}

static long parse_long(const char *text) {
  char *end = NULL;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return -1;
  return value;
}

/* RLIMIT_CPU of `cpu_seconds` (soft) and one more (hard); 0 leaves the limit alone. */
static void limit_cpu(long cpu_seconds) {
  struct rlimit limit;
  if (cpu_seconds <= 0 || getrlimit(RLIMIT_CPU, &limit) != 0) return;
  rlim_t soft = (rlim_t)cpu_seconds, hard = (rlim_t)cpu_seconds + 1;
  /* An unprivileged process cannot raise its hard limit: stay within an existing one. */
  if (limit.rlim_max != RLIM_INFINITY && hard > limit.rlim_max) hard = limit.rlim_max;
  if (soft > hard) soft = hard;
  limit.rlim_cur = soft;
  limit.rlim_max = hard;
  setrlimit(RLIMIT_CPU, &limit);
}

/* The argv of `program` run as a shell script (execvp's rule for an ENOEXEC file): /bin/sh,
 * program, argv[1..]. Built before the fork, so a vfork child never allocates. NULL on ENOMEM. */
static char **script_argv(const char *program, char **argv) {
  int argc = 0;
  while (argv[argc]) argc++;
  char **script = calloc((size_t)argc + 2, sizeof *script);
  if (!script) return NULL;
  script[0] = "/bin/sh";
  script[1] = (char *)program;
  for (int i = 1; i < argc; i++) script[i + 1] = argv[i];
  return script;
}

/* Default signal state, then exec `program`; by execvp's rule a file without a valid binary
 * format runs as a shell script (`script`, from script_argv; none when NULL). Returns only on
 * failure: the program's own execve errno (errno itself is then the last attempt's). Allocates
 * nothing: safe in a vfork child. */
static int exec_or_script(const char *program, char **argv, char **script, char **envp) {
  sigset_t none;
  signal(SIGPIPE, SIG_DFL);
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execve(program, argv, envp);
  int first = errno;
  if (first == ENOEXEC && script) execve("/bin/sh", script, envp);
  return first;
}

/* In the forked child: limits, signal state, exec. Never returns. */
static void exec_program(pid_t shim, long cpu_seconds, const char *program, char **argv) {
  if (setpgid(0, 0) != 0) {
    fail("setpgid", strerror(errno));
    _exit(SHIM_FAILED);
  }
  /* If the shim is SIGKILLed (by anyone), the program goes with it. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != shim) _exit(SHIM_FAILED);
  limit_cpu(cpu_seconds);
  exec_or_script(program, argv, script_argv(program, argv), environ);
  fail(program, strerror(errno));
  _exit(SHIM_FAILED);
}

/* SIGKILLs every child of this process. Returns how many were signalled. */
static int kill_children(void) {
  char path[64];
  int killed = 0;
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
  FILE *file = fopen(path, "r");
  if (file) {
    long pid;
    while (fscanf(file, "%ld", &pid) == 1) {
      if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0) killed++;
    }
    fclose(file);
    return killed;
  }
  /* Kernel without CONFIG_PROC_CHILDREN: scan every process's parent. */
  DIR *proc = opendir("/proc");
  if (!proc) return 0;
  pid_t self = getpid();
  struct dirent *entry;
  while ((entry = readdir(proc)) != NULL) {
    long pid = parse_long(entry->d_name);
    if (pid <= 0) continue;
    char stat_path[64], line[512];
    snprintf(stat_path, sizeof stat_path, "/proc/%ld/stat", pid);
    FILE *stat = fopen(stat_path, "r");
    if (!stat) continue;
    size_t n = fread(line, 1, sizeof line - 1, stat);
    fclose(stat);
    line[n] = '\0';
    /* pid (comm) state ppid ...: comm may contain anything, so parse after the last ')'. */
    char *close_paren = strrchr(line, ')');
    char state;
    long ppid;
    if (close_paren && sscanf(close_paren + 1, " %c %ld", &state, &ppid) == 2 && ppid == self) {
      if (kill((pid_t)pid, SIGKILL) == 0) killed++;
    }
  }
  closedir(proc);
  return killed;
}

/*
 * Kills the program's group and everything below the shim, and reaps it all. Terminates: every
 * round SIGKILLs all current children; a killed process's own children re-parent to us (we are
 * the subreaper) before its zombie is reported, so they are in the next round's list.
 */
static void kill_everything(pid_t group, pid_t program, int *status, int *program_reaped, struct rusage *usage) {
  if (group > 0) kill(-group, SIGKILL);
  for (;;) {
    int st;
    struct rusage ru;
    kill_children();
    pid_t pid = wait4(-1, &st, WNOHANG, &ru);
    if (pid > 0) {
      if (pid == program && !*program_reaped) {
        *status = st;
        *program_reaped = 1;
        if (usage) *usage = ru;
      }
      continue;
    }
    if (pid == 0) {
      /* Signalled, not dead yet (a process in the kernel finishes its syscall first). */
      struct timespec pause = { 0, 1000 * 1000 };
      nanosleep(&pause, NULL);
      continue;
    }
    if (errno == EINTR) continue;
    break; /* ECHILD: nothing left */
  }
}

/* Ends the shim the way the program ended. */
static void exit_like(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    struct rlimit no_core = { 0, 0 };
    sigset_t only;
    setrlimit(RLIMIT_CORE, &no_core);
    signal(sig, SIG_DFL);
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    kill(getpid(), sig);
    _exit(128 + sig);
  }
  _exit(SHIM_FAILED);
}

/* ---- --serve: one long-lived supervisor, one run at a time (docs/native.md, *Run supervisor*) ---- */

/* In the forked child of the supervisor: session, fds, limits, signal state, exec. Reports a
 * failure as its errno on `report_fd` (close-on-exec: a successful exec closes it silently). */
/* Runs in a vfork child (start_run): noinline, so every value it stores lives in its own frame,
 * below the suspended parent's, never in a stack slot the parent reads after vfork returns. */
__attribute__((noinline, noreturn)) static void exec_served(pid_t supervisor, int report_fd, int stdin_fd, int devnull, int stderr_fd, const char *cwd,
                                                            long cpu_seconds, const char *program, char **argv, char **script, char **envp) {
  int err = 0;
  /* Its own group (pgid = pid) in the supervisor's session: the group is what SIGTERM and the
   * final SIGKILL reach, without reaching the supervisor. */
  if (setpgid(0, 0) != 0) goto failed;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != supervisor) _exit(SHIM_FAILED);
  if (dup2(stdin_fd >= 0 ? stdin_fd : devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(stderr_fd, 2) < 0) goto failed;
  if (cwd[0] != '\0' && chdir(cwd) != 0) goto failed;
  limit_cpu(cpu_seconds);
  /* The program's own exec error is the one reported, also when the shell fallback failed too. */
  errno = exec_or_script(program, argv, script, envp);
failed:
  err = errno;
  while (write(report_fd, &err, sizeof err) < 0 && errno == EINTR) {
  }
  _exit(SHIM_FAILED);
}

static int send_reply(int sock, const sup_reply *reply) {
  ssize_t n;
  do n = send(sock, reply, sizeof *reply, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t)sizeof *reply ? 0 : -1;
}

static void write_report(int fd, const sup_reply *reply) {
  ssize_t n;
  /* One record smaller than PIPE_BUF: written whole or not at all (a reader that went away). */
  do n = write(fd, reply, sizeof *reply);
  while (n < 0 && errno == EINTR);
}

/* Splits `count` NUL-terminated strings off `*cursor` (bounded by `end`) into a NULL-terminated array. */
static char **take_strings(char **cursor, const char *end, uint32_t count) {
  char **strings = calloc((size_t)count + 1, sizeof *strings);
  if (!strings) return NULL;
  for (uint32_t i = 0; i < count; i++) {
    char *s = *cursor;
    char *nul = memchr(s, '\0', (size_t)(end - s));
    if (!nul) {
      free(strings);
      return NULL;
    }
    strings[i] = s;
    *cursor = nul + 1;
  }
  return strings;
}

typedef struct served_run {
  pid_t pid; /* 0: no run */
  int report_fd;
} served_run;

/* The program exited (or must die now): kill its group and everything below us, reap it all, report. */
static void end_run(served_run *run) {
  int status = 0, reaped = 0;
  struct rusage usage;
  memset(&usage, 0, sizeof usage);
  kill_everything(run->pid, run->pid, &status, &reaped, &usage);
  sup_reply reply;
  memset(&reply, 0, sizeof reply);
  reply.type = SUP_EXITED;
  reply.pid = run->pid;
  reply.code = reaped && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  reply.signo = !reaped ? SIGKILL : WIFSIGNALED(status) ? WTERMSIG(status) : -1;
  reply.user_us = (int64_t)usage.ru_utime.tv_sec * 1000000 + usage.ru_utime.tv_usec;
  reply.system_us = (int64_t)usage.ru_stime.tv_sec * 1000000 + usage.ru_stime.tv_usec;
  reply.max_rss_kb = usage.ru_maxrss;
  write_report(run->report_fd, &reply);
  close(run->report_fd);
  run->pid = 0;
  run->report_fd = -1;
}

/* Reaps what exited; ends the run when its program did. Orphans of the run are reaped as they exit. */
static void reap_exited(served_run *run) {
  for (;;) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return; /* ECHILD */
    }
    if (info.si_pid == 0) return;
    if (run->pid != 0 && info.si_pid == run->pid) {
      /* Still a zombie: its pgid cannot be reused before end_run's kill(-pid) reaches the group. */
      end_run(run);
      continue;
    }
    while (waitpid(info.si_pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
}

static void close_fds(const int *fds, int count) {
  for (int i = 0; i < count; i++)
    if (fds[i] >= 0) close(fds[i]);
}

/* One SPAWN request: vfork and exec the program, reply STARTED or FAILED. */
static void start_run(int sock, served_run *run, const sup_request *req, char *inline_payload, size_t inline_bytes,
                      int *fds, int nfds, int devnull) {
  sup_reply reply;
  memset(&reply, 0, sizeof reply);
  reply.type = SUP_FAILED;
  char *payload = NULL, *owned = NULL;
  size_t payload_bytes = 0;
  int next = 0, stdin_fd = -1, stderr_fd, report_fd;
  int want = 2 + ((req->flags & SUP_HAS_STDIN) ? 1 : 0) + ((req->flags & SUP_PAYLOAD_IN_MEMFD) ? 1 : 0);
  char **argv = NULL, **envp = NULL, **script = NULL;
  if (nfds != want || run->pid != 0) {
    reply.err = run->pid != 0 ? EBUSY : EPROTO;
    goto done;
  }
  if (req->flags & SUP_PAYLOAD_IN_MEMFD) {
    int memfd = fds[next++];
    owned = malloc(req->payload_bytes + 1);
    if (!owned) {
      reply.err = ENOMEM;
      goto done;
    }
    size_t got = 0;
    while (got < req->payload_bytes) {
      ssize_t n = pread(memfd, owned + got, req->payload_bytes - got, (off_t)got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        reply.err = n < 0 ? errno : EPROTO;
        goto done;
      }
      got += (size_t)n;
    }
    payload = owned;
    payload_bytes = got;
  } else {
    payload = inline_payload;
    payload_bytes = inline_bytes;
  }
  if (req->flags & SUP_HAS_STDIN) stdin_fd = fds[next++];
  stderr_fd = fds[next++];
  report_fd = fds[next++];
  {
    char *cursor = payload, *end = payload + payload_bytes;
    char **head = take_strings(&cursor, end, 2);
    if (!head) {
      reply.err = EPROTO;
      goto done;
    }
    const char *file = head[0], *cwd = head[1];
    free(head);
    argv = take_strings(&cursor, end, req->argc);
    envp = argv ? take_strings(&cursor, end, req->envc) : NULL;
    if (!argv || !envp || req->argc == 0) {
      reply.err = argv && envp ? EINVAL : EPROTO;
      goto done;
    }
    script = script_argv(file, argv);
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
      reply.err = errno;
      goto done;
    }
    pid_t self = getpid();
    /*
     * vfork: the child borrows this process's memory and this process waits until the child has
     * exec'd (or exited), so the launch costs no page-table copy, no copy-on-write faults and no
     * wait for the scheduler to pick the child up while the parent still runs: on a 2-vCPU VM
     * next to AFL++, fork-to-exec took 5-7 ms at the median and vfork 1.5-1.7 ms
     * (docs/native.md, *Run supervisor*). It is safe here: the supervisor has one thread and
     * installs no signal handler (it reads signals through a signalfd); the child (exec_served, in
     * a frame of its own) calls only async-signal-safe libc wrappers, allocates nothing (the
     * script argv is built above), uses no stdio, and ends in execve or _exit. Its fd table,
     * working directory, limits and signal dispositions are its own copies (vfork shares the
     * memory only); errno is shared, and read here only after a call of the parent's own failed.
     */
    pid_t child = vfork();
    if (child < 0) {
      reply.err = errno;
      close(errpipe[0]);
      close(errpipe[1]);
      goto done;
    }
    if (child == 0) exec_served(self, errpipe[1], stdin_fd, devnull, stderr_fd, cwd, (long)req->cpu_seconds, file, argv, script, envp);
    /* Here the child has exec'd (its own group set before) or exited: a kill(-child) finds the group. */
    close(errpipe[1]);
    int child_err = 0;
    ssize_t n;
    do n = read(errpipe[0], &child_err, sizeof child_err);
    while (n < 0 && errno == EINTR);
    close(errpipe[0]);
    if (n == (ssize_t)sizeof child_err) {
      /* It never ran the program: reap it here, nothing to report on the pipe. */
      while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
      }
      reply.err = child_err;
      goto done;
    }
    run->pid = child;
    run->report_fd = report_fd;
    fds[next - 1] = -1; /* kept until the run ends */
    reply.type = SUP_STARTED;
    reply.pid = child;
  }
done:
  close_fds(fds, nfds);
  free(owned);
  free(argv);
  free(envp);
  free(script);
  if (send_reply(sock, &reply) != 0 && run->pid != 0) {
    /* Nobody is listening any more: the run must not outlive that. */
    kill(-run->pid, SIGKILL);
  }
}

/*
 * What both shims do first: block the signals they handle (before any fork, so none is lost),
 * ignore SIGPIPE, become the subreaper of everything below, and take SIGUSR1 when the spawner
 * dies (checked once after, for a spawner that died before). 0, or SHIM_FAILED.
 */
static int become_supervisor(pid_t spawner, int with_hup, sigset_t *handled) {
  sigemptyset(handled);
  sigaddset(handled, SIGCHLD);
  sigaddset(handled, SIGTERM);
  sigaddset(handled, SIGINT);
  if (with_hup) sigaddset(handled, SIGHUP);
  sigaddset(handled, SIGUSR1);
  sigprocmask(SIG_BLOCK, handled, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    fail("PR_SET_CHILD_SUBREAPER", strerror(errno));
    return SHIM_FAILED;
  }
  prctl(PR_SET_PDEATHSIG, SIGUSR1);
  return getppid() == spawner ? 0 : SHIM_FAILED;
}

static int serve(pid_t spawner) {
  int sock = SUPERVISOR_FD;
  sigset_t handled;
  /* The spawning thread exited (coordinator gone): SIGUSR1, handled like EOF on the socket. */
  if (become_supervisor(spawner, 1, &handled) != 0) return SHIM_FAILED;
  if (fcntl(sock, F_SETFD, FD_CLOEXEC) != 0) {
    fail("supervisor socket", strerror(errno));
    return SHIM_FAILED;
  }
  int sigfd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (sigfd < 0 || devnull < 0) {
    fail("supervisor setup", strerror(errno));
    return SHIM_FAILED;
  }
  served_run run = { 0, -1 };
  char *packet = malloc(sizeof(sup_request) + SUPERVISOR_INLINE_MAX);
  if (!packet) return SHIM_FAILED;
  for (;;) {
    struct pollfd fds[2] = { { sock, POLLIN, 0 }, { sigfd, POLLIN, 0 } };
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents & POLLIN) {
      struct signalfd_siginfo info;
      int stop = 0;
      while (read(sigfd, &info, sizeof info) == (ssize_t)sizeof info) {
        if (info.ssi_signo != SIGCHLD) stop = 1;
      }
      reap_exited(&run);
      if (stop) break;
    }
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    union {
      char buffer[CMSG_SPACE(sizeof(int) * 4)];
      struct cmsghdr align;
    } control;
    struct iovec iov = { packet, sizeof(sup_request) + SUPERVISOR_INLINE_MAX };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buffer;
    msg.msg_controllen = sizeof control.buffer;
    ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break; /* EOF: the addon closed us (thread teardown) or is gone */
    int passed[4] = { -1, -1, -1, -1 }, npassed = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < count; i++) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (npassed < 4) passed[npassed++] = fd;
        else close(fd);
      }
    }
    if ((size_t)n < sizeof(sup_request) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
      close_fds(passed, npassed);
      sup_reply reply = { .type = SUP_FAILED, .err = EPROTO };
      send_reply(sock, &reply);
      continue;
    }
    sup_request req;
    memcpy(&req, packet, sizeof req);
    if (req.type == SUP_SPAWN) {
      start_run(sock, &run, &req, packet + sizeof req, (size_t)n - sizeof req, passed, npassed, devnull);
    } else {
      close_fds(passed, npassed);
      /* The program is our unreaped child: its pgid is still its own, the signal cannot go astray. */
      if (req.type == SUP_SIGNAL && run.pid != 0 && req.signo > 0) kill(-run.pid, req.signo);
    }
  }
  /* Told to stop, or nobody left to report to: nothing of the run survives us. */
  if (run.pid != 0) end_run(&run);
  else {
    int st, reaped = 0;
    kill_everything(0, -1, &st, &reaped, NULL);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--serve") == 0) {
    long spawner = parse_long(argv[2]);
    if (spawner <= 0) {
      fail("bad arguments", argv[2]);
      return SHIM_FAILED;
    }
    return serve((pid_t)spawner);
  }
  if (argc < 5) {
    fail("usage", "symfence_spawn_shim <spawner-pid> <cpu-seconds> <program-path> <argv0> [args...]");
    return SHIM_FAILED;
  }
  long spawner = parse_long(argv[1]);
  long cpu_seconds = parse_long(argv[2]);
  const char *program = argv[3];
  if (spawner <= 0 || cpu_seconds < 0) {
    fail("bad arguments", argv[1]);
    return SHIM_FAILED;
  }

  sigset_t handled;
  if (become_supervisor((pid_t)spawner, 0, &handled) != 0) return SHIM_FAILED;

  pid_t shim = getpid();
  pid_t child = fork();
  if (child < 0) {
    fail("fork", strerror(errno));
    return SHIM_FAILED;
  }
  if (child == 0) exec_program(shim, cpu_seconds, program, argv + 4);
  /* Both sides set the group, so a kill(-child) below cannot run before it exists. */
  setpgid(child, child);

  int status = 0, reaped = 0;
  while (!reaped) {
    siginfo_t info;
    int sig = sigwaitinfo(&handled, &info);
    if (sig < 0) continue;
    if (sig == SIGCHLD) {
      int st;
      pid_t pid;
      /* Orphans of the run re-parent to us and are reaped here as they exit. */
      while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        if (pid == child) {
          status = st;
          reaped = 1;
        }
      }
    } else if (sig == SIGTERM || sig == SIGINT) {
      kill(-child, sig);
    } else if (sig == SIGUSR1) {
      break;
    }
  }
  kill_everything(child, child, &status, &reaped, NULL);
  exit_like(reaped ? status : SIGKILL);
  return SHIM_FAILED;
}
