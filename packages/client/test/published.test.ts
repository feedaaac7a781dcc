import { describe, expect, it } from 'vitest';
import * as index from '../src/index.js';
import * as server from '../src/server.js';

/** What `scripts/build.mjs` publishes (bundled, `_` members shortened) against the sources the other tests use. */
describe('the published files', () => {
  const published = async (file: string) =>
    (await import(new URL(`../dist/${file}`, import.meta.url).href)) as Record<string, unknown>;

  it.each([
    ['index.js', index],
    ['server.js', server],
  ])('dist/%s exports what its source exports', async (file, source) => {
    expect(Object.keys(await published(file)).sort()).toEqual(Object.keys(source).sort());
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
