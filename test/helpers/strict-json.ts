/**
 * A JSON reader that reports repeated keys. `JSON.parse` silently keeps the last of two equal keys,
 * so it cannot tell whether a log line was ambiguous; this tokenizer walks the text itself and
 * records, for every object at any depth, each key it sees more than once.
 */

export interface DuplicateKey {
  /** Path of the object holding the key, e.g. `$` or `$.shutdown` or `$.items[2]`. */
  readonly at: string;
  readonly key: string;
}

/** Parses `text` as one JSON value; throws on malformed JSON; returns every repeated key. */
export function findDuplicateKeys(text: string): DuplicateKey[] {
  const duplicates: DuplicateKey[] = [];
  let i = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at offset ${i} of ${JSON.stringify(text.slice(0, 200))}`);
  };
  const ws = (): void => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const string = (): string => {
    if (text[i] !== '"') fail('expected a string');
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    if (i >= text.length) fail('unterminated string');
    i++;
    // JSON.parse decodes escapes exactly as a consumer would compare keys.
    return JSON.parse(text.slice(start, i)) as string;
  };
  const literal = (): void => {
    const m = /^(?:-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 400));
    if (!m) fail('unexpected token');
    i += m![0].length;
  };
  const value = (at: string): void => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const seen = new Set<string>();
      ws();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        ws();
        const key = string();
        if (seen.has(key)) duplicates.push({ at, key });
        seen.add(key);
        ws();
        if (text[i] !== ':') fail('expected ":"');
        i++;
        value(`${at}.${key}`);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return;
        }
        fail('expected "," or "}"');
      }
    }
    if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (let n = 0; ; n++) {
        value(`${at}[${n}]`);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return;
        }
        fail('expected "," or "]"');
      }
    }
    if (c === '"') {
      string();
      return;
    }
    literal();
  };
  value('$');
  ws();
  if (i !== text.length) fail('trailing characters');
  return duplicates;
}
