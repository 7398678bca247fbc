/**
 * Subcommand registry. A command module exports a `register(program, io)` function and is listed
 * here; `symfence --help` shows them in this order.
 */
import type { Command } from 'commander';
import type { CliIo } from '../program.js';
import { register as registerDemo } from './demo.js';
import { register as registerLeases } from './leases.js';
import { register as registerReport } from './report.js';
import { register as registerRun } from './run.js';
import { register as registerStatus } from './status.js';

type RegisterCommand = (program: Command, io: CliIo) => void;

export const COMMANDS: readonly RegisterCommand[] = [registerRun, registerDemo, registerLeases, registerStatus, registerReport];
