#!/usr/bin/env node
// Copies non-TypeScript assets (e.g. Lua scripts) from a source tree to a build tree, keeping paths.
// Usage: node scripts/copy-assets.mjs <from> <to> <extension>...
import { cpSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';

const [from, to, ...extensions] = process.argv.slice(2);
if (!from || !to || extensions.length === 0) {
  console.error('usage: copy-assets.mjs <from> <to> <extension>...');
  process.exit(2);
}
for (const entry of readdirSync(from, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !extensions.some((ext) => entry.name.endsWith(ext))) continue;
  const source = join(entry.parentPath, entry.name);
  cpSync(source, join(to, relative(from, source)));
}
