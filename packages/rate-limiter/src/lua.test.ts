import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { expandLua } from './lua.js';
import { type Algorithm, batchScriptSource, scriptSource } from './scripts.js';

/** expandLua over files held in memory. */
function expandFrom(files: Record<string, string>, fileName = 'main-1.lua'): string {
  return expandLua(fileName, (name) => {
    const text = files[name];
    if (text === undefined) throw new Error(`no ${name}`);
    return text;
  });
}

describe('expandLua', () => {
  it('puts a fragment in place of its include line: parameters filled, header left out, indentation kept', () => {
    const lua = expandFrom({
      'main-1.lua': [
        '-- the script',
        'for i = 1, n do',
        '  --#include read.lua',
        '  --#   key = KEYS[i]',
        '  --#   onMissing = return { -2, i }',
        'end',
        '',
      ].join('\n'),
      'fragments/read.lua': [
        '-- read.lua: its header, not copied',
        '--   $key  the key',
        "local stored = redis.call('GET', $key)",
        'if not stored then',
        '  $onMissing',
        'end',
        '',
      ].join('\n'),
    });
    expect(lua).toBe(
      [
        '-- the script',
        'for i = 1, n do',
        "  local stored = redis.call('GET', KEYS[i])",
        '  if not stored then',
        '    return { -2, i }',
        '  end',
        'end',
        '',
      ].join('\n'),
    );
  });

  it('expands a fragment inside a fragment, parameters passed through, and an empty value', () => {
    const lua = expandFrom({
      'main-1.lua': '--#include outer.lua\n--#   key = KEYS[1]\n--#   after =\n',
      'fragments/outer.lua':
        '-- outer\nlocal a = 1\n--#include inner.lua\n--#   key = $key\nreturn a$after\n',
      'fragments/inner.lua': '-- inner\nredis.call("DEL", $key)\n',
    });
    expect(lua).toBe('local a = 1\nredis.call("DEL", KEYS[1])\nreturn a\n');
  });

  it('refuses a placeholder without a value, a value without a placeholder, and stray directives', () => {
    const fragment = { 'fragments/f.lua': '-- f\nreturn $x\n' };
    expect(() => expandFrom({ ...fragment, 'main-1.lua': '--#include f.lua\n' })).toThrow(
      'main-1.lua:1: the fragment needs --#   x = <value>',
    );
    expect(() =>
      expandFrom({ ...fragment, 'main-1.lua': '--#include f.lua\n--#   x = 1\n--#   y = 2\n' }),
    ).toThrow('main-1.lua:1: the fragment has no $y');
    expect(() => expandFrom({ ...fragment, 'main-1.lua': 'local a\n--#   x = 1\n' })).toThrow(
      'main-1.lua:2: "--#   x = 1" is neither --#include <name>.lua nor a parameter of one',
    );
    expect(() => expandFrom({ ...fragment, 'main-1.lua': '--#include f.lua extra\n' })).toThrow(
      'main-1.lua:1: "--#include f.lua extra" is neither',
    );
    expect(() => expandFrom({ 'main-1.lua': 'return $x\n' })).toThrow('"return $x" keeps a $placeholder');
  });

  it('refuses an include cycle', () => {
    expect(() =>
      expandFrom({ 'main-1.lua': '--#include a.lua\n', 'fragments/a.lua': '-- a\n--#include a.lua\n' }),
    ).toThrow('includes nested deeper than 8');
  });
});

describe('the shipped scripts', () => {
  const algorithms: Algorithm[] = ['token-bucket', 'gcra', 'fixed-window', 'sliding-window'];
  const sources = algorithms.flatMap((algorithm) => [
    scriptSource(algorithm),
    scriptSource(algorithm, 1),
    batchScriptSource(algorithm) ?? '',
  ]);

  it('reach Redis fully expanded, each opening with its header', () => {
    for (const source of sources.filter((s) => s !== '')) {
      expect(source.startsWith('--[[\n')).toBe(true);
      expect(source).not.toMatch(/^\s*--#|\$[A-Za-z]/m);
    }
  });

  it('use every fragment in src/fragments', () => {
    const fragments = readdirSync(new URL('./fragments', import.meta.url)).filter((f) => f.endsWith('.lua'));
    expect(fragments.length).toBeGreaterThan(0);
    const scripts = readdirSync(new URL('.', import.meta.url)).filter((f) => /-(\d+|n|m)\.lua$/.test(f));
    const included = new Set<string>();
    const read = (name: string) => {
      const match = /^fragments\/(.+)$/.exec(name);
      if (match?.[1] !== undefined) included.add(match[1]);
      return readFileSync(new URL(`./${name}`, import.meta.url), 'utf8');
    };
    for (const script of scripts) expandLua(script, read);
    expect([...included].sort()).toEqual(fragments.sort());
  });
});
