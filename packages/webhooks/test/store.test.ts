import { randomId, testRedis } from '@herald/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { WebhookStore } from '../src/index.js';

const redis = testRedis();
afterAll(() => redis.disconnect());

describe('webhook store: writes racing a delete', () => {
  it('a rotation, success, failure or resume that races a delete never leaves part of a webhook behind', async () => {
    const store = new WebhookStore(redis, `${randomId('wh')}:`);
    const tenantId = randomId('tenant');
    for (let round = 0; round < 40; round++) {
      await store.set(tenantId, { url: 'https://hooks.example.com/in' });
      await Promise.all([
        ...Array.from({ length: 6 }, () => store.rotate(tenantId)),
        store.succeeded(tenantId),
        store.failed(tenantId, 'boom', 1),
        store.resume(tenantId, async (held) => held.length),
        store.delete(tenantId),
        ...Array.from({ length: 3 }, () => store.rotate(tenantId)),
      ]);
      // Deleted: nothing of it is left, so that the next PUT creates it (201) and shows its secret.
      expect(await store.get(tenantId), `round ${round}`).toBeUndefined();
      expect(await store.record(tenantId), `round ${round}`).toBeUndefined();
      const created = await store.set(tenantId, { url: 'https://hooks.example.com/in' });
      expect(created.created, `round ${round}`).toBe(true);
      expect(created.webhook, `round ${round}`).toHaveProperty('secret');
      await store.delete(tenantId);
    }
  });

  it('concurrent sets each answer the webhook as their own write left it', async () => {
    const store = new WebhookStore(redis, `${randomId('wh')}:`);
    const tenantId = randomId('tenant');
    for (let round = 0; round < 10; round++) {
      const urls = Array.from({ length: 4 }, (_, i) => `https://hooks.example.com/r${round}x${i}`);
      const answers = await Promise.all(urls.map((url) => store.set(tenantId, { url })));
      for (const [i, answer] of answers.entries()) expect(answer.webhook.url, `round ${round}`).toBe(urls[i]);
      expect(answers.filter((answer) => answer.created)).toHaveLength(round === 0 ? 1 : 0);
    }
    await store.delete(tenantId);
  });
});
