import { afterAll, describe, expect, it } from 'vitest';
import { auth, testAppForFile } from './helpers.js';

const ADMIN_KEY = 'admin-key-0123456789abcdef0123456789abcdef';
const admin = { authorization: `Bearer ${ADMIN_KEY}` };

// The production default: private addresses refused (HERALD_WEBHOOK_ALLOW_PRIVATE unset, no dev mode).
const app = await testAppForFile({ HERALD_ADMIN_KEY: ADMIN_KEY });
// Before the dispose testAppForFile registered (after hooks run last registered first).
afterAll(async () => {
  await app.inject({ method: 'DELETE', url: '/webhook', headers: auth });
});

const put = (payload: unknown, headers: Record<string, string> = auth, url = '/webhook') =>
  app.inject({ method: 'PUT', url, headers, payload: payload as object });

describe('webhook routes: bad input is a 4xx naming the field', () => {
  it('refuses URLs that are not absolute http(s), with credentials or a fragment (400 VALIDATION, body.url)', async () => {
    for (const url of [
      'not a url',
      'ftp://example.com/hook',
      'https://user:pw@example.com/',
      'https://example.com/#x',
      '',
      // Control characters: the URL parser drops them, the stored (and echoed) URL would keep them.
      'https://example.com\u0000',
      'https://example.com/hook\r\nX-Injected: 1',
    ]) {
      const answer = await put({ url });
      expect(answer.statusCode, url).toBe(400);
      expect(answer.json(), url).toMatchObject({ code: 'HERALD_ERR_VALIDATION' });
      expect(JSON.stringify(answer.json().details), url).toContain('body.url');
    }
  });

  it('refuses loopback and private addresses by default (400 WEBHOOK_URL_REFUSED), for the operator too', async () => {
    for (const url of [
      'http://127.0.0.1:8080/hook',
      'http://localhost/hook',
      'http://[::1]/',
      'http://169.254.169.254/latest/meta-data',
      'http://10.0.0.5/',
      // IPv6 forms that carry a private IPv4: NAT64, IPv4-compatible, 6to4 (127.0.0.1, 169.254.169.254).
      'http://[64:ff9b::7f00:1]:47110/hook',
      'http://[::127.0.0.1]:47110/',
      'http://[2002:7f00:1::]/',
      'http://[2002:a9fe:a9fe::]/latest/meta-data',
      'http://[fd00::1]/',
    ]) {
      for (const [headers, path] of [
        [auth, '/webhook'],
        [admin, '/admin/tenants/acme/webhook'],
      ] as const) {
        const answer = await put({ url }, headers, path);
        expect(answer.statusCode, url).toBe(400);
        expect(answer.json(), url).toMatchObject({
          code: 'HERALD_ERR_WEBHOOK_URL_REFUSED',
          details: [{ field: 'body.url' }],
        });
        expect(answer.json().error).toContain('HERALD_WEBHOOK_ALLOW_PRIVATE');
      }
    }
  });

  it('refuses unknown events, duplicates, an empty list and unknown fields', async () => {
    for (const body of [
      { url: 'https://example.com/h', events: ['notification.opened'] },
      { url: 'https://example.com/h', events: ['notification.read', 'notification.read'] },
      { url: 'https://example.com/h', events: [] },
      { url: 'https://example.com/h', secret: 'whsec_mine' },
      { events: ['notification.read'] },
    ]) {
      const answer = await put(body);
      expect(answer.statusCode, JSON.stringify(body)).toBe(400);
      expect(answer.json()).toMatchObject({ code: 'HERALD_ERR_VALIDATION' });
    }
    expect(
      (await put({ url: 'https://example.com/h' }, admin, '/admin/tenants/no%2Fslash/webhook')).statusCode,
    ).toBe(400);
  });

  it('accepts a public URL: 201 with the secret once, then 200 without it; 404 and 409 where nothing fits', async () => {
    expect((await app.inject({ method: 'GET', url: '/webhook', headers: auth })).statusCode).toBe(404);
    expect(
      (await app.inject({ method: 'POST', url: '/webhook/resume', headers: auth })).json(),
    ).toMatchObject({
      code: 'HERALD_ERR_NOT_FOUND',
    });
    const created = await put({ url: 'https://example.com/herald', events: ['notification.read'] });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({
      tenantId: 'default',
      url: 'https://example.com/herald',
      events: ['notification.read'],
      state: 'active',
      consecutiveFailures: 0,
      held: 0,
    });
    expect(created.json().secret).toMatch(/^whsec_/);
    const updated = await put({ url: 'https://example.com/herald-2' });
    expect(updated.statusCode).toBe(200);
    expect(updated.json()).not.toHaveProperty('secret');
    expect(updated.json().events).toHaveLength(4);
    const resume = await app.inject({ method: 'POST', url: '/webhook/resume', headers: auth });
    expect(resume.statusCode).toBe(409);
    expect(resume.json()).toMatchObject({ code: 'HERALD_ERR_WEBHOOK_NOT_PARKED' });
    expect(
      (await app.inject({ method: 'GET', url: '/admin/webhooks', headers: admin })).json().webhooks,
    ).toContainEqual(expect.objectContaining({ tenantId: 'default', url: 'https://example.com/herald-2' }));
    expect((await app.inject({ method: 'GET', url: '/admin/webhooks', headers: auth })).statusCode).toBe(401);
  });

  it('accepts an IPv6 form of a public IPv4 (NAT64 of 8.8.8.8); with a control character it is a 400 naming body.url', async () => {
    const answer = await put({ url: 'http://[64:ff9b::808:808]/hook' });
    expect(answer.statusCode).toBeLessThan(300);
    expect(answer.json()).toMatchObject({ url: 'http://[64:ff9b::808:808]/hook' });
    const refused = await put({ url: 'http://[64:ff9b::808:808]/hook\u0000' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({
      code: 'HERALD_ERR_VALIDATION',
      details: [{ field: 'body.url', message: expect.stringContaining('control character') }],
    });
    expect(refused.json().error).toMatch(/^body\.url /);
    expect(JSON.stringify(refused.json())).not.toContain('\\u0000');
    expect((await app.inject({ method: 'GET', url: '/webhook', headers: auth })).json().url).toBe(
      'http://[64:ff9b::808:808]/hook',
    );
  });

  it('documents every webhook route in /openapi.json', async () => {
    const document = (await app.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, Record<string, { security?: unknown; responses: Record<string, unknown> }>>;
      components: { schemas?: Record<string, { properties?: Record<string, unknown> }> };
    }>();
    const event = Object.values(document.components.schemas ?? {}).find((schema) =>
      JSON.stringify(schema).includes('webhook-signature'),
    );
    expect(Object.keys(event?.properties ?? {})).toEqual(['type', 'timestamp', 'data']);
    for (const base of ['/webhook', '/admin/tenants/{tenantId}/webhook']) {
      expect(Object.keys(document.paths[base] ?? {}).sort()).toEqual(['delete', 'get', 'put']);
      expect(Object.keys(document.paths[base]?.put?.responses ?? {})).toEqual(
        expect.arrayContaining(['200', '201', '400', '401', '503']),
      );
      expect(document.paths[`${base}/rotate-secret`]?.post).toBeDefined();
      expect(Object.keys(document.paths[`${base}/resume`]?.post?.responses ?? {})).toContain('409');
    }
    expect(document.paths['/admin/webhooks']?.get?.security).toEqual([{ adminKey: [] }]);
    expect(document.paths['/admin/tenants/{tenantId}/webhook']?.get?.security).toEqual([{ adminKey: [] }]);
    // `.` and `..` are no tenant: path segments, which a client resolves (/admin/tenants/../webhook is
    // /admin/webhook) and only a raw request sent as it is reached (a webhook for tenant ".." was made).
    const put = document.paths['/admin/tenants/{tenantId}/webhook']?.put as unknown as
      | { parameters?: { name: string; schema: { pattern: string } }[] }
      | undefined;
    const parameters = put?.parameters ?? [];
    const tenant = new RegExp(
      parameters.find((parameter) => parameter.name === 'tenantId')?.schema.pattern ?? '',
    );
    expect(['acme', 'a.b', '...'].map((id) => tenant.test(id))).toEqual([true, true, true]);
    expect(['.', '..', 'a/b'].map((id) => tenant.test(id))).toEqual([false, false, false]);
  });
});
