/**
 * The one escaping every command applies to text from disk or from the command line before it
 * reaches a terminal (README, the paragraph on errors and exit codes): names, ids, paths and error messages.
 *
 * Escaped: C0 controls, DEL and C1 controls (ESC, CSI included) as `\n`, `\r`, `\t` or `\xNN`; the
 * Unicode characters that reorder or hide text (bidi embeddings, overrides and isolates such as
 * U+202E, the zero-width marks, the line and paragraph separators, the BOM) as `\uNNNN`; and the
 * backslash itself as `\\`, so an escape can always be told from the text. A string can thus
 * neither start a forged output line, nor send control sequences, nor display reversed. `--json`
 * output needs none of this: JSON.stringify escapes the controls, and a JSON reader is no terminal.
 */

const NAMED_ESCAPES: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t', '\\': '\\\\' };

/** Controls, DEL, C1, the backslash, and the invisible or reordering format characters. */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\\\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

export function escapeForTerminal(text: string): string {
  return text.replace(UNSAFE, (ch) => {
    const named = NAMED_ESCAPES[ch];
    if (named !== undefined) return named;
    const code = ch.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
