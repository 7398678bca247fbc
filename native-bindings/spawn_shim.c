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
 */
#define _GNU_SOURCE
#include <dirent.h>
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

/* In the forked child: limits, signal state, exec. Never returns. */
static void exec_program(pid_t shim, long cpu_seconds, const char *program, char **argv) {
  sigset_t none;
  if (setpgid(0, 0) != 0) {
    fail("setpgid", strerror(errno));
    _exit(SHIM_FAILED);
  }
  /* If the shim is SIGKILLed (by anyone), the program goes with it. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != shim) _exit(SHIM_FAILED);
  if (cpu_seconds > 0) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_CPU, &limit) == 0) {
      rlim_t soft = (rlim_t)cpu_seconds, hard = (rlim_t)cpu_seconds + 1;
      /* An unprivileged process cannot raise its hard limit: stay within an existing one. */
      if (limit.rlim_max != RLIM_INFINITY && hard > limit.rlim_max) hard = limit.rlim_max;
      if (soft > hard) soft = hard;
      limit.rlim_cur = soft;
      limit.rlim_max = hard;
      setrlimit(RLIMIT_CPU, &limit);
    }
  }
  signal(SIGPIPE, SIG_DFL);
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execve(program, argv, environ);
  if (errno == ENOEXEC) {
    /* execvp's rule: a file without a valid binary format is a shell script. */
    int argc = 0;
    while (argv[argc]) argc++;
    char **script = calloc((size_t)argc + 2, sizeof *script);
    if (script) {
      script[0] = "/bin/sh";
      script[1] = (char *)program;
      for (int i = 1; i < argc; i++) script[i + 1] = argv[i];
      execve("/bin/sh", script, environ);
    }
  }
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
static void kill_everything(pid_t group, pid_t program, int *status, int *program_reaped) {
  kill(-group, SIGKILL);
  for (;;) {
    int st;
    kill_children();
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      if (pid == program && !*program_reaped) {
        *status = st;
        *program_reaped = 1;
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

int main(int argc, char **argv) {
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
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, SIGTERM);
  sigaddset(&handled, SIGINT);
  sigaddset(&handled, SIGUSR1);
  /* Blocked before the fork, so no signal is lost between fork and the wait loop. */
  sigprocmask(SIG_BLOCK, &handled, NULL);
  signal(SIGPIPE, SIG_IGN);

  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    fail("PR_SET_CHILD_SUBREAPER", strerror(errno));
    return SHIM_FAILED;
  }
  prctl(PR_SET_PDEATHSIG, SIGUSR1);
  /* The spawner died before the line above took effect: no run to supervise. */
  if (getppid() != (pid_t)spawner) return SHIM_FAILED;

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
  kill_everything(child, child, &status, &reaped);
  exit_like(reaped ? status : SIGKILL);
  return SHIM_FAILED;
}
