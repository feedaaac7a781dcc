import { readFileSync } from 'node:fs';

/** Reads a Lua script that ships beside this module (in `src/` and, after the build, in `dist/`). */
export function loadLua(fileName: string): string {
  return readFileSync(new URL(`./${fileName}`, import.meta.url), 'utf8');
}
