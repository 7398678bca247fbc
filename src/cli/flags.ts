/**
 * Registers a component's option schema as commander flags, with the default and the environment
 * variable in the help text, so `--help`, the env mapping and the resolver never drift apart.
 */
import { InternalError } from '../errors.js';
import { Option, type Command } from 'commander';
import { describeDefault, type OptionSchema, type OptionSpecs } from '../config/schema.js';

export function addSchemaFlags<S extends OptionSpecs>(command: Command, schema: OptionSchema<S>): Command {
  for (const spec of Object.values(schema.specs)) {
    if (!spec.flag) continue;
    // The default is stated once, here (from the spec, or its `defaultHelp`): a description that
    // states one too would print two, and they drift apart.
    if (/\bdefault\b/i.test(spec.description)) throw new InternalError(`option --${spec.flag} of ${schema.component}: its description states a default; use defaultHelp`);
    const extras = [`default: ${describeDefault(spec)}`];
    if (spec.env) extras.push(`env: ${spec.env}`);
    const help = `${spec.description} (${extras.join('; ')})`;
    if (spec.kind === 'boolean') {
      command.addOption(new Option(`--${spec.flag}`, help));
      if (spec.default === true) command.addOption(new Option(`--no-${spec.flag}`, `disable --${spec.flag}`));
      continue;
    }
    const placeholder =
      spec.kind === 'duration' ? '<duration>' : spec.kind === 'size' ? '<size>' : spec.kind === 'enum' ? `<${spec.values.join('|')}>` : '<value>';
    command.addOption(new Option(`--${spec.flag} ${placeholder}`, help));
  }
  return command;
}
