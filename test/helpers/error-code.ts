/** The `code` of what `call` throws, or undefined when it returns. Tests assert on codes, not messages. */
export function codeOf(call: () => unknown): string | undefined {
  try {
    call();
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
}

/** The `code` `promise` rejects with, or undefined when it resolves. */
export async function codeOfAsync(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
}
