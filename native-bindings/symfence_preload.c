/*
 * symfence_preload.so: branch telemetry and directed solving for a stock SymCC binary (QSYM
 * backend), loaded with LD_PRELOAD. The full contract is in docs/solver.md, section
 * "Stock SymCC: the preload library"; this comment restates every rule the code implements.
 *
 * Interposition. A SymCC-instrumented program links libSymRuntime.so dynamically and calls
 *   void _sym_push_path_constraint(SymExpr constraint, int taken, uintptr_t site_id)
 * at every conditional branch. This library defines the same symbol; being preloaded, it wins the
 * lookup, and forwards every call to the next definition, found lazily (first call, or at exit)
 * with dlsym(RTLD_NEXT, ...). Without one (no runtime, or the runtime linked statically into the
 * executable, whose own calls never reach us) it forwards nothing and writes no telemetry.
 * constraint == NULL is a concrete branch: forwarded unchanged, counted in `events` only.
 *
 * Environment, read once (constructor, or the first call if that comes first):
 *   SYMCC_OUTPUT_DIR         where QSYM writes test cases 000000, 000001, ... (default
 *                            /tmp/output, as in SymCC); made absolute at start-up
 *   SYMCC_TELEMETRY_OUT      telemetry file; unset = no telemetry (calls are still forwarded)
 *   SYMCC_TARGET_BRANCH      primary target, decimal u64 (0 or malformed = none)
 *   SYMCC_S2F_ACTIONS        file of lines `<branch> <solve|sample|skip>`; the first line per
 *                            branch wins, malformed lines are ignored, at most 64 actions
 *   SYMFENCE_WANTED          trace mode only: file of decimal branch ids, one per line, at most
 *                            256: branches the trace run also answers (on QSYM: forked, then in place)
 *   SYMFENCE_TRACE_ONLY=1    trace-only mode (wins over target and actions)
 *   SYMFENCE_PRELOAD_FORK=0  no fork at the target (the one-solve rule below); default on
 *   SYMFENCE_PRELOAD_MAX_FORKS      forks per run, 0..4096 (default 64)
 *   SYMFENCE_PRELOAD_FORK_CPU_MS    CPU all answers of a run (forked or in place) may use (default 20000)
 *   SYMFENCE_PRELOAD_HUGE=0         no huge-page backing before the second fork (below); default on
 *   SYMFENCE_PRELOAD_IN_PLACE=0     no in-place answers (below): every answer forks; default on
 * Input files are read only when they are regular files of at most 64 KiB, opened O_NONBLOCK
 * (a FIFO or a device never blocks or loops the setup); otherwise one line on stderr with a code
 * (ERR_PRELOAD_INPUT_NOT_REGULAR, ERR_PRELOAD_INPUT_TOO_LARGE, ERR_PRELOAD_INPUT_OPEN), the file
 * is ignored and, for SYMCC_S2F_ACTIONS, the run becomes a trace run (it solves nothing).
 *   SYMFENCE_PRELOAD_EARLY_EXIT=0  no early exit in directed mode (default on)
 *   SYMFENCE_BRANCH_CONTEXT  K in 0..16 (default 4; anything else = 4)
 *
 * Modes.
 *   untargeted  no target, no actions, not trace-only: every symbolic event is forwarded with its
 *               real site id (plain SymCC: QSYM solves every branch), plus telemetry.
 *   trace       every symbolic event is forwarded with site id 0: QSYM adds the constraint to the
 *               path but solves nothing.
 *   directed    group = the target (unless an action says `skip` for it) + every `solve`/`sample`
 *               action branch. An event is forwarded with its real site id only when its OPPOSITE
 *               id is in the group and was not solved earlier in this run; every other event with
 *               site id 0. `skip` branches are never solved. An event whose real site id is 0
 *               cannot be solved (its group entry stays unsolved).
 *
 * Site ids. A raw site id that lies inside a loaded shared object other than the main
 * program (SymCC's libc wrappers pass their own address, which moves with ASLR) is replaced by
 * s = nz(mix(fnv1a64(basename of the object)) + (address - load base)) before anything else
 * uses it (ids, the trace's site column, generatedBy); one dl_iterate_phdr walk (segment ranges
 * only) per distinct raw site.
 *
 * Branch ids (u64, never 0). mix(x) is the splitmix64 finaliser:
 *   x ^= x >> 30; x *= 0xbf58476d1ce4e5b9; x ^= x >> 27; x *= 0x94d049bb133111eb; x ^= x >> 31
 *   tok(s, t)  = mix(s + 0x9e3779b97f4a7c15 * (1 + t))           t = taken ? 1 : 0
 *   c          = 0x243f6a8885a308d3
 *   for each of the previous min(K, n) symbolic events (s_i, t_i), oldest first:
 *                c = mix(c ^ tok(s_i, t_i))
 *   c          = mix(c ^ bucket(hits(s)))
 *   actual     = nz(mix(c ^ tok(s, t))),  opposite = nz(mix(c ^ tok(s, !t))),  nz(0) = 1
 *   hits(s) counts the symbolic events at site s in this run including this one; bucket maps
 *   1,2,3,4-7,8-15,16-31,32-127,128+ to 1..8 (AFL's hit-count classes); a site beyond the first
 *   SITE_LIMIT distinct sites of a run is not counted and gets bucket 0. parent = the previous
 *   symbolic event's actual (0 for the first). Everything is a function of the event sequence, so
 *   ids are stable across runs of the same input; prefixes that differ within the last K events
 *   (or in the hit bucket) give different ids, older differences are forgotten on purpose.
 *
 * Attribution. QSYM solves inside the forwarded call and writes each SAT answer as the next file
 * name before returning. After each solving call (and only then) we faccessat() the next expected
 * name on a directory fd, looping while it exists; each file found is attributed to that event.
 * The output directory is assumed empty at start (SymCC numbers from 000000). Files a runtime
 * writes outside this call are attributed to the next solving call. The simple (Z3) backend writes
 * no files, so there every solving call counts as unsat. If the directory cannot be opened, each
 * solving call counts as `unknown` and nothing is attributed.
 *
 * Telemetry (schema symfence-telemetry/1, see src/scheduler/telemetry.ts), written once at normal
 * exit (destructor) by the process that read the environment (a forked child never writes it):
 * a temp file `<out>.<pid>.tmp` in the same directory, renamed over SYMCC_TELEMETRY_OUT. No signal
 * handlers: a run killed by a signal or crashing leaves no telemetry file and no temp file; _exit()
 * from the program leaves none either.
 *   targetReached   the primary target was the opposite of some event (solved or not)
 *   targetStatus    sat (its solving call produced >= 1 file), unsat (solved, none), unknown
 *                   (solved, output directory unreadable), none (never solved)
 *   branchTrace     <= 512 rows [parent, actual, opposite, site, taken, interesting]: the first
 *                   512 events whose actual id is new in this run (loops collapse);
 *                   interesting = forwarded for solving. Every other symbolic event is counted in
 *                   preload.traceDropped (rows + traceDropped = symbolicEvents). Directed matching
 *                   looks at every event, kept or not.
 *   openBranches    <= 256 distinct opposites, first seen, that this run did not solve; events
 *                   whose unsolved opposite did not fit are counted (per event) in openDropped
 *   counters        queries = solving calls, sat/unsat by files produced, unknown, solverTimeUs =
 *                   CLOCK_MONOTONIC wall time inside solving calls, generated = files attributed
 *   preload         {version, mode, events, symbolicEvents, solved, skipped (forwarded with site
 *                   0), traceDropped, openDropped, earlyExit, context}
 *   generatedBy     <= 4096 rows [fileName, oppositeId, siteId]; more are counted in
 *                   preload.generatedByDropped
 *   answers         <= 256 rows [branch, sat|unsat|unknown, solverTimeUs, cpuUs, files], one
 *                   per forked or in-place answer, in path order
 *   preload also    fork, forks, forkFailed, forkCapped, childCpuUs, threadsAtFork (most threads
 *                   of the process at a fork, -1 = no fork), siteLookups (object lookups), wanted
 *                   (size of the wanted set), hugeKb (memory collapsed into huge pages), inPlace (answers
 *                   solved in this process, below), negations (QSYM solving steps in this process,
 *                   counted at Solver::negatePath), interposed (QSYM's solving decision came through
 *                   this library), cpuUs (user + system of the process and every child it reaped,
 *                   at the time of writing), actionsError / wantedError (codes)
 *
 * QSYM's inherited verdict (directed mode): QSYM gives a site-0 call the verdict of the last call
 * with a real site id (it takes it for a follow-up constraint of that branch), so after a solved
 * group branch every later event passed with site 0 would be solved too. On QSYM (detected by the
 * solver global it exports, `qsym::g_solver` = `_ZN4qsym8g_solverE`; SYMFENCE_PRELOAD_QSYM=0/1
 * forces it) a directed run therefore never leaves that verdict to QSYM: it forks at the target
 * (below), or answers in place once it has proven it takes QSYM's decision itself (below).
 * Without forking (SYMFENCE_PRELOAD_FORK=0, or a failed fork) it makes exactly one solving call —
 * its first group branch on the path — and then ends (telemetry, `_exit(0)`); the group's other
 * branches stay open for later runs. With a fresh pruning map (the coordinator leaves
 * SYMCC_AFL_COVERAGE_MAP unset for directed runs) QSYM always solves that one call: it is the first call with a real site id QSYM sees.
 * A solving call that takes QSYM's whole solver timeout (>= SOLVER_TIMEOUT_NS) and writes nothing
 * is `unknown`, not `unsat`.
 *
 * Fork at the target (QSYM, unless SYMFENCE_PRELOAD_FORK=0): instead of solving a group (or
 * wanted) branch itself, the process forks; the child (same process group, PR_SET_PDEATHSIG
 * SIGKILL, RLIMIT_CPU from what is left of the CPU budget) forwards the real site id, so QSYM
 * solves on the exact path state — and as the first real site id its QSYM sees, always — then
 * reports its solver time in a shared page and _exit(0)s. The parent waits (wait4, no zombies),
 * renames each file the child left under QSYM's names (numbered from the parent's counter, which
 * has not moved: no answer of the parent precedes a fork) to f<n>-<name>, attributes it, records an answer row (sat: files; unsat: none;
 * unknown: the child crashed, ran out of CPU or took the solver's whole timeout), passes the event
 * on with site id 0 and goes on: while it forks it never solves, so it never inherits a verdict,
 * and no solver thread exists at any fork (in-place answers, below, come only after the last fork,
 * which is also why the parent's file counter has not moved when a child's files are renamed). Past the fork cap or the CPU budget the remaining branches stay
 * open (forkCapped). A failed fork (EAGAIN, ENOMEM) falls back to the one-solve rule for the rest
 * of the run (forkFailed), and so does a process with more than one thread at the fork (a lock
 * another thread holds could block the child forever).
 *
 * Huge pages before the second fork (QSYM, a group or wanted set of >= HUGE_MIN_GROUP branches,
 * unless SYMFENCE_PRELOAD_HUGE=0): each fork copies one page-table entry per resident page and
 * each child's exit tears them down again; Z3's context alone keeps ~16 MiB of resident hash
 * tables. So right before its second fork the process asks the kernel (MADV_COLLAPSE, Linux >= 6.1)
 * to back every 2 MiB-aligned range of its private anonymous memory that is resident in full by
 * one transparent huge page: the contents stay the same, the resident size does not grow (a range
 * with a page missing is left alone), and fork and exit then handle one entry per 2 MiB. Best
 * effort: a kernel without it, THP disabled, or no free huge page leaves the memory as it was.
 * preload.hugeKb = KiB collapsed (0 = none). The collapse copies the ranges once, which pays off
 * only over several forks, hence the group-size floor and the wait for a second fork.
 *
 * In-place answers (QSYM, unless SYMFENCE_PRELOAD_IN_PLACE=0): QSYM decides whether a call with
 * a real site id is solved in Solver::isInterestingJcc, an exported member function that its
 * addJcc reaches through the PLT. This library defines the same symbol
 * (`_ZN4qsym6Solver16isInterestingJccESt10shared_ptrINS_4ExprEEbm`), so on a stock build it
 * makes that decision itself: in an untargeted run, and in a forked child, it forwards to QSYM's
 * own (QSYM's pruning, unchanged); in a process answering in place it answers "solve" for the
 * group branch being forwarded and nothing else, and never lets QSYM's own run, so QSYM's
 * remembered verdict stays "not interesting" and every site-0 call adds its constraint only.
 * A group branch is then solved in this process, on the exact path state, with no fork: QSYM's
 * solver runs as in a full run, writes its files, and the path goes on. Whether the interposition
 * is in effect (a build that inlines the call, links the runtime statically, or resolves it
 * inside the library never reaches us) is learned, not assumed: the first answer of a run is
 * forked, and its child reports whether its call came through this library. Only then do later
 * answers run in place (preload.inPlace counts them); otherwise the run keeps forking. One answer
 * needs no proof: the last open branch of a directed group when early exit is on (a one-target
 * run's only one) is solved in place on any build, because the run ends right after it and no
 * later call can inherit its verdict. A crash
 * inside an in-place solving call ends the run (a forked one would lose one answer); its CPU
 * counts against the same budget as the forked answers (SYMFENCE_PRELOAD_FORK_CPU_MS), measured
 * after the call: one in-place call can overshoot the budget by its own length (the solver's
 * timeout bounds it). The fork cap (SYMFENCE_PRELOAD_MAX_FORKS) counts forks only.
 *
 * Early exit (directed mode, default on): right after the solving call that solves the last
 * unsolved group entry, telemetry is written and the process _exit(0)s: the rest of the path would
 * only be traced. An empty group never triggers it.
 *
 * Cost: fixed-size tables, open addressing, no malloc and no syscall per event except inside
 * solving calls: two CLOCK_MONOTONIC reads (vDSO) around each call, plus two CLOCK_PROCESS_CPUTIME_ID
 * reads (real syscalls) around an in-place answer for the answer budget, and one faccessat per
 * file plus one. Single-threaded
 * by design: SymCC-instrumented programs and QSYM are; no locks.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <dirent.h>
#include <link.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
/* QSYM's Z3 timeout is 10 s: a solving call this long that wrote nothing timed out. */
#define SOLVER_TIMEOUT_NS 9500000000ULL

typedef void *SymExpr;
typedef void (*push_fn)(SymExpr, int, uintptr_t);
/* qsym::Solver::isInterestingJcc(ExprRef, bool, ADDRINT) under the x86-64 Itanium C++ ABI: `this`,
 * then a pointer to the caller's shared_ptr temporary (a non-trivial type passed by value; the
 * caller destroys it), then the bool, then the address. */
typedef _Bool (*interesting_fn)(void *, void *, _Bool, uintptr_t);
#define QSYM_IS_INTERESTING _ZN4qsym6Solver16isInterestingJccESt10shared_ptrINS_4ExprEEbm
#define QSYM_IS_INTERESTING_NAME "_ZN4qsym6Solver16isInterestingJccESt10shared_ptrINS_4ExprEEbm"
/* qsym::Solver::negatePath(ExprRef, bool): QSYM's solving step for one branch, counted. */
typedef void (*negate_fn)(void *, void *, _Bool);
#define QSYM_NEGATE_PATH _ZN4qsym6Solver10negatePathESt10shared_ptrINS_4ExprEEb
#define QSYM_NEGATE_PATH_NAME "_ZN4qsym6Solver10negatePathESt10shared_ptrINS_4ExprEEb"

EXPORT void _sym_push_path_constraint(SymExpr constraint, int taken, uintptr_t site_id);
EXPORT _Bool QSYM_IS_INTERESTING(void *solver, void *expr, _Bool taken, uintptr_t pc);
EXPORT void QSYM_NEGATE_PATH(void *solver, void *expr, _Bool taken);

enum {
  MAX_TRACE = 512,
  TRACE_SLOTS = 1024, /* set of the kept rows' actual ids; load <= 1/2 */
  MAX_OPEN = 256,
  OPEN_SLOTS = 512,
  MAX_ACTIONS = 64,
  GROUP_SLOTS = 1024, /* <= 65 members directed, <= 256 wanted */
  MAX_GENERATED_ROWS = 4096,
  SITE_SLOTS = 16384,
  SITE_LIMIT = SITE_SLOTS / 4 * 3,
  MAX_CONTEXT = 16, /* ring size, a power of two */
  DEFAULT_CONTEXT = 4,
  MAX_INPUT_FILE_BYTES = 64 * 1024, /* SYMCC_S2F_ACTIONS, SYMFENCE_WANTED */
  MAX_WANTED = 256,
  MAX_ANSWERS = 256,
  DEFAULT_MAX_FORKS = 64,
  MAX_FORKS_LIMIT = 4096,
  STABLE_SLOTS = 16384, /* raw site -> position-independent site, load <= 3/4 */
  STABLE_LIMIT = STABLE_SLOTS / 4 * 3,
  HUGE_MIN_GROUP = 8, /* group or wanted branches for the huge-page step before the second fork */
};
#define HUGE_RANGE (2UL << 20)
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux >= 6.1; older kernels fail it with EINVAL */
#endif
/* Total CPU the answers of one run (forked or in place) may use unless SYMFENCE_PRELOAD_FORK_CPU_MS says. */
#define DEFAULT_FORK_CPU_NS 20000000000ULL

enum mode { MODE_UNTARGETED, MODE_TRACE, MODE_DIRECTED };
enum status { STATUS_NONE, STATUS_SAT, STATUS_UNSAT, STATUS_UNKNOWN };
enum action { ACTION_SOLVE, ACTION_SAMPLE, ACTION_SKIP };

struct trace_row {
  uint64_t parent, actual, opposite, site;
  uint8_t taken, interesting;
};

struct generated_row {
  uint32_t file_index;
  uint16_t child; /* 0 = written by this process, n = renamed from forked answer n (f<n>-...) */
  uint8_t optimistic;
  uint64_t opposite, site;
};

struct site_slot {
  uint64_t site;
  uint32_t hits; /* 0 = empty slot */
};

struct group_slot {
  uint64_t id; /* 0 = empty slot */
  uint8_t solved;
};

struct stable_slot {
  uint64_t raw; /* 0 = empty slot (site 0 is never mapped) */
  uint64_t stable;
};

/* One forked answer: a group (or wanted) branch solved in a child on the exact path state. */
struct answer_row {
  uint64_t branch;
  enum status status;
  uint64_t solver_ns, cpu_ns;
  uint32_t files;
};

/* What a forked child reports back, in a MAP_SHARED page written before it _exit()s. */
struct child_report {
  volatile uint32_t done;
  volatile uint32_t interposed; /* the child's solving call reached QSYM_IS_INTERESTING here */
  volatile uint64_t solver_ns;
};

static struct {
  int initialised;
  pid_t pid;
  int resolved;
  push_fn real;

  enum mode mode;
  unsigned context;
  int early_exit_enabled;
  int qsym_one_solve;
  uint64_t target;
  int target_in_group;
  char telemetry_path[PATH_MAX];
  int telemetry_enabled;
  char output_dir[PATH_MAX];
  int output_fd; /* -1 = not opened yet */
  int output_failed;
  uint32_t next_file;

  struct { uint64_t branch; enum action kind; } actions[MAX_ACTIONS];
  unsigned action_count;
  struct group_slot group[GROUP_SLOTS];
  unsigned group_count, group_solved;

  struct site_slot sites[SITE_SLOTS];
  unsigned site_count;
  uint64_t ring[MAX_CONTEXT];
  uint64_t last_actual;

  struct trace_row trace[MAX_TRACE];
  unsigned trace_count;
  uint64_t trace_set[TRACE_SLOTS];
  uint64_t open[MAX_OPEN];
  unsigned open_count;
  uint64_t open_set[OPEN_SLOTS];
  struct generated_row generated_rows[MAX_GENERATED_ROWS];
  unsigned generated_row_count;

  uint64_t events, symbolic_events, solved, skipped, trace_dropped, open_dropped, generated_by_dropped;
  uint64_t queries, sat, unsat, unknown, solver_time_ns, generated;
  int target_reached;
  enum status target_status;
  int early_exited;
  int written;

  /* Input files (SYMCC_S2F_ACTIONS, SYMFENCE_WANTED) that were refused, by code. */
  const char *actions_error;
  const char *wanted_error;
  int wanted_given;

  /* Position-independent site ids (see "Site ids" in the header). */
  struct stable_slot stable[STABLE_SLOTS];
  unsigned stable_count;
  uint64_t stable_lookups;

  /* Fork-at-target (see "Fork at the target" in the header). */
  int fork_enabled;
  unsigned fork_max;
  uint64_t fork_cpu_budget_ns;
  unsigned forks;
  int fork_failed, fork_capped;
  uint64_t child_cpu_ns;
  int threads_at_fork; /* the most threads this process had at a fork; -1 = never counted */
  struct child_report *report;
  int huge_enabled, huge_tried;
  uint64_t huge_bytes;
  struct answer_row answers[MAX_ANSWERS];
  unsigned answer_count;

  /* In-place answers (see "In-place answers" in the header). */
  int in_place_enabled;
  int in_place; /* proven by a forked child: answers now run in this process */
  int solving_in_place; /* inside an in-place solving call: the one call QSYM may solve */
  int answer_child; /* this process is a forked answer's child */
  unsigned in_place_answers;
  uint64_t in_place_cpu_ns;
  uint64_t interposed_calls;
  int interesting_resolved, negate_resolved;
  interesting_fn real_interesting;
  negate_fn real_negate;
  uint64_t negations; /* QSYM solving steps (negatePath) in this process */
} g; /* zero-initialised: stays in .bss, pages are touched only when used */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

static uint64_t token(uint64_t site, unsigned taken) { return mix64(site + 0x9e3779b97f4a7c15ULL * (1 + taken)); }

static uint64_t nonzero(uint64_t id) { return id ? id : 1; }

static unsigned hit_bucket(uint32_t hits) {
  if (hits == 0) return 0;
  if (hits <= 3) return hits;
  if (hits <= 7) return 4;
  if (hits <= 15) return 5;
  if (hits <= 31) return 6;
  if (hits <= 127) return 7;
  return 8;
}

/* Strict decimal u64 (digits only, no sign, no overflow). */
static int parse_u64(const char *text, const char **end, uint64_t *out) {
  uint64_t value = 0;
  const char *p = text;
  if (*p < '0' || *p > '9') return 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned digit = (unsigned)(*p - '0');
    if (value > (UINT64_MAX - digit) / 10) return 0;
    value = value * 10 + digit;
  }
  *end = p;
  *out = value;
  return 1;
}

/* Open-addressing sets of non-zero ids; `slots` is a power of two. Returns 1 when inserted. */
static int id_set_insert(uint64_t *set, unsigned slots, uint64_t id) {
  for (unsigned i = (unsigned)mix64(id) & (slots - 1);; i = (i + 1) & (slots - 1)) {
    if (set[i] == id) return 0;
    if (set[i] == 0) {
      set[i] = id;
      return 1;
    }
  }
}

static int id_set_contains(const uint64_t *set, unsigned slots, uint64_t id) {
  for (unsigned i = (unsigned)mix64(id) & (slots - 1);; i = (i + 1) & (slots - 1)) {
    if (set[i] == id) return 1;
    if (set[i] == 0) return 0;
  }
}

static struct group_slot *group_find(uint64_t id) {
  for (unsigned i = (unsigned)mix64(id) & (GROUP_SLOTS - 1);; i = (i + 1) & (GROUP_SLOTS - 1)) {
    if (g.group[i].id == id) return &g.group[i];
    if (g.group[i].id == 0) return NULL;
  }
}

static void group_add(uint64_t id) {
  if (group_find(id)) return;
  unsigned i = (unsigned)mix64(id) & (GROUP_SLOTS - 1);
  while (g.group[i].id != 0) i = (i + 1) & (GROUP_SLOTS - 1);
  g.group[i].id = id;
  g.group_count++;
}

/* hits(s) including this event; 0 when the site table is full and s is not in it. */
static uint32_t site_hit(uint64_t site) {
  for (unsigned i = (unsigned)mix64(site) & (SITE_SLOTS - 1);; i = (i + 1) & (SITE_SLOTS - 1)) {
    struct site_slot *slot = &g.sites[i];
    if (slot->hits != 0 && slot->site == site) {
      if (slot->hits != UINT32_MAX) slot->hits++;
      return slot->hits;
    }
    if (slot->hits == 0) {
      if (g.site_count >= SITE_LIMIT) return 0;
      slot->site = site;
      slot->hits = 1;
      g.site_count++;
      return 1;
    }
  }
}

/* A path the program cannot move by chdir() later. */
static int absolute_path(const char *path, char *out) {
  if (path[0] == '/') {
    if (strlen(path) >= PATH_MAX) return 0;
    strcpy(out, path);
    return 1;
  }
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return 0;
  return snprintf(out, PATH_MAX, "%s/%s", cwd, path) < PATH_MAX;
}

/* Library diagnostics: one line on stderr, with a stable code (docs/solver.md). */
static void diagnose(const char *code, const char *variable, const char *file, const char *what) {
  fprintf(stderr, "symfence_preload: %s=%s %s; ignored [%s]\n", variable, file, what, code);
}

/*
 * Reads a whole input file of at most MAX_INPUT_FILE_BYTES into buf (NUL-terminated). Only a
 * regular file is read, opened O_NONBLOCK so a FIFO or a device never blocks the open, and the
 * read is bounded, so /dev/zero or /dev/urandom cannot make setup loop. Returns the code of the
 * refusal, or NULL on success.
 */
static const char *read_bounded(const char *file, char *buf, size_t *len) {
  int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return "ERR_PRELOAD_INPUT_OPEN";
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return "ERR_PRELOAD_INPUT_NOT_REGULAR";
  }
  if (st.st_size > MAX_INPUT_FILE_BYTES) {
    close(fd);
    return "ERR_PRELOAD_INPUT_TOO_LARGE";
  }
  size_t got = 0;
  /* One byte more than the cap: a file that grew since fstat is refused, not cut. */
  while (got <= MAX_INPUT_FILE_BYTES) {
    ssize_t n = read(fd, buf + got, MAX_INPUT_FILE_BYTES + 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return "ERR_PRELOAD_INPUT_OPEN";
    }
    if (n == 0) break;
    got += (size_t)n;
  }
  close(fd);
  if (got > MAX_INPUT_FILE_BYTES) return "ERR_PRELOAD_INPUT_TOO_LARGE";
  buf[got] = '\0';
  *len = got;
  return NULL;
}

static const char *refusal_text(const char *code) {
  if (strcmp(code, "ERR_PRELOAD_INPUT_NOT_REGULAR") == 0) return "is not a regular file";
  if (strcmp(code, "ERR_PRELOAD_INPUT_TOO_LARGE") == 0) return "is larger than 65536 bytes";
  return "cannot be read";
}

/* The next line of buf (NUL-terminated, without its '\n'), or NULL at the end. */
static char *next_line(char **cursor) {
  char *line = *cursor;
  if (*line == '\0') return NULL;
  char *nl = strchr(line, '\n');
  if (nl) {
    *nl = '\0';
    *cursor = nl + 1;
  } else {
    *cursor = line + strlen(line);
  }
  return line;
}

static char input_buffer[MAX_INPUT_FILE_BYTES + 2];

static void read_actions(const char *file) {
  size_t len;
  const char *refused = read_bounded(file, input_buffer, &len);
  if (refused) {
    g.actions_error = refused;
    diagnose(refused, "SYMCC_S2F_ACTIONS", file, refusal_text(refused));
    return;
  }
  char *cursor = input_buffer;
  char *line;
  while (g.action_count < MAX_ACTIONS && (line = next_line(&cursor))) {
    if (strlen(line) >= 255) continue; /* longer than any valid line */
    const char *p;
    uint64_t branch;
    if (!parse_u64(line, &p, &branch) || branch == 0) continue;
    if (*p != ' ' && *p != '\t') continue;
    while (*p == ' ' || *p == '\t') p++;
    enum action kind;
    size_t word;
    if (strncmp(p, "solve", 5) == 0) kind = ACTION_SOLVE, word = 5;
    else if (strncmp(p, "sample", 6) == 0) kind = ACTION_SAMPLE, word = 6;
    else if (strncmp(p, "skip", 4) == 0) kind = ACTION_SKIP, word = 4;
    else continue;
    p += word;
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (*p != '\0') continue;
    int seen = 0;
    for (unsigned i = 0; i < g.action_count; i++) seen |= g.actions[i].branch == branch;
    if (seen) continue;
    g.actions[g.action_count].branch = branch;
    g.actions[g.action_count].kind = kind;
    g.action_count++;
  }
}

/* SYMFENCE_WANTED: one decimal branch id per line (optional trailing spaces or '\r'). */
static void read_wanted(const char *file) {
  size_t len;
  const char *refused = read_bounded(file, input_buffer, &len);
  if (refused) {
    g.wanted_error = refused;
    diagnose(refused, "SYMFENCE_WANTED", file, refusal_text(refused));
    return;
  }
  char *cursor = input_buffer;
  char *line;
  unsigned count = 0;
  while (count < MAX_WANTED && (line = next_line(&cursor))) {
    const char *p;
    uint64_t branch;
    if (!parse_u64(line, &p, &branch) || branch == 0) continue;
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (*p != '\0') continue;
    if (!group_find(branch)) count++;
    group_add(branch);
  }
}

static uint64_t env_u64(const char *name, uint64_t fallback, uint64_t max) {
  const char *text = getenv(name);
  const char *end;
  uint64_t value;
  if (text && parse_u64(text, &end, &value) && *end == '\0' && value <= max) return value;
  return fallback;
}

static void initialise(void) {
  if (g.initialised) return;
  g.initialised = 1;
  g.pid = getpid();
  g.output_fd = -1;

  const char *out = getenv("SYMCC_TELEMETRY_OUT");
  g.telemetry_enabled = out && *out && absolute_path(out, g.telemetry_path);
  const char *dir = getenv("SYMCC_OUTPUT_DIR");
  if (!dir || !*dir) dir = "/tmp/output";
  if (!absolute_path(dir, g.output_dir)) g.output_failed = 1;

  g.context = DEFAULT_CONTEXT;
  const char *context = getenv("SYMFENCE_BRANCH_CONTEXT");
  const char *end;
  uint64_t value;
  if (context && parse_u64(context, &end, &value) && *end == '\0' && value <= MAX_CONTEXT) g.context = (unsigned)value;
  const char *early = getenv("SYMFENCE_PRELOAD_EARLY_EXIT");
  g.early_exit_enabled = !(early && strcmp(early, "0") == 0);
  /* On QSYM (its solver global is visible) a directed run solves one group branch and ends;
   * SYMFENCE_PRELOAD_QSYM=0/1 forces the detection. */
  const char *qsym = getenv("SYMFENCE_PRELOAD_QSYM");
  if (qsym && strcmp(qsym, "0") == 0) g.qsym_one_solve = 0;
  else if (qsym && strcmp(qsym, "1") == 0) g.qsym_one_solve = 1;
  else g.qsym_one_solve = dlsym(RTLD_DEFAULT, "_ZN4qsym8g_solverE") != NULL;

  const char *target = getenv("SYMCC_TARGET_BRANCH");
  if (target && parse_u64(target, &end, &value) && *end == '\0') g.target = value;
  const char *actions = getenv("SYMCC_S2F_ACTIONS");
  if (actions && *actions) read_actions(actions);

  const char *trace_only = getenv("SYMFENCE_TRACE_ONLY");
  if (trace_only && strcmp(trace_only, "1") == 0) g.mode = MODE_TRACE;
  else if (g.target != 0 || g.action_count > 0) g.mode = MODE_DIRECTED;
  else if (g.actions_error) g.mode = MODE_TRACE; /* a refused actions file solves nothing, never everything */
  else g.mode = MODE_UNTARGETED;

  if (g.mode == MODE_DIRECTED) {
    int target_skipped = 0;
    for (unsigned i = 0; i < g.action_count; i++) {
      if (g.actions[i].kind == ACTION_SKIP) target_skipped |= g.actions[i].branch == g.target;
      else group_add(g.actions[i].branch);
    }
    /* Actions are unique per branch, so only the target can be both named and skipped. */
    if (g.target != 0 && !target_skipped) {
      group_add(g.target);
      g.target_in_group = 1;
    }
  } else if (g.mode == MODE_TRACE) {
    /* A trace run with a wanted set also answers every wanted branch its path reaches. */
    const char *wanted = getenv("SYMFENCE_WANTED");
    if (wanted && *wanted) {
      g.wanted_given = 1;
      read_wanted(wanted);
    }
  }

  /* Fork at the target: on QSYM (where a second solving call in one process would inherit the
   * first's verdict) each group branch is solved in a forked child; SYMFENCE_PRELOAD_FORK=0 keeps
   * the one-solve rule. */
  const char *fork_env = getenv("SYMFENCE_PRELOAD_FORK");
  g.fork_enabled = g.qsym_one_solve && !(fork_env && strcmp(fork_env, "0") == 0);
  g.fork_max = (unsigned)env_u64("SYMFENCE_PRELOAD_MAX_FORKS", DEFAULT_MAX_FORKS, MAX_FORKS_LIMIT);
  g.fork_cpu_budget_ns = env_u64("SYMFENCE_PRELOAD_FORK_CPU_MS", DEFAULT_FORK_CPU_NS / 1000000ULL, 86400000ULL) * 1000000ULL;
  g.threads_at_fork = -1;
  const char *huge = getenv("SYMFENCE_PRELOAD_HUGE");
  g.huge_enabled = !(huge && strcmp(huge, "0") == 0);
  const char *in_place = getenv("SYMFENCE_PRELOAD_IN_PLACE");
  g.in_place_enabled = g.fork_enabled && !(in_place && strcmp(in_place, "0") == 0);
}

static int resolve_real(void) {
  if (!g.resolved) {
    g.resolved = 1;
    void *next = dlsym(RTLD_NEXT, "_sym_push_path_constraint");
    if (next != (void *)&_sym_push_path_constraint) g.real = (push_fn)next;
  }
  return g.real != NULL;
}

static int output_fd(void) {
  if (g.output_fd >= 0 || g.output_failed) return g.output_fd;
  int fd = open(g.output_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    g.output_failed = 1;
    return -1;
  }
  /* Keep the low fd numbers the program would otherwise get (some targets assume them). */
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 900);
  if (high >= 0) {
    close(fd);
    fd = high;
  }
  g.output_fd = fd;
  return fd;
}

/* After a solving call: attributes every new NNNNNN file to (opposite, site). -1 = unknown. */
static int attribute_outputs(uint64_t opposite, uint64_t site) {
  int fd = output_fd();
  if (fd < 0) return -1;
  int found = 0;
  char name[32];
  for (;;) {
    /* QSYM names an answer found by solving the branch alone ("optimistic": unsat under the
     * path) NNNNNN-optimistic; both kinds advance its counter. */
    uint8_t optimistic = 0;
    snprintf(name, sizeof name, "%06" PRIu32, g.next_file);
    if (faccessat(fd, name, F_OK, 0) != 0) {
      snprintf(name, sizeof name, "%06" PRIu32 "-optimistic", g.next_file);
      if (faccessat(fd, name, F_OK, 0) != 0) break;
      optimistic = 1;
    }
    if (g.generated_row_count < MAX_GENERATED_ROWS) {
      struct generated_row *row = &g.generated_rows[g.generated_row_count++];
      row->file_index = g.next_file;
      row->child = 0;
      row->optimistic = optimistic;
      row->opposite = opposite;
      row->site = site;
    } else {
      g.generated_by_dropped++;
    }
    g.next_file++;
    g.generated++;
    found++;
  }
  return found;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* CPU of this process (all threads) so far. */
static uint64_t cpu_now_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* CPU all answers of this run used so far, forked or in place: what the answer budget limits. */
static uint64_t answer_cpu_ns(void) { return g.child_cpu_ns + g.in_place_cpu_ns; }

static const char *status_name(enum status status) {
  switch (status) {
    case STATUS_SAT: return "sat";
    case STATUS_UNSAT: return "unsat";
    case STATUS_UNKNOWN: return "unknown";
    default: return "none";
  }
}

static const char *mode_name(enum mode mode) {
  switch (mode) {
    case MODE_TRACE: return "trace";
    case MODE_DIRECTED: return "directed";
    default: return "untargeted";
  }
}

static uint64_t rusage_us(int who) {
  struct rusage usage;
  if (getrusage(who, &usage) != 0) return 0;
  return ((uint64_t)usage.ru_utime.tv_sec + (uint64_t)usage.ru_stime.tv_sec) * 1000000ULL + (uint64_t)usage.ru_utime.tv_usec +
         (uint64_t)usage.ru_stime.tv_usec;
}

static void write_json(FILE *f) {
  /* The run's CPU so far: this process and every child it reaped (forked answers included). */
  const uint64_t cpu_us = rusage_us(RUSAGE_SELF) + rusage_us(RUSAGE_CHILDREN);
  fprintf(f, "{\"schema\":\"symfence-telemetry/1\",\"targetBranch\":\"%" PRIu64 "\",\"targetReached\":%s,\"targetStatus\":\"%s\",",
          g.target, g.target_reached ? "true" : "false", status_name(g.target_status));
  fputs("\"branchTrace\":[", f);
  for (unsigned i = 0; i < g.trace_count; i++) {
    const struct trace_row *r = &g.trace[i];
    fprintf(f, "%s[\"%" PRIu64 "\",\"%" PRIu64 "\",\"%" PRIu64 "\",\"%" PRIu64 "\",%u,%u]", i ? "," : "", r->parent, r->actual,
            r->opposite, r->site, r->taken, r->interesting);
  }
  fputs("],\"openBranches\":[", f);
  for (unsigned i = 0; i < g.open_count; i++) fprintf(f, "%s\"%" PRIu64 "\"", i ? "," : "", g.open[i]);
  fprintf(f,
          "],\"counters\":{\"queries\":%" PRIu64 ",\"sat\":%" PRIu64 ",\"unsat\":%" PRIu64 ",\"unknown\":%" PRIu64
          ",\"solverTimeUs\":%" PRIu64 ",\"generated\":%" PRIu64 "},",
          g.queries, g.sat, g.unsat, g.unknown, g.solver_time_ns / 1000, g.generated);
  fprintf(f,
          "\"preload\":{\"version\":1,\"mode\":\"%s\",\"events\":%" PRIu64 ",\"symbolicEvents\":%" PRIu64 ",\"solved\":%" PRIu64
          ",\"skipped\":%" PRIu64 ",\"traceDropped\":%" PRIu64 ",\"openDropped\":%" PRIu64 ",\"generatedByDropped\":%" PRIu64
          ",\"earlyExit\":%s,\"context\":%u,\"qsym\":%s,\"fork\":%s,\"forks\":%u,\"forkFailed\":%s,\"forkCapped\":%s,\"childCpuUs\":%" PRIu64
          ",\"threadsAtFork\":%d,\"siteLookups\":%" PRIu64 ",\"wanted\":%u,\"hugeKb\":%" PRIu64 ",\"inPlace\":%u,\"negations\":%" PRIu64 ",\"interposed\":%s,\"cpuUs\":%" PRIu64,
          mode_name(g.mode), g.events, g.symbolic_events, g.solved, g.skipped, g.trace_dropped, g.open_dropped,
          g.generated_by_dropped, g.early_exited ? "true" : "false", g.context, g.qsym_one_solve ? "true" : "false",
          g.fork_enabled ? "true" : "false", g.forks, g.fork_failed ? "true" : "false", g.fork_capped ? "true" : "false",
          g.child_cpu_ns / 1000, g.threads_at_fork, g.stable_lookups, g.mode == MODE_TRACE ? g.group_count : 0, g.huge_bytes / 1024, g.in_place_answers, g.negations, g.interposed_calls > 0 || g.in_place ? "true" : "false", cpu_us);
  if (g.actions_error) fprintf(f, ",\"actionsError\":\"%s\"", g.actions_error);
  if (g.wanted_error) fprintf(f, ",\"wantedError\":\"%s\"", g.wanted_error);
  fputs("},\"answers\":[", f);
  for (unsigned i = 0; i < g.answer_count; i++) {
    const struct answer_row *r = &g.answers[i];
    fprintf(f, "%s[\"%" PRIu64 "\",\"%s\",%" PRIu64 ",%" PRIu64 ",%" PRIu32 "]", i ? "," : "", r->branch, status_name(r->status),
            r->solver_ns / 1000, r->cpu_ns / 1000, r->files);
  }
  fputs("],\"generatedBy\":[", f);
  for (unsigned i = 0; i < g.generated_row_count; i++) {
    const struct generated_row *r = &g.generated_rows[i];
    char prefix[16] = "";
    if (r->child) snprintf(prefix, sizeof prefix, "f%u-", (unsigned)r->child);
    fprintf(f, "%s[\"%s%06" PRIu32 "%s\",\"%" PRIu64 "\",\"%" PRIu64 "\"]", i ? "," : "", prefix, r->file_index, r->optimistic ? "-optimistic" : "", r->opposite, r->site);
  }
  fputs("]}\n", f);
}

/* Temp file in the target's directory, then rename: a reader sees the old state or the whole file. */
static void write_telemetry(void) {
  if (g.written || !g.telemetry_enabled || !g.real || getpid() != g.pid) return;
  g.written = 1;
  char temp[PATH_MAX + 32];
  if (snprintf(temp, sizeof temp, "%s.%ld.tmp", g.telemetry_path, (long)g.pid) >= (int)sizeof temp) return;
  FILE *f = fopen(temp, "we");
  if (!f) return;
  write_json(f);
  int failed = ferror(f);
  if (fclose(f) != 0) failed = 1;
  if (failed || rename(temp, g.telemetry_path) != 0) unlink(temp);
}

__attribute__((constructor)) static void preload_start(void) { initialise(); }

__attribute__((destructor)) static void preload_end(void) {
  initialise();
  resolve_real();
  write_telemetry();
}

static void trace_add(uint64_t parent, uint64_t actual, uint64_t opposite, uint64_t site, unsigned taken, unsigned interesting) {
  if (g.trace_count < MAX_TRACE && id_set_insert(g.trace_set, TRACE_SLOTS, actual)) {
    struct trace_row *row = &g.trace[g.trace_count++];
    row->parent = parent;
    row->actual = actual;
    row->opposite = opposite;
    row->site = site;
    row->taken = (uint8_t)taken;
    row->interesting = (uint8_t)interesting;
  } else {
    g.trace_dropped++;
  }
}

static void open_add(uint64_t opposite) {
  if (id_set_contains(g.open_set, OPEN_SLOTS, opposite)) return;
  if (g.open_count >= MAX_OPEN) {
    g.open_dropped++;
    return;
  }
  id_set_insert(g.open_set, OPEN_SLOTS, opposite);
  g.open[g.open_count++] = opposite;
}

/*
 * Site ids that do not move with ASLR. SymCC's compiler pass gives each branch a compile-time
 * constant, but its runtime's libc wrappers pass their own function address (memcmp_symbolized
 * in libSymRuntime.so), which moves with every run. An address inside a loaded
 * shared object (not the main program, whose sites are compile-time constants) becomes
 * mix(fnv1a(basename of the object)) + (address - load base). One dl_iterate_phdr walk per
 * distinct raw site, cached; beyond STABLE_LIMIT distinct sites the raw id is used unchanged.
 */
static uint64_t fnv1a64(const char *text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *text; text++) h = (h ^ (unsigned char)*text) * 0x100000001b3ULL;
  return h;
}

struct site_search {
  uint64_t address, mapped;
  int found;
};

/* dl_iterate_phdr callback: is the address inside one of this object's loaded segments? Only
 * ranges are compared (dladdr would also search the object's symbol table: ~0.1 ms a call). */
static int find_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct site_search *search = data;
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    const uint64_t start = (uint64_t)info->dlpi_addr + ph->p_vaddr;
    if (search->address < start || search->address - start >= ph->p_memsz) continue;
    search->found = 1;
    const char *name = info->dlpi_name;
    if (name == NULL || name[0] == '\0') return 1; /* the main program: its sites are compile-time constants */
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    search->mapped = nonzero(mix64(fnv1a64(base)) + (search->address - (uint64_t)info->dlpi_addr));
    return 1;
  }
  return 0;
}

static uint64_t map_site(uint64_t raw) {
  struct site_search search = { raw, raw, 0 };
  dl_iterate_phdr(find_object, &search);
  return search.mapped;
}

static uint64_t stable_site(uint64_t raw) {
  if (raw == 0) return 0;
  for (unsigned i = (unsigned)mix64(raw) & (STABLE_SLOTS - 1);; i = (i + 1) & (STABLE_SLOTS - 1)) {
    struct stable_slot *slot = &g.stable[i];
    if (slot->raw == raw) return slot->stable;
    if (slot->raw == 0) {
      if (g.stable_count >= STABLE_LIMIT) return raw;
      g.stable_lookups++;
      slot->raw = raw;
      slot->stable = map_site(raw);
      g.stable_count++;
      return slot->stable;
    }
  }
}

/* Threads of this process now (entries of /proc/self/task), -1 if it cannot be read. */
static int count_threads(void) {
  DIR *dir = opendir("/proc/self/task");
  if (!dir) return -1;
  int n = 0;
  struct dirent *entry;
  while ((entry = readdir(dir))) n += entry->d_name[0] != '.';
  closedir(dir);
  return n;
}

/* Whether all `pages` pages from `start` are resident (mincore), in chunks of a fixed vector. */
static int all_resident(uintptr_t start, size_t pages) {
  unsigned char vec[512];
  for (size_t done = 0; done < pages;) {
    const size_t n = pages - done < sizeof vec ? pages - done : sizeof vec;
    if (mincore((void *)(start + done * 4096), n * 4096, vec) != 0) return 0;
    for (size_t i = 0; i < n; i++)
      if (!(vec[i] & 1)) return 0;
    done += n;
  }
  return 1;
}

/* Huge pages before the second fork (see the header): every 2 MiB-aligned, fully resident range
 * of a private anonymous read-write mapping (no file; the heap included) is collapsed into a
 * transparent huge page. Reads /proc/self/maps once, with a fixed buffer and no allocation. */
static void collapse_for_fork(void) {
  if (sysconf(_SC_PAGESIZE) != 4096) return;
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[8192];
  size_t have = 0;
  for (;;) {
    ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += (size_t)n;
    buf[have] = '\0';
    char *line = buf, *nl;
    while ((nl = strchr(line, '\n'))) {
      *nl = '\0';
      unsigned long lo, hi, offset, inode;
      unsigned major, minor;
      char perms[8];
      int name_at = 0;
      if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &lo, &hi, perms, &offset, &major, &minor, &inode, &name_at) >= 7 &&
          inode == 0 && strcmp(perms, "rw-p") == 0 && (line[name_at] == '\0' || strcmp(line + name_at, "[heap]") == 0)) {
        for (uintptr_t at = (lo + HUGE_RANGE - 1) & ~(HUGE_RANGE - 1); at + HUGE_RANGE <= hi; at += HUGE_RANGE)
          if (all_resident(at, HUGE_RANGE / 4096) && madvise((void *)at, HUGE_RANGE, MADV_COLLAPSE) == 0) g.huge_bytes += HUGE_RANGE;
      }
      line = nl + 1;
    }
    /* Keep a partial last line for the next read; a line longer than the buffer is dropped. */
    have = (size_t)(buf + have - line);
    if (have >= sizeof buf - 1) have = 0;
    memmove(buf, line, have);
  }
  close(fd);
}

/* After forked answer `child` (1-based) ended: renames each file it left under QSYM's names
 * (numbered from this process's counter, which has not moved: no answer of its own precedes a fork) to
 * f<child>-<name>, so the next child's 000000 cannot collide, and attributes it. -1 = unknown. */
static int attribute_child_outputs(unsigned child, uint64_t opposite, uint64_t site) {
  int fd = output_fd();
  if (fd < 0) return -1;
  int found = 0;
  char name[32], renamed[48];
  for (uint32_t index = g.next_file;; index++) {
    uint8_t optimistic = 0;
    snprintf(name, sizeof name, "%06" PRIu32, index);
    if (faccessat(fd, name, F_OK, 0) != 0) {
      snprintf(name, sizeof name, "%06" PRIu32 "-optimistic", index);
      if (faccessat(fd, name, F_OK, 0) != 0) break;
      optimistic = 1;
    }
    snprintf(renamed, sizeof renamed, "f%u-%s", child, name);
    if (renameat(fd, name, fd, renamed) != 0) break;
    if (g.generated_row_count < MAX_GENERATED_ROWS) {
      struct generated_row *row = &g.generated_rows[g.generated_row_count++];
      row->file_index = index;
      row->child = (uint16_t)child;
      row->optimistic = optimistic;
      row->opposite = opposite;
      row->site = site;
    } else {
      g.generated_by_dropped++;
    }
    g.generated++;
    found++;
  }
  return found;
}

static void count_status(enum status status) {
  if (status == STATUS_UNKNOWN) g.unknown++;
  else if (status == STATUS_SAT) g.sat++;
  else g.unsat++;
}

/*
 * Fork at the target: the child forwards the real site id (QSYM solves on the exact path state,
 * and, never having seen a real site id before, always solves it), reports its solver time in a
 * shared page and _exit(0)s; this process waits for it, then renames and attributes its files.
 * Returns the status, or -1 when no child could be started (the caller falls back to the
 * one-solve rule).
 */
static int fork_answer(SymExpr constraint, int taken, uintptr_t raw_site, uint64_t opposite, uint64_t site) {
  if (!g.report) {
    void *page = mmap(NULL, sizeof *g.report, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return -1;
    g.report = page;
  }
  int threads = count_threads();
  if (threads > g.threads_at_fork) g.threads_at_fork = threads;
  /* Another thread may hold a lock (malloc's, the program's) the child's solving call needs: the
   * child would block forever. Such a run keeps the one-solve rule instead. */
  if (threads > 1) return -1;
  /* At the second fork: a run that reaches one group branch only never pays for the copy. */
  if (!g.huge_tried && g.forks == 1) {
    g.huge_tried = 1;
    if (g.huge_enabled && g.group_count >= HUGE_MIN_GROUP) collapse_for_fork();
  }
  g.report->done = 0;
  g.report->interposed = 0;
  g.report->solver_ns = 0;
  const uint64_t remaining_ns = g.fork_cpu_budget_ns - answer_cpu_ns();
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    g.answer_child = 1;
    /* Same process group as the run (fork keeps it), so a group kill takes the child too; the
     * parent-death signal covers a parent killed alone. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    struct rlimit cpu;
    if (getrlimit(RLIMIT_CPU, &cpu) == 0) {
      rlim_t seconds = (rlim_t)((remaining_ns + 999999999ULL) / 1000000000ULL);
      if (seconds < 1) seconds = 1;
      if (cpu.rlim_cur == RLIM_INFINITY || cpu.rlim_cur > seconds) cpu.rlim_cur = seconds;
      if (cpu.rlim_max != RLIM_INFINITY && cpu.rlim_cur > cpu.rlim_max) cpu.rlim_cur = cpu.rlim_max;
      setrlimit(RLIMIT_CPU, &cpu);
    }
    const uint64_t started = now_ns();
    g.real(constraint, taken, raw_site);
    g.report->solver_ns = now_ns() - started;
    g.report->done = 1;
    _exit(0);
  }
  g.forks++;
  int wstatus = 0;
  struct rusage usage;
  memset(&usage, 0, sizeof usage);
  while (wait4(child, &wstatus, 0, &usage) < 0 && errno == EINTR) {
  }
  const uint64_t cpu_ns = ((uint64_t)usage.ru_utime.tv_sec + (uint64_t)usage.ru_stime.tv_sec) * 1000000000ULL +
                          ((uint64_t)usage.ru_utime.tv_usec + (uint64_t)usage.ru_stime.tv_usec) * 1000ULL;
  g.child_cpu_ns += cpu_ns;
  const int completed = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0 && g.report->done;
  const uint64_t solver_ns = g.report->solver_ns;
  /* The child's call came through this library's QSYM_IS_INTERESTING: later answers can run here. */
  if (g.report->interposed && g.in_place_enabled) g.in_place = 1;
  const int files = attribute_child_outputs(g.forks, opposite, site);
  enum status status;
  if (files > 0) status = STATUS_SAT;
  else if (files < 0 || !completed || solver_ns >= SOLVER_TIMEOUT_NS) status = STATUS_UNKNOWN; /* never unsat */
  else status = STATUS_UNSAT;
  g.queries++;
  g.solved++;
  g.solver_time_ns += completed ? solver_ns : cpu_ns;
  count_status(status);
  if (g.answer_count < MAX_ANSWERS) {
    struct answer_row *row = &g.answers[g.answer_count++];
    row->branch = opposite;
    row->status = status;
    row->solver_ns = completed ? solver_ns : 0;
    row->cpu_ns = cpu_ns;
    row->files = files > 0 ? (uint32_t)files : 0;
  }
  return (int)status;
}

/*
 * In-place answer (see "In-place answers" in the header): QSYM solves this one call in this
 * process, because QSYM_IS_INTERESTING says "solve" while solving_in_place is set; then the path
 * goes on. Returns the status.
 */
static enum status answer_in_place(SymExpr constraint, int taken, uintptr_t raw_site, uint64_t opposite, uint64_t site) {
  const uint64_t cpu_before = cpu_now_ns();
  const uint64_t started = now_ns();
  g.solving_in_place = 1;
  g.real(constraint, taken, raw_site);
  g.solving_in_place = 0;
  const uint64_t took = now_ns() - started;
  const uint64_t cpu_ns = cpu_now_ns() - cpu_before;
  g.in_place_cpu_ns += cpu_ns;
  g.in_place_answers++;
  const int files = attribute_outputs(opposite, site);
  const enum status status = files < 0 ? STATUS_UNKNOWN : files > 0 ? STATUS_SAT : took >= SOLVER_TIMEOUT_NS ? STATUS_UNKNOWN : STATUS_UNSAT;
  g.queries++;
  g.solved++;
  g.solver_time_ns += took;
  count_status(status);
  if (g.answer_count < MAX_ANSWERS) {
    struct answer_row *row = &g.answers[g.answer_count++];
    row->branch = opposite;
    row->status = status;
    row->solver_ns = took;
    row->cpu_ns = cpu_ns;
    row->files = files > 0 ? (uint32_t)files : 0;
  }
  return status;
}

/*
 * QSYM's "is this branch worth solving" decision, interposed (see "In-place answers" in the
 * header). Never reached on a build whose addJcc does not call it through the PLT; then nothing
 * runs in place.
 */
EXPORT _Bool QSYM_IS_INTERESTING(void *solver, void *expr, _Bool taken, uintptr_t pc) {
  g.interposed_calls++;
  /* In place (also in a child the program itself forks, which inherits the state): "solve" for
   * the one call being answered, "no" for anything else; QSYM's own decision never runs. */
  if (g.solving_in_place) return 1;
  if (g.in_place) return 0;
  if (g.answer_child && g.report) g.report->interposed = 1;
  if (!g.interesting_resolved) {
    g.interesting_resolved = 1;
    void *next = dlsym(RTLD_NEXT, QSYM_IS_INTERESTING_NAME);
    if (next != (void *)&QSYM_IS_INTERESTING) g.real_interesting = (interesting_fn)next;
  }
  /* Without QSYM's own (not reachable on a working build): solve, as a fresh QSYM would. */
  return g.real_interesting ? g.real_interesting(solver, expr, taken, pc) : 1;
}

/* QSYM's solving step, counted (preload.negations) and forwarded unchanged. */
EXPORT void QSYM_NEGATE_PATH(void *solver, void *expr, _Bool taken) {
  g.negations++;
  if (!g.negate_resolved) {
    g.negate_resolved = 1;
    void *next = dlsym(RTLD_NEXT, QSYM_NEGATE_PATH_NAME);
    if (next != (void *)&QSYM_NEGATE_PATH) g.real_negate = (negate_fn)next;
  }
  if (g.real_negate) g.real_negate(solver, expr, taken);
}

/* Whether one more answer fits the run's caps: the CPU budget always, the fork cap for a fork. */
static int answer_allowed(int fork) {
  if ((fork && g.forks >= g.fork_max) || answer_cpu_ns() >= g.fork_cpu_budget_ns) {
    g.fork_capped = 1;
    return 0;
  }
  return 1;
}

static void finish_early(void) {
  g.early_exited = 1;
  write_telemetry();
  _exit(0);
}

EXPORT void _sym_push_path_constraint(SymExpr constraint, int taken, uintptr_t site_id) {
  initialise();
  if (!resolve_real()) return;
  g.events++;
  if (constraint == NULL) {
    g.real(constraint, taken, site_id);
    return;
  }

  const uint64_t site = stable_site((uint64_t)site_id);
  const unsigned t = taken != 0;
  const uint64_t n = g.symbolic_events++;
  uint64_t c = 0x243f6a8885a308d3ULL;
  const uint64_t window = n < g.context ? n : g.context;
  for (uint64_t i = n - window; i < n; i++) c = mix64(c ^ g.ring[i & (MAX_CONTEXT - 1)]);
  c = mix64(c ^ hit_bucket(site_hit(site)));
  const uint64_t own = token(site, t);
  const uint64_t actual = nonzero(mix64(c ^ own));
  const uint64_t opposite = nonzero(mix64(c ^ token(site, !t)));
  g.ring[n & (MAX_CONTEXT - 1)] = own;
  const uint64_t parent = g.last_actual;
  g.last_actual = actual;
  if (g.target != 0 && opposite == g.target) g.target_reached = 1;

  struct group_slot *member = NULL;
  int solve = 0, forked = 0, in_place = 0;
  switch (g.mode) {
    case MODE_UNTARGETED: solve = site != 0; break;
    case MODE_TRACE:
      /* Wanted branches: on QSYM forked until in-place answers are proven, then in place; solved in
       * place on other runtimes; ignored with forking off on QSYM (a solving call there would make
       * the rest of the trace solve). */
      if (g.group_count > 0 && site != 0 && (member = group_find(opposite)) && !member->solved && !g.fork_failed &&
          (g.fork_enabled || !g.qsym_one_solve)) {
        if (!g.fork_enabled) solve = 1;
        else if (answer_allowed(!g.in_place)) in_place = g.in_place, forked = !g.in_place;
      }
      break;
    default:
      member = group_find(opposite);
      solve = member && !member->solved && site != 0;
      if (solve && g.fork_enabled && !g.fork_failed) {
        solve = 0;
        /* The last open branch of a group whose answer ends the run (early exit) needs no fork:
         * nothing is forwarded after it, so no later call can inherit its verdict. */
        const int last = g.in_place_enabled && g.early_exit_enabled && g.group_solved + 1 == g.group_count;
        if (answer_allowed(!(g.in_place || last))) {
          in_place = g.in_place || last;
          forked = !in_place;
        }
      }
      break;
  }

  if (forked) {
    const int status = fork_answer(constraint, taken, site_id, opposite, site);
    if (status < 0) {
      /* No child: the rest of the group falls back to the one-solve rule (reported). */
      g.fork_failed = 1;
      forked = 0;
      solve = g.mode == MODE_DIRECTED;
    } else {
      if (g.target_in_group && opposite == g.target) g.target_status = (enum status)status;
      member->solved = 1;
      g.group_solved++;
      /* This process passes the event on with site id 0: while it forks it never solves, so it never inherits. */
      g.real(constraint, taken, 0);
    }
  }
  if (in_place) {
    const enum status status = answer_in_place(constraint, taken, site_id, opposite, site);
    if (g.target_in_group && opposite == g.target) g.target_status = status;
    member->solved = 1;
    g.group_solved++;
  } else if (forked) {
    /* handled above */
  } else if (solve) {
    const uint64_t started = now_ns();
    g.real(constraint, taken, site_id);
    const uint64_t took = now_ns() - started;
    g.solver_time_ns += took;
    g.queries++;
    g.solved++;
    const int files = attribute_outputs(opposite, site);
    enum status status = files < 0 ? STATUS_UNKNOWN : files > 0 ? STATUS_SAT : took >= SOLVER_TIMEOUT_NS ? STATUS_UNKNOWN : STATUS_UNSAT;
    count_status(status);
    if (g.target_in_group && opposite == g.target) g.target_status = status;
    if (member) {
      member->solved = 1;
      g.group_solved++;
    }
  } else {
    g.real(constraint, taken, 0);
    g.skipped++;
    if (!(member && member->solved)) open_add(opposite);
  }
  trace_add(parent, actual, opposite, site, t, (unsigned)(solve || forked || in_place));

  if (g.mode != MODE_DIRECTED || !member || !(solve || forked || in_place)) return;
  /* On QSYM without a child a directed run ends after its first solving call (see "QSYM's
   * inherited verdict" in the header): any later site-0 event would inherit that call's verdict. */
  if (solve && g.qsym_one_solve) finish_early();
  if (g.early_exit_enabled && g.group_solved == g.group_count) finish_early();
}
