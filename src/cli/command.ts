/** The shape of one CLI command; main.ts dispatches to these. */
import type { CheckpointUse } from './checkpoint-dir.ts';

export interface CommandIO {
  out(text: string): void;
  err(text: string): void;
}
export type OptionSpec = {
  type: 'string' | 'boolean';
  help: string;
  default?: string | boolean;
  /** A checkpoint folder option: main.ts resolves it first (a Hub id from the local cache, a parent folder refused). */
  checkpoint?: CheckpointUse;
};
export interface Command {
  name: string;
  summary: string;
  usage: string;
  options: Record<string, OptionSpec>;
  /** The words the command takes before or among its options, by name (compare-traces: REF CAND); none if absent. */
  positionals?: string[];
  run(
    args: { values: Record<string, string | boolean | undefined>; positionals: string[] },
    io: CommandIO,
  ): Promise<number>;
}
