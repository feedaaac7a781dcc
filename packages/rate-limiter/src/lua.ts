import { readFileSync } from 'node:fs';

/** Reads a Lua file that ships beside this module (in `src/` and, after the build, in `dist/`). */
function readBeside(fileName: string): string {
  return readFileSync(new URL(`./${fileName}`, import.meta.url), 'utf8');
}

const DIRECTIVE = /^\s*--#/;
const INCLUDE = /^(\s*)--#include\s+([\w-]+\.lua)\s*$/;
const PARAMETER = /^\s*--#\s+([A-Za-z]\w*)\s*=\s*(.*?)\s*$/;
const PLACEHOLDER = /\$([A-Za-z]\w*)/g;
/** A fragment may include another; deeper than this is a cycle. */
const MAX_DEPTH = 8;

type Read = (fileName: string) => string;

/**
 * A script's source as Redis gets it: every `--#include <name>.lua` line replaced by the fragment
 * `fragments/<name>.lua`, itself expanded the same way. The `--#   <param> = <value>` lines right after
 * an include line give the fragment's `$param` placeholders their text (`--#   key = KEYS[i]`); the
 * fragment's opening comment lines (its header) are left out and each of its lines takes the include
 * line's indentation. It is text put in place before `SCRIPT LOAD`, so the code Redis runs is the code
 * written out: no function call, table or loop per fragment.
 *
 * @throws Error naming the file and line, for a placeholder without a value, a value no placeholder
 *   uses, a `--#` line that is neither an include nor a parameter after one, a `$` left in the result,
 *   or includes nested deeper than 8.
 * @example
 * ```ts
 * const lua = expandLua('gcra-1.lua', (file) => readFileSync(join(dir, file), 'utf8'));
 * ```
 */
export function expandLua(fileName: string, read: Read): string {
  const lines = expand(read(fileName).split('\n'), fileName, read, 0);
  const left = lines.findIndex((line) => /\$[A-Za-z]/.test(line));
  if (left !== -1) throw new Error(`${fileName}: "${lines[left]?.trim()}" keeps a $placeholder`);
  return lines.join('\n');
}

function expand(lines: string[], fileName: string, read: Read, depth: number): string[] {
  if (depth > MAX_DEPTH) throw new Error(`${fileName}: includes nested deeper than ${MAX_DEPTH}`);
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (!DIRECTIVE.test(line)) {
      out.push(line);
      continue;
    }
    const include = INCLUDE.exec(line);
    if (include === null) {
      throw new Error(
        `${fileName}:${i + 1}: "${line.trim()}" is neither --#include <name>.lua nor a parameter of one`,
      );
    }
    const [, indent = '', fragment = ''] = include;
    const where = `${fileName}:${i + 1}`;
    const values = new Map<string, string>();
    for (let p = PARAMETER.exec(lines[i + 1] ?? ''); p !== null; p = PARAMETER.exec(lines[i + 1] ?? '')) {
      values.set(p[1] ?? '', p[2] ?? '');
      i++;
    }
    const path = `fragments/${fragment}`;
    const body = fill(fragmentBody(read(path)), values, where);
    for (const bodyLine of expand(body, path, read, depth + 1)) {
      out.push(bodyLine === '' ? '' : indent + bodyLine);
    }
  }
  return out;
}

/** A fragment's lines after its opening comment lines (its header), without trailing empty lines. */
function fragmentBody(source: string): string[] {
  const lines = source.split('\n');
  let start = 0;
  while (start < lines.length && /^--(?!#)/.test(lines[start] ?? '')) start++;
  let end = lines.length;
  while (end > start && (lines[end - 1] ?? '').trim() === '') end--;
  return lines.slice(start, end);
}

/** Puts each `$name`'s value in place; every placeholder needs a value and every value a placeholder. */
function fill(lines: string[], values: Map<string, string>, where: string): string[] {
  const used = new Set<string>();
  const filled = lines.map((line) =>
    line
      .replace(PLACEHOLDER, (_, name: string) => {
        const value = values.get(name);
        if (value === undefined) throw new Error(`${where}: the fragment needs --#   ${name} = <value>`);
        used.add(name);
        return value;
      })
      .trimEnd(),
  );
  for (const name of values.keys()) {
    if (!used.has(name)) throw new Error(`${where}: the fragment has no $${name}`);
  }
  return filled;
}

/** Reads a Lua script that ships beside this module, its includes expanded ({@link expandLua}). */
export function loadLua(fileName: string): string {
  return expandLua(fileName, readBeside);
}
