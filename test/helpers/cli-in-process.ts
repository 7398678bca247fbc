import { runCli } from '../../src/cli/program.js';

/** Runs the CLI in this process and captures what it printed. */
export async function runCliCaptured(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}
