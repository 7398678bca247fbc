/* The addon's side of the run supervisors (run_supervisor.c). docs/native.md, *Run supervisor*. */
#ifndef SYMFENCE_RUN_SUPERVISOR_H
#define SYMFENCE_RUN_SUPERVISOR_H

#include <spawn.h>
#include <stdint.h>
#include <sys/types.h>

#include "supervisor_protocol.h"
#include "symfence_native.h"

typedef struct supervisor supervisor;
typedef struct supervisor_registry supervisor_registry;

/*
 * Starts `file` (a resolved path) through an idle supervisor of this env's thread (started from
 * `path` when none is idle). Returns 0 with *pid the program's, *sup the supervisor (busy until
 * its report is read) and *report_fd the non-blocking read end of the run's report pipe; else
 * the errno of the failed start (nothing runs then).
 */
int supervisor_spawn(napi_env env, const char *path, const char *file, const char *cwd, char **argv, uint32_t argc, char **envp,
                     int stdin_fd, int stderr_fd, int64_t cpu_seconds, pid_t *pid, supervisor **sup, int *report_fd);

/*
 * Reads the run's report: 0 when it has not come yet; 1 when the run is over, with *reply the
 * EXITED record, or code -1 / signo SIGKILL and type 0 when the supervisor died instead. On 1 the
 * supervisor goes back to the idle list (or is reaped) and *sup is cleared.
 */
int supervisor_read_report(int report_fd, supervisor **sup, sup_reply *reply);

/* Closes the supervisor's socket (it then kills and reaps its run, and exits) and reaps it. */
void supervisor_destroy(supervisor *sup);

/*
 * posix_spawn attributes of every process the addon starts: its own session, an empty signal
 * mask and every signal at its default disposition. 0 or the errno.
 */
int spawn_attr_clean_session(posix_spawnattr_t *attr);

/* Adds signalSupervised(pid, signo) to exports; 0 on N-API failure. */
int supervisor_export(napi_env env, napi_value exports);

#endif
