/**
 * Subcommand registry. A command module exports a `register(program, io)` function and is listed
 * here; `symfence --help` shows them in this order.
 */
import type { Command } from 'commander';
import type { CliIo } from '../program.js';
import { register as registerLeases } from './leases.js';

export type RegisterCommand = (program: Command, io: CliIo) => void;

export const COMMANDS: readonly RegisterCommand[] = [registerLeases];
