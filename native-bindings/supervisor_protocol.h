/*
 * The messages between the addon (spawn_group.c) and a long-lived supervisor (spawn_shim.c,
 * `--serve` mode) on their SOCK_SEQPACKET socket. docs/native.md, *Run supervisor*.
 *
 * addon → supervisor, one packet each:
 *   SPAWN  header + payload (inline, or in a memfd when it does not fit one packet), with fds
 *          (SCM_RIGHTS, in this order): [payload memfd], [stdin], stderr write end, report write end
 *   SIGNAL header with `signo`: signal the running program's process group (SIGKILL: end the run)
 * supervisor → addon:
 *   on the socket, one reply to each SPAWN: STARTED (pid) or FAILED (errno; nothing is running)
 *   on the run's report pipe, once, when the run is over: EXITED (status, rusage); then the pipe
 *   closes. EOF without EXITED means the supervisor died (its runs died with it).
 *
 * Payload: NUL-terminated strings, in this order: file, cwd (empty = unchanged), argv[0..argc),
 * env[0..envc).
 */
#ifndef SYMFENCE_SUPERVISOR_PROTOCOL_H
#define SYMFENCE_SUPERVISOR_PROTOCOL_H

#include <stdint.h>

#define SUPERVISOR_FD 3
/* Inline payload limit: a packet must fit the socket's send buffer (wmem_default 212992). */
#define SUPERVISOR_INLINE_MAX (64 * 1024)

enum { SUP_SPAWN = 1, SUP_SIGNAL = 2 };
enum { SUP_STARTED = 1, SUP_FAILED = 2, SUP_EXITED = 3 };
/* SPAWN flags */
#define SUP_HAS_STDIN 1u
#define SUP_PAYLOAD_IN_MEMFD 2u

typedef struct sup_request {
  uint32_t type;
  uint32_t flags;
  uint32_t argc;
  uint32_t envc;
  int32_t signo;
  uint32_t reserved;
  int64_t cpu_seconds;
  uint64_t payload_bytes;
} sup_request;

typedef struct sup_reply {
  uint32_t type;
  int32_t pid;
  int32_t err;
  /* EXITED: exit code or -1; the terminating signal or -1. */
  int32_t code;
  int32_t signo;
  int32_t reserved;
  /* EXITED: the program's rusage (its reaped descendants included), µs and KiB. */
  int64_t user_us;
  int64_t system_us;
  int64_t max_rss_kb;
} sup_reply;

#endif
