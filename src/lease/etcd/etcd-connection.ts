/**
 * The etcd store's connection: the client (endpoints, TLS, auth, from the lease table options) and
 * the coordinator's *session* — one etcd lease, renewed by one keep-alive stream, that every
 * leased target record this process writes is attached to, and under which its leased work
 * records are written (docs/leases.md "The etcd store").
 *
 * Session contract:
 * - granted lazily, with the table's `leaseTtlMs` (rounded up to whole seconds, etcd's unit);
 * - renewed by one keep-alive every TTL/3, each with the request deadline (a failed one is sent
 *   again at once, to the next member);
 * - `safeUntilMs` (monotonic clock) is when the session could first have expired on the server:
 *   the send time of the last acknowledged grant or keep-alive plus the TTL, minus a margin of
 *   half the TTL. The server renews on receipt, after the send, so the local deadline is never
 *   later than the server's;
 * - past `safeUntilMs` the session is *lost* here, whatever the server says: its lease id is
 *   remembered as lost, `sessionsLost` counts it, listeners hear it, and the next write grants a
 *   new session. Records written under a lost session are definitely no longer this process's
 *   (etcd-backend.ts answers for them without asking the server when it cannot be reached),
 *   so the coordinator's next heartbeat — a third of the TTL later at most — aborts their solver
 *   runs before the server could have expired them.
 *
 * One connection per distinct client configuration per process (the work and target tables of an
 * I/O thread share it); `release()` drops a reference and closes the client with the last one.
 */
import { readFileSync } from 'node:fs';
import type { Etcd3, IOptions, Lease } from 'etcd3';
import { invalidOption } from '../../config/values.js';
import { EtcdUnavailableError } from '../../errors.js';
import { leaseIoError } from '../lease-io-error.js';
import type { LeaseTableOptions } from '../lease-table-options.js';

/** Environment variable holding the etcd password (when no password file is given). */
const ETCD_PASSWORD_ENV = 'SYMFENCE_ETCD_PASSWORD';

/** What of the table options the client needs (the rest stays out of the connection key). */
interface EtcdClientConfig {
  readonly endpoints: readonly string[];
  readonly caFile?: string;
  readonly certFile?: string;
  readonly keyFile?: string;
  readonly user?: string;
  readonly passwordFile?: string;
  readonly requestTimeoutMs: number;
}

const ENDPOINT = /^(?:(https?):\/\/)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/;

/** Parses `host:port[,…]` (optionally `http(s)://`); throws `ERR_INVALID_OPTION` naming the bad entry. */
export function parseEndpoints(value: string | undefined): string[] {
  if (value === undefined || value.trim() === '') throw invalidOption('etcdEndpoints', 'host:port[,host:port…] of the etcd cluster (--etcd-endpoints)', value);
  const out: string[] = [];
  for (const raw of value.split(',')) {
    const entry = raw.trim();
    const match = ENDPOINT.exec(entry);
    const port = match ? Number(match[3]) : 0;
    if (!match || port < 1 || port > 65_535) throw invalidOption('etcdEndpoints', 'host:port or http(s)://host:port entries, comma separated', entry);
    out.push(match[1] ? entry : `${match[2]}:${match[3]}`);
  }
  return out;
}

/** The client part of the table options, validated (files are read at connect, not here). */
export function etcdClientConfig(options: LeaseTableOptions): EtcdClientConfig {
  const endpoints = parseEndpoints(options.etcdEndpoints);
  if ((options.etcdCertFile === undefined) !== (options.etcdKeyFile === undefined)) {
    throw invalidOption(options.etcdCertFile === undefined ? 'etcdCertFile' : 'etcdKeyFile', 'given together with the other of --etcd-cert-file / --etcd-key-file', 'missing its pair');
  }
  if (options.etcdPasswordFile !== undefined && options.etcdUser === undefined) throw invalidOption('etcdUser', 'a user name when a password file is given', undefined);
  return {
    endpoints,
    ...(options.etcdCaFile !== undefined ? { caFile: options.etcdCaFile } : {}),
    ...(options.etcdCertFile !== undefined ? { certFile: options.etcdCertFile } : {}),
    ...(options.etcdKeyFile !== undefined ? { keyFile: options.etcdKeyFile } : {}),
    ...(options.etcdUser !== undefined ? { user: options.etcdUser } : {}),
    ...(options.etcdPasswordFile !== undefined ? { passwordFile: options.etcdPasswordFile } : {}),
    requestTimeoutMs: options.etcdRequestTimeoutMs,
  };
}

function readPem(option: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw invalidOption(option, 'a readable PEM file', `${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
}

/** The password: the file's first line, else the environment variable. Never logged. */
function readPassword(config: EtcdClientConfig): string {
  if (config.passwordFile !== undefined) {
    try {
      return readFileSync(config.passwordFile, 'utf8').replace(/\r?\n$/, '');
    } catch (error) {
      throw invalidOption('etcdPasswordFile', 'a readable file holding the password', `${config.passwordFile} (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`);
    }
  }
  const fromEnv = process.env[ETCD_PASSWORD_ENV];
  if (fromEnv === undefined) throw invalidOption('etcdPasswordFile', `a password file, or the password in ${ETCD_PASSWORD_ENV}, for etcd user ${config.user}`, undefined);
  return fromEnv;
}

/**
 * The etcd3 client options of `config` (TLS material and password read now). `sends` counts the
 * attempts the client makes of each transaction, by its request object (`EtcdConnection.sends`).
 */
function clientOptions(config: EtcdClientConfig, sends?: WeakMap<object, number>): IOptions {
  const options: { -readonly [K in keyof IOptions]: IOptions[K] } = {
    hosts: config.endpoints.map((e) => (/^https?:\/\//.test(e) ? e : `${config.caFile !== undefined ? 'https' : 'http'}://${e}`)),
    dialTimeout: config.requestTimeoutMs,
    // A fresh deadline for every attempt of a unary request (see `EtcdConnection.call`).
    defaultCallOptions: (context) => {
      if (context.isStream) return {};
      if (sends !== undefined && context.service === 'KV' && context.method === 'txn') sends.set(context.params, (sends.get(context.params) ?? 0) + 1);
      return { deadline: new Date(Date.now() + config.requestTimeoutMs) };
    },
  };
  if (config.caFile !== undefined) {
    options.credentials = {
      rootCertificate: readPem('etcdCaFile', config.caFile),
      ...(config.certFile !== undefined ? { certChain: readPem('etcdCertFile', config.certFile) } : {}),
      ...(config.keyFile !== undefined ? { privateKey: readPem('etcdKeyFile', config.keyFile) } : {}),
    };
  } else if (config.certFile !== undefined) {
    throw invalidOption('etcdCaFile', 'the CA certificate (PEM) when a client certificate is given', undefined);
  }
  if (config.user !== undefined) options.auth = { username: config.user, password: readPassword(config) };
  return options;
}

/**
 * True when etcd refused a request because its backend is past its quota: the NOSPACE alarm is
 * raised and the cluster refuses every write until an operator clears it (reads go on).
 */
export function isNoSpace(error: unknown): boolean {
  return error instanceof Error && error.message.includes('database space exceeded');
}

/** What a user must do when etcd is out of space (docs/leases.md "History and compaction"). */
const NO_SPACE_REMEDY =
  'etcd is out of space (its NOSPACE alarm is raised) and refuses every write until it is cleared: compact its history, defragment each member (`etcdctl defrag`), then `etcdctl alarm disarm` (docs/leases.md "History and compaction")';

/**
 * `ERR_LEASE_IO` for a failed etcd request `cause`. When etcd is out of space the message says what
 * to do about it and `details.etcdAlarm` is `NOSPACE`.
 */
export function etcdIoError(message: string, details: Readonly<Record<string, unknown>>, cause: unknown): ReturnType<typeof leaseIoError> {
  return leaseIoError(withRemedy(message, cause), withAlarm(details, cause), cause);
}

/** `message`, and what to do about it when `cause` is etcd's refusal for want of space. */
export function withRemedy(message: string, cause: unknown): string {
  return isNoSpace(cause) ? `${message}. ${NO_SPACE_REMEDY}` : message;
}

/** `details`, with `etcdAlarm: 'NOSPACE'` when `cause` is etcd's refusal for want of space. */
export function withAlarm(details: Readonly<Record<string, unknown>>, cause: unknown): Readonly<Record<string, unknown>> {
  return isNoSpace(cause) ? { ...details, etcdAlarm: 'NOSPACE' } : details;
}

/**
 * The client's fault handling: etcd3's own (each attempt of a request that failed in a way worth
 * retrying is retried, three attempts in all, and three such failures in a row stop requests to
 * that member for 5 s), except that a refusal for want of space is final. Retrying it changes
 * nothing, and counting it would stop every request to the member for 5 s, reads too: the check
 * whether the refused write was applied could not be made, and every claim would fail, though a
 * claim refused `conflict` or `answered` writes nothing.
 */
function faultHandling(etcd3: typeof import('etcd3'), policies: typeof import('cockatiel')): NonNullable<IOptions['faultHandling']> {
  const retried = policies.handleWhen((error) => etcd3.isRecoverableError(error) && !isNoSpace(error));
  return {
    host: () => policies.circuitBreaker(retried, { halfOpenAfter: 5_000, breaker: new policies.ConsecutiveBreaker(3) }),
    global: policies.retry(retried, { maxAttempts: 3 }),
  };
}

/** Counters of one connection (shared by its tables). */
interface EtcdSessionStats {
  /** Sessions granted. */
  granted: number;
  /** Sessions given up because their keep-alive deadline passed without an acknowledgement. */
  lost: number;
}

type SessionListener = (event: { readonly leaseId: string; readonly reason: string }) => void;

interface Session {
  readonly lease: Lease;
  readonly id: string;
  readonly ttlMs: number;
  /** Monotonic ms past which the server may have expired this session. */
  safeUntilMs: number;
  /** The pending keep-alive timer (cleared when the session ends). */
  timer: NodeJS.Timeout | undefined;
  ended: boolean;
}

/** Pause before re-sending a keep-alive that failed (to the next member), ms. */
const KEEPALIVE_RETRY_MS = 100;

export class EtcdConnection {
  readonly client: Etcd3;
  readonly requestTimeoutMs: number;
  readonly stats: EtcdSessionStats = { granted: 0, lost: 0 };
  /** Lease ids of sessions given up here (records attached to them are no longer ours). */
  readonly lostLeaseIds = new Set<string>();
  readonly #listeners = new Set<SessionListener>();
  readonly #now: () => number;
  #session: Session | undefined;
  #granting: Promise<Session> | undefined;
  #refs = 0;
  #closed = false;
  readonly #key: string;
  readonly #sends: WeakMap<object, number>;

  constructor(key: string, client: Etcd3, requestTimeoutMs: number, monotonicNowMs: () => number, sends: WeakMap<object, number>) {
    this.#key = key;
    this.#sends = sends;
    this.client = client;
    this.requestTimeoutMs = requestTimeoutMs;
    this.#now = monotonicNowMs;
  }

  /**
   * Call options of a unary request. The deadline is not set here but per attempt by the client's
   * `defaultCallOptions` (clientOptions): the client tries up to three members for one request,
   * and a fixed deadline spent on a frozen member would leave none for the next.
   */
  call(): Record<string, never> {
    return {};
  }

  /**
   * How many times the client sent `request` (a transaction's request object): more than once when
   * an attempt failed on the wire and was retried. A transaction sent again may have been applied
   * the first time, and its compares then fail on its own writes (etcd-batch.ts reads them back).
   */
  sends(request: object): number {
    return this.#sends.get(request) ?? 0;
  }

  /** Call options of a one-shot stream (a keep-alive): one deadline for it. */
  streamCall(): { deadline: Date } {
    return { deadline: new Date(Date.now() + this.requestTimeoutMs) };
  }

  onSessionLost(listener: SessionListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * The live session's lease id for a record written now, granting one if there is none (or the
   * last was lost). `ttlMs` is used for a new grant only.
   */
  async sessionLeaseId(ttlMs: number): Promise<string> {
    const live = this.liveSession();
    if (live) return live.id;
    this.#granting ??= this.grant(ttlMs).finally(() => {
      this.#granting = undefined;
    });
    return (await this.#granting).id;
  }

  /** The current session if its local deadline has not passed (declares it lost otherwise). */
  liveSession(): { id: string; safeUntilMs: number } | undefined {
    const session = this.#session;
    if (!session) return undefined;
    if (this.#now() >= session.safeUntilMs) {
      this.loseSession(session, 'keep-alive deadline passed without an acknowledgement');
      return undefined;
    }
    return session;
  }

  /** True when `leaseId` belongs to a session this process has given up (checked now). */
  isLostLease(leaseId: string): boolean {
    this.liveSession();
    return this.lostLeaseIds.has(leaseId);
  }

  private async grant(ttlMs: number): Promise<Session> {
    const ttlS = Math.max(1, Math.ceil(ttlMs / 1000));
    const sentMs = this.#now();
    // Keep-alives are sent one at a time, each with the request deadline, rather than on the
    // client's long-lived stream: a stream to a frozen member only fails after a whole TTL,
    // while a single keep-alive fails after `requestTimeoutMs` and the next goes to another member.
    const lease = this.client.lease(ttlS, { autoKeepAlive: false });
    let id: string;
    try {
      id = await lease.grant();
    } catch (error) {
      lease.release();
      throw error;
    }
    const marginMs = (ttlS * 1000) / 2;
    const session: Session = { lease, id, ttlMs: ttlS * 1000, safeUntilMs: sentMs + ttlS * 1000 - marginMs, timer: undefined, ended: false };
    const intervalMs = (ttlS * 1000) / 3;
    const schedule = (delayMs: number): void => {
      if (session.ended) return;
      session.timer = setTimeout(() => void keepAlive(), delayMs);
      // The keep-alive alone never keeps a process running.
      session.timer.unref();
    };
    const keepAlive = async (): Promise<void> => {
      const sent = this.#now();
      try {
        await lease.keepaliveOnce(this.streamCall());
        session.safeUntilMs = Math.max(session.safeUntilMs, sent + session.ttlMs - marginMs);
        schedule(intervalMs);
      } catch {
        // An expired lease is reported by the 'lost' event; anything else is retried at once.
        schedule(Math.min(intervalMs, KEEPALIVE_RETRY_MS));
      }
    };
    lease.on('lost', () => this.loseSession(session, 'etcd reports the session lease expired'));
    schedule(intervalMs);
    this.stats.granted++;
    this.#session = session;
    return session;
  }

  private loseSession(session: Session, reason: string): void {
    if (this.#session === session) this.#session = undefined;
    if (this.lostLeaseIds.has(session.id)) return;
    this.lostLeaseIds.add(session.id);
    this.stats.lost++;
    endSession(session);
    // Best effort: let the server drop the records now rather than at its own expiry.
    this.client.leaseClient.leaseRevoke({ ID: session.id }, this.call()).catch(() => undefined);
    for (const listener of this.#listeners) {
      try {
        listener({ leaseId: session.id, reason });
      } catch {
        // a listener's failure must not stop the others
      }
    }
  }

  retain(): this {
    this.#refs++;
    return this;
  }

  /** Drops one reference; the last one revokes the session (its records go at once) and closes. */
  async release(): Promise<void> {
    if (this.#closed || --this.#refs > 0) return;
    this.#closed = true;
    connections.delete(this.#key);
    const session = this.#session;
    this.#session = undefined;
    if (session) {
      endSession(session);
      await this.client.leaseClient.leaseRevoke({ ID: session.id }, this.call()).catch(() => undefined); // best effort: the session lease expires on the server by itself
    }
    this.client.close();
  }
}

function endSession(session: Session): void {
  session.ended = true;
  clearTimeout(session.timer);
  session.lease.release();
}

/**
 * Attempts of each request made while a table opens, each with a fresh deadline: a cold channel
 * on a loaded host can spend a whole deadline connecting, and a coordinator should not refuse to
 * start for that. A cluster that does not answer fails in at most this many timeouts.
 */
export const OPEN_ATTEMPTS = 3;

/** Runs `send` up to `attempts` times (each call builds its own deadline); the last failure rejects. */
export async function withFreshDeadlines<T>(attempts: number, send: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (error) {
      if (attempt >= attempts) throw error;
    }
  }
}

const connections = new Map<string, Promise<EtcdConnection>>();

/**
 * The process's connection for `config` (new or shared), checked by one request within the
 * deadline: unreachable endpoints, refused TLS or auth reject with `ERR_ETCD_UNAVAILABLE` naming
 * the endpoints (never the password).
 */
export async function connectEtcd(config: EtcdClientConfig, monotonicNowMs: () => number = () => performance.now()): Promise<EtcdConnection> {
  const key = JSON.stringify(config);
  const existing = connections.get(key);
  if (existing) return (await existing).retain();
  const opening = openConnection(key, config, monotonicNowMs);
  connections.set(key, opening);
  opening.catch(() => connections.delete(key));
  return opening;
}

async function openConnection(key: string, config: EtcdClientConfig, monotonicNowMs: () => number): Promise<EtcdConnection> {
  // Loaded on the first connection only: the client and its protobuf definitions cost about
  // 0.3 s of start-up, which every process that never speaks to etcd (each CLI command, each
  // campaign on files or SQLite, its I/O thread) would otherwise pay.
  const etcd3 = await import('etcd3');
  const sends = new WeakMap<object, number>();
  const client = new etcd3.Etcd3({ ...clientOptions(config, sends), faultHandling: faultHandling(etcd3, await import('cockatiel')) });
  const connection = new EtcdConnection(key, client, config.requestTimeoutMs, monotonicNowMs, sends).retain();
  try {
    await withFreshDeadlines(OPEN_ATTEMPTS, () => client.maintenance.status(connection.call()));
  } catch (error) {
    client.close();
    throw new EtcdUnavailableError(`cannot reach etcd at ${config.endpoints.join(',')} in ${OPEN_ATTEMPTS} attempts of ${config.requestTimeoutMs} ms: ${(error as Error).message}`, {
      endpoints: config.endpoints,
      tls: config.caFile !== undefined,
      user: config.user,
    });
  }
  return connection;
}
