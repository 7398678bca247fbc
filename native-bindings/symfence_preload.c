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
 *   SYMFENCE_TRACE_ONLY=1    trace-only mode (wins over target and actions)
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
 *
 * QSYM's inherited verdict (directed mode): QSYM gives a site-0 call the verdict of the last call
 * with a real site id (it takes it for a follow-up constraint of that branch), so after a solved
 * group branch every later event passed with site 0 would be solved too. On QSYM (detected by the
 * solver global it exports, `qsym::g_solver` = `_ZN4qsym8g_solverE`; SYMFENCE_PRELOAD_QSYM=0/1
 * forces it) a directed run therefore makes exactly one solving call — its first group branch on
 * the path — and then ends (telemetry, `_exit(0)`); the group's other branches stay open for later
 * runs. With a fresh pruning map (the coordinator leaves SYMCC_AFL_COVERAGE_MAP unset for directed
 * runs) QSYM always solves that one call: it is the first call with a real site id QSYM sees.
 * A solving call that takes QSYM's whole solver timeout (>= SOLVER_TIMEOUT_NS) and writes nothing
 * is `unknown`, not `unsat`.
 *
 * Early exit (directed mode, default on): right after the solving call that solves the last
 * unsolved group entry, telemetry is written and the process _exit(0)s: the rest of the path would
 * only be traced. An empty group never triggers it.
 *
 * Cost: fixed-size tables, open addressing, no malloc and no syscall per event except inside
 * solving calls (two clock_gettime via the vDSO, one faccessat per file plus one). Single-threaded
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
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
/* QSYM's Z3 timeout is 10 s: a solving call this long that wrote nothing timed out. */
#define SOLVER_TIMEOUT_NS 9500000000ULL

typedef void *SymExpr;
typedef void (*push_fn)(SymExpr, int, uintptr_t);

EXPORT void _sym_push_path_constraint(SymExpr constraint, int taken, uintptr_t site_id);

enum {
  MAX_TRACE = 512,
  TRACE_SLOTS = 1024, /* set of the kept rows' actual ids; load <= 1/2 */
  MAX_OPEN = 256,
  OPEN_SLOTS = 512,
  MAX_ACTIONS = 64,
  GROUP_SLOTS = 256, /* <= 65 members */
  MAX_GENERATED_ROWS = 4096,
  SITE_SLOTS = 16384,
  SITE_LIMIT = SITE_SLOTS / 4 * 3,
  MAX_CONTEXT = 16, /* ring size, a power of two */
  DEFAULT_CONTEXT = 4,
};

enum mode { MODE_UNTARGETED, MODE_TRACE, MODE_DIRECTED };
enum status { STATUS_NONE, STATUS_SAT, STATUS_UNSAT, STATUS_UNKNOWN };
enum action { ACTION_SOLVE, ACTION_SAMPLE, ACTION_SKIP };

struct trace_row {
  uint64_t parent, actual, opposite, site;
  uint8_t taken, interesting;
};

struct generated_row {
  uint32_t file_index;
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

static void read_actions(const char *file) {
  FILE *f = fopen(file, "re");
  if (!f) return;
  char line[256];
  while (g.action_count < MAX_ACTIONS && fgets(line, sizeof line, f)) {
    size_t len = strlen(line);
    if (len == sizeof line - 1 && line[len - 1] != '\n') {
      /* Longer than any valid line: skip the rest of it, ignore it. */
      int c;
      while ((c = fgetc(f)) != EOF && c != '\n') {
      }
      continue;
    }
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
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    if (*p != '\0') continue;
    int seen = 0;
    for (unsigned i = 0; i < g.action_count; i++) seen |= g.actions[i].branch == branch;
    if (seen) continue;
    g.actions[g.action_count].branch = branch;
    g.actions[g.action_count].kind = kind;
    g.action_count++;
  }
  fclose(f);
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
  }
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

static void write_json(FILE *f) {
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
          ",\"earlyExit\":%s,\"context\":%u,\"qsym\":%s},",
          mode_name(g.mode), g.events, g.symbolic_events, g.solved, g.skipped, g.trace_dropped, g.open_dropped,
          g.generated_by_dropped, g.early_exited ? "true" : "false", g.context, g.qsym_one_solve ? "true" : "false");
  fputs("\"generatedBy\":[", f);
  for (unsigned i = 0; i < g.generated_row_count; i++) {
    const struct generated_row *r = &g.generated_rows[i];
    fprintf(f, "%s[\"%06" PRIu32 "%s\",\"%" PRIu64 "\",\"%" PRIu64 "\"]", i ? "," : "", r->file_index, r->optimistic ? "-optimistic" : "", r->opposite, r->site);
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

EXPORT void _sym_push_path_constraint(SymExpr constraint, int taken, uintptr_t site_id) {
  initialise();
  if (!resolve_real()) return;
  g.events++;
  if (constraint == NULL) {
    g.real(constraint, taken, site_id);
    return;
  }

  const uint64_t site = (uint64_t)site_id;
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
  int solve;
  switch (g.mode) {
    case MODE_UNTARGETED: solve = site != 0; break;
    case MODE_TRACE: solve = 0; break;
    default:
      member = group_find(opposite);
      solve = member && !member->solved && site != 0;
      break;
  }

  if (solve) {
    const uint64_t started = now_ns();
    g.real(constraint, taken, site_id);
    g.solver_time_ns += now_ns() - started;
    g.queries++;
    g.solved++;
    const uint64_t took = now_ns() - started;
    const int files = attribute_outputs(opposite, site);
    enum status status = files < 0 ? STATUS_UNKNOWN : files > 0 ? STATUS_SAT : took >= SOLVER_TIMEOUT_NS ? STATUS_UNKNOWN : STATUS_UNSAT;
    if (status == STATUS_UNKNOWN) g.unknown++;
    else if (status == STATUS_SAT) g.sat++;
    else g.unsat++;
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
  trace_add(parent, actual, opposite, site, t, (unsigned)solve);

  /* On QSYM a directed run ends after its first solving call (see "QSYM's inherited verdict" in
   * the header): any later site-0 event would inherit that call's verdict and be solved too. */
  if (solve && member && (g.qsym_one_solve || (g.early_exit_enabled && g.group_solved == g.group_count))) {
    g.early_exited = 1;
    write_telemetry();
    _exit(0);
  }
}
