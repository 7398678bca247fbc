/**
 * What a finding is as it travels from a solver result to an AFL-visible directory: the item to
 * publish, the entry it became, and the staged bytes of a committed result. Shared by the
 * coordinator's ports, the commit staging (src/commit/) and the queue publisher (src/triage/), so
 * it sits below all three (docs/architecture.md "Layers").
 */

/** One file published into an AFL-visible directory. */
export interface PublishedEntry {
  readonly kind: 'queue' | 'crashes' | 'hangs';
  readonly path: string;
  readonly id: number;
  readonly sha256: string;
}

/** One finding to publish: bytes, or a file to copy (such as a crashing parent input). */
export interface FindingItem {
  readonly kind: PublishedEntry['kind'];
  readonly content: Uint8Array | { readonly path: string };
}

/** Publishes findings into `<afl-out>/<name>/{queue,crashes,hangs}` (see src/triage/queue-publisher.ts). */
export interface FindingSink {
  /**
   * Publishes one result's findings as the next entries of their directories, naming `parentPath`'s
   * id as their source; one durability barrier per touched directory for the whole batch. The
   * answer lists, per item and in order, the entry or `null` when that content was already
   * published there (de-duplicated by digest).
   */
  publish(items: readonly FindingItem[], parentPath: string): Promise<ReadonlyArray<PublishedEntry | null>>;
}

/** One finding of a committed result, with its bytes (generated input or crashing parent). */
export interface CommitFinding {
  readonly kind: PublishedEntry['kind'];
  readonly bytes: Uint8Array;
  /** Lowercase hex SHA-256 of `bytes`. */
  readonly sha256: string;
}
