/**
 * The message of the error `run` throws, which must carry `code` (default `HERALD_ERR_CONFIG`, a
 * configuration refusal); fails when `run` returns, or throws an error without that code.
 *
 * @example
 * ```ts
 * expect(refusal(() => loadConfig({ PORT: '-1' }))).toContain('PORT must be >= 0');
 * ```
 */
export function refusal(run: () => unknown, code = 'HERALD_ERR_CONFIG'): string {
  try {
    run();
  } catch (error) {
    const got = (error as { code?: unknown }).code;
    if (got !== code)
      throw new Error(`expected an error with code ${code}, got ${String(got)}: ${String(error)}`);
    return (error as Error).message;
  }
  throw new Error(`expected an error with code ${code}, but nothing was thrown`);
}

/**
 * Fails unless `message` contains every one of `parts` (a string, or a pattern it must match), naming
 * each that is missing: for the one error in which a configuration names all of its problems.
 *
 * @example
 * ```ts
 * expectEach(refusal(() => loadConfig({ PORT: '-1' })), [/\(1 problem\)/, 'PORT must be >= 0']);
 * ```
 */
export function expectEach(message: string, parts: readonly (string | RegExp)[]): void {
  const missing = parts.filter((part) =>
    typeof part === 'string' ? !message.includes(part) : !part.test(message),
  );
  if (missing.length > 0) throw new Error(`missing ${missing.map(String).join(', ')} in:\n${message}`);
}
