/**
 * Options of a fenced lease table (work or target). One schema: library input, `--lease-*` flags
 * and `SYMFENCE_LEASE_*` variables resolve through it.
 */
import { defineOptionSchema, omitOptions, type ResolvedOptions } from '../config/schema.js';

export const LEASE_TABLE_OPTIONS = defineOptionSchema('lease', {
  /**
   * Where lease records live (docs/leases.md "Lease stores"). `auto`: the store an existing lease
   * directory was created with (recorded in its lease-table.json); for a new one `etcd` when
   * `etcdEndpoints` is set, else `sqlite` on a local filesystem and `files` on a network or FUSE
   * filesystem (filesystem-kind.ts). An explicit store that differs from the recorded one is
   * refused, and so is `sqlite` on a network filesystem (`ERR_LEASE_STORE_UNSUPPORTED`). `etcd`:
   * records live in an etcd cluster shared by coordinators on many hosts (docs/leases.md "The etcd
   * store"). Default `auto`.
   */
  store: {
    kind: 'enum',
    values: ['auto', 'files', 'sqlite', 'etcd'],
    default: 'auto',
    flag: 'lease-store',
    env: 'SYMFENCE_LEASE_STORE',
    description: 'where lease records live: auto (the lease directory\'s own store; new: etcd with --etcd-endpoints, else sqlite on a local filesystem, files on a network one), files, sqlite, etcd',
  },
  /**
   * etcd store: the cluster's client endpoints, `host:port` or `http(s)://host:port`, comma
   * separated. Checked (and the cluster reached) when a table opens, before any work is claimed.
   */
  etcdEndpoints: {
    kind: 'string',
    default: undefined,
    flag: 'etcd-endpoints',
    env: 'SYMFENCE_ETCD_ENDPOINTS',
    description: 'etcd store: client endpoints host:port,… of the shared etcd cluster',
  },
  /**
   * etcd store: key prefix of this campaign's tables (`<prefix>/work/…`, `<prefix>/target/…`).
   * Coordinators that share leases use the same prefix; campaigns on one cluster use different ones.
   */
  etcdPrefix: {
    kind: 'string',
    default: 'symfence',
    flag: 'etcd-prefix',
    env: 'SYMFENCE_ETCD_PREFIX',
    description: 'etcd store: key prefix shared by the coordinators of one campaign',
  },
  /** etcd store, TLS: PEM file of the CA that signed the servers' certificates (turns TLS on). */
  etcdCaFile: {
    kind: 'string',
    default: undefined,
    flag: 'etcd-ca-file',
    env: 'SYMFENCE_ETCD_CA_FILE',
    description: 'etcd store: CA certificate (PEM) for TLS to etcd',
  },
  /** etcd store, TLS client authentication: this client's certificate chain (PEM); needs `etcdKeyFile`. */
  etcdCertFile: {
    kind: 'string',
    default: undefined,
    flag: 'etcd-cert-file',
    env: 'SYMFENCE_ETCD_CERT_FILE',
    description: 'etcd store: client certificate (PEM) for TLS client authentication',
  },
  /** etcd store, TLS client authentication: this client's private key (PEM); needs `etcdCertFile`. */
  etcdKeyFile: {
    kind: 'string',
    default: undefined,
    flag: 'etcd-key-file',
    env: 'SYMFENCE_ETCD_KEY_FILE',
    description: 'etcd store: client private key (PEM) for TLS client authentication',
  },
  /**
   * etcd store, authentication: user name. The password comes from `etcdPasswordFile` or the
   * environment variable `SYMFENCE_ETCD_PASSWORD` — never from a flag, and it is never printed.
   */
  etcdUser: {
    kind: 'string',
    default: undefined,
    flag: 'etcd-user',
    env: 'SYMFENCE_ETCD_USER',
    description: 'etcd store: user name (password from --etcd-password-file, else from the environment: docs/leases.md)',
  },
  /** etcd store, authentication: file holding the password (one line; a trailing newline is dropped). */
  etcdPasswordFile: {
    kind: 'string',
    default: undefined,
    flag: 'etcd-password-file',
    env: 'SYMFENCE_ETCD_PASSWORD_FILE',
    description: 'etcd store: file holding the etcd user\'s password',
  },
  /**
   * etcd store: deadline of one request to etcd (connect, read, transaction), ms. A request past
   * it fails with ERR_ETCD_UNAVAILABLE (at open) or ERR_LEASE_IO (later); the caller retries.
   */
  etcdRequestTimeoutMs: {
    kind: 'duration',
    default: 5000,
    min: 100,
    max: 600_000,
    flag: 'etcd-timeout',
    env: 'SYMFENCE_ETCD_TIMEOUT',
    description: 'etcd store: deadline of one request to etcd',
  },
  /** Shard directories per table; fixed per root (recorded in lease-table.json). Default 256. */
  shardCount: {
    kind: 'integer',
    default: 256,
    min: 1,
    max: 65_536,
    flag: 'lease-shards',
    env: 'SYMFENCE_LEASE_SHARDS',
    description: 'shard directories per lease table (fixed per lease directory)',
  },
  /**
   * Lease lifetime without a heartbeat, ms. Stored in every record this table writes: readers
   * judge a record by its holder's TTL, not their own. Default 5 min, 1 s..24 h.
   */
  leaseTtlMs: {
    kind: 'duration',
    default: 300_000,
    min: 1000,
    max: 86_400_000,
    flag: 'lease-ttl',
    env: 'SYMFENCE_LEASE_TTL',
    description: 'lease lifetime without a heartbeat',
  },
  /**
   * How far ahead of this process's clock a record's `updatedMs` may lie (another host's clock),
   * ms. A record dated further ahead is outside the clock assumption (docs/leases.md) and counts
   * as expired, so no record blocks its target longer than `maxClockSkewMs + leaseTtlMs` (capped
   * at 24 h) from now. Default 5 min.
   */
  maxClockSkewMs: {
    kind: 'duration',
    default: 300_000,
    min: 0,
    max: 86_400_000,
    flag: 'max-clock-skew',
    env: 'SYMFENCE_MAX_CLOCK_SKEW',
    description: 'largest accepted lead of a record time over this clock (clock skew between hosts)',
  },
  /** How long to wait for a contended record lock before ERR_LOCK_TIMEOUT, ms. Default 60 s. */
  lockAcquireTimeoutMs: {
    kind: 'duration',
    default: 60_000,
    min: 1,
    max: 3_600_000,
    flag: 'lock-timeout',
    env: 'SYMFENCE_LOCK_TIMEOUT',
    description: 'wait for a contended record lock before failing',
  },
  /** Reported in lock-timeout messages only; locks are never stolen by age. Default 30 s. */
  lockAgeHintMs: {
    kind: 'duration',
    default: 30_000,
    min: 0,
    flag: 'lock-age-hint',
    env: 'SYMFENCE_LOCK_AGE_HINT',
    description: 'age hint shown in lock-timeout messages (locks are never stolen by age)',
  },
  /**
   * `multi`: several coordinators share the directory; needs the native flock addon and refuses
   * to start without it. `single`: this process is the only writer. Default `multi`.
   */
  coordination: {
    kind: 'enum',
    values: ['multi', 'single'],
    default: 'multi',
    flag: 'coordination',
    env: 'SYMFENCE_COORDINATION',
    description: 'multi: coordinators share the lease directory (needs flock); single: this process only',
  },
  /**
   * In `multi` mode, qualify the filesystem at open (fsync, replace, durable unlink, flock across
   * processes — see docs/fs-probe.md) and refuse to open on failure. Once per root per process.
   * Ignored in `single` mode. Default true.
   */
  verifyFilesystem: {
    kind: 'boolean',
    default: true,
    flag: 'verify-lease-fs',
    env: 'SYMFENCE_VERIFY_LEASE_FS',
    description: 'multi mode: run the filesystem qualification probe on the lease directory at start',
  },
  /** How a batch makes temp files durable: parallel `fsync` per file, or one `syncfs`. Default `fsync`. */
  fileBarrier: {
    kind: 'enum',
    values: ['fsync', 'syncfs'],
    default: 'fsync',
    flag: 'lease-file-barrier',
    env: 'SYMFENCE_LEASE_FILE_BARRIER',
    description: 'file barrier of a lease batch: fsync each temp file, or one syncfs',
  },
  /**
   * Lock-file descriptors kept open (unlocked) between batches, least recently used closed first;
   * a warm record then costs one `lstat` instead of open + fstat + close. 0 disables. Each counts
   * against the process's open-file limit. Default 1024.
   */
  lockFdCacheSize: {
    kind: 'integer',
    default: 1024,
    min: 0,
    max: 65_536,
    flag: 'lease-lock-fd-cache',
    env: 'SYMFENCE_LEASE_LOCK_FD_CACHE',
    description: 'lock-file fds kept open between batches (0 disables)',
  },
  /** `batched`: one directory barrier per touched shard; `scalar`: one per rename/unlink. Default `batched`. */
  directoryBarrier: {
    kind: 'enum',
    values: ['batched', 'scalar'],
    default: 'batched',
    flag: 'lease-directory-barrier',
    env: 'SYMFENCE_LEASE_DIRECTORY_BARRIER',
    description: 'directory barriers: one per touched shard (batched) or per mutation (scalar)',
  },
  /**
   * Age after which a leftover temp file (lease record or staged finding) is removed when its
   * writer cannot be asked whether it is alive: it names another host, or carries no writer tag
   * (written by an older version). Temps of this host's writers are judged by pid and process
   * start time instead, whatever their age (docs/leases.md "Leftover temp files"). A write holds
   * its temp for milliseconds; the bound only has to exceed the longest stall of a live writer on
   * another host, plus clock skew between hosts. Default 1 h, at least 1 min.
   */
  staleTempAgeMs: {
    kind: 'duration',
    default: 3_600_000,
    min: 60_000,
    max: 30 * 86_400_000,
    flag: 'stale-temp-age',
    env: 'SYMFENCE_STALE_TEMP_AGE',
    description: 'remove another host\'s (or an untagged) leftover temp file once it is this old',
  },
});

export type LeaseTableOptions = ResolvedOptions<typeof LEASE_TABLE_OPTIONS.specs>;

/**
 * The lease options of a campaign (`symfence run`/`demo` flags, `lease` in the embedding API):
 * every table option but the TTL and the coordination mode, which the campaign sets per table
 * (`--work-lease-ttl`, `--target-lease-ttl`; `multi` under a shared `--lease-dir`).
 */
export const CAMPAIGN_LEASE_OPTIONS = omitOptions(LEASE_TABLE_OPTIONS, ['leaseTtlMs', 'coordination']);

export type CampaignLeaseOptions = ResolvedOptions<typeof CAMPAIGN_LEASE_OPTIONS.specs>;

/** The lease table options that choose and reach a store: `symfence run` takes these as flags. */
const STORE_OPTION_KEYS = ['store', 'etcdEndpoints', 'etcdPrefix', 'etcdCaFile', 'etcdCertFile', 'etcdKeyFile', 'etcdUser', 'etcdPasswordFile', 'etcdRequestTimeoutMs'] as const;

/**
 * The store part of `LEASE_TABLE_OPTIONS` (the same specs, flags and variables), for commands
 * whose other lease settings come from their own options (`symfence run`: TTLs per table).
 */
export const LEASE_STORE_OPTIONS = defineOptionSchema(
  'lease',
  Object.fromEntries(STORE_OPTION_KEYS.map((key) => [key, LEASE_TABLE_OPTIONS.specs[key]])) as Pick<typeof LEASE_TABLE_OPTIONS.specs, (typeof STORE_OPTION_KEYS)[number]>,
);
