/**
 * SIGINT/SIGTERM for long-running commands: the first signal asks for a clean shutdown (roll back
 * dispatches, abort solver runs, release every lease, flush stats); a second one forces exit at
 * once — the leases it leaves behind expire by TTL, which is safe, just slower for peers.
 */

export interface SignalProcess {
  on(event: 'SIGINT' | 'SIGTERM', listener: () => void): unknown;
  off(event: 'SIGINT' | 'SIGTERM', listener: () => void): unknown;
  exit(code: number): never | void;
}

const EXIT_CODE: Readonly<Record<'SIGINT' | 'SIGTERM', number>> = { SIGINT: 130, SIGTERM: 143 };

/**
 * Installs the handlers; returns a function that removes them. `notify` receives one line per
 * signal for the user (e.g. "stopping…").
 */
export function installShutdownSignals(
  stop: () => unknown,
  notify: (line: string) => void = () => {},
  proc: SignalProcess = process as unknown as SignalProcess,
): () => void {
  let received = 0;
  const handlers = (['SIGINT', 'SIGTERM'] as const).map((signal) => {
    const handler = (): void => {
      received++;
      if (received === 1) {
        notify(`symfence: ${signal} received, stopping cleanly (send it again to force exit)`);
        void Promise.resolve()
          .then(stop)
          .catch(() => {}); // the campaign's own `done` reports a failed stop
        return;
      }
      notify(`symfence: second ${signal}, exiting now; leases left behind expire by TTL`);
      proc.exit(EXIT_CODE[signal]);
    };
    proc.on(signal, handler);
    return [signal, handler] as const;
  });
  return () => {
    for (const [signal, handler] of handlers) proc.off(signal, handler);
  };
}
