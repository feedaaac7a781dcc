import { describe, expect, it } from 'vitest';
import * as index from '../src/index.js';
import * as pushMessage from '../src/push-message.js';
import * as server from '../src/server.js';

/** What `scripts/build.mjs` publishes (bundled, `_` members shortened) against the sources the other tests use. */
describe('the published files', () => {
  const published = async (file: string) =>
    (await import(new URL(`../dist/${file}`, import.meta.url).href)) as Record<string, unknown>;

  it.each([
    ['index.js', index],
    ['server.js', server],
    ['push-message.js', pushMessage],
  ])('dist/%s exports what its source exports', async (file, source) => {
    expect(Object.keys(await published(file)).sort()).toEqual(Object.keys(source).sort());
  });

  it('dist/push-message.js carries no Socket.IO, nor does anything it imports', async () => {
    const { readFileSync } = await import('node:fs');
    const read = (file: string) => readFileSync(new URL(`../dist/${file}`, import.meta.url), 'utf8');
    const files = ['push-message.js'];
    for (const file of files)
      for (const [, imported] of read(file).matchAll(/from\s+['"]\.\/([^'"]+)['"]/g))
        if (imported && !files.includes(imported)) files.push(imported);
    for (const file of files) expect(read(file), file).not.toMatch(/socket\.io|engine\.io/);
  });

  it("a client's state keeps its names", async () => {
    const { createHeraldClient } = (await published('index.js')) as unknown as typeof index;
    const options = {
      url: 'http://127.0.0.1:9',
      getToken: () => new Promise<string>(() => {}),
      tabs: false,
      page: null,
    };
    const built = createHeraldClient(options);
    const source = index.createHeraldClient(options);
    try {
      expect(Object.keys(built.getState()).sort()).toEqual(Object.keys(source.getState()).sort());
    } finally {
      built.close();
      source.close();
    }
  });
});
