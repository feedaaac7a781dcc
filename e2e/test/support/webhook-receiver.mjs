// A webhook receiver as a tenant's backend runs one: its own OS process, an HTTP server that verifies
// every request with the Standard Webhooks reference library (`standardwebhooks`: signature and the
// 5-minute timestamp window) and records it. Each endpoint `/hook/<name>` behaves as told through
// `POST /control/<name>`: `{ secret, mode: 'ok' | 'fail' | 'hang', failFirst? }`:
//   ok        204 once verified (400 when the signature or timestamp is wrong)
//   fail      500 always
//   hang      never answers (the sender's timeout ends it)
//   failFirst with ok: 500 for the first n requests of each webhook-id, then 204
// `GET /control/<name>` answers `{ requests, open, maxOpen }`: every request in arrival order, how many
// are still unanswered and the most that were open at once.
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { serveReceiver } from './serve-receiver.mjs';

/** @type {Map<string, { secret?: string, mode: string, failFirst: number, requests: object[], open: number, maxOpen: number, seen: Map<string, number> }>} */
const endpoints = new Map();
const endpoint = (name) => {
  let found = endpoints.get(name);
  if (!found) {
    found = { mode: 'ok', failFirst: 0, requests: [], open: 0, maxOpen: 0, seen: new Map() };
    endpoints.set(name, found);
  }
  return found;
};

const server = createServer((request, response) => {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const [, area, name] = (request.url ?? '').split('/');
    const json = (status, value) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(value));
    };
    if (area === 'control' && name) {
      const target = endpoint(name);
      if (request.method === 'POST') {
        const settings = JSON.parse(body);
        if (settings.secret !== undefined) target.secret = settings.secret;
        if (settings.mode !== undefined) target.mode = settings.mode;
        target.failFirst = settings.failFirst ?? 0;
        json(200, { ok: true });
      } else {
        json(200, { requests: target.requests, open: target.open, maxOpen: target.maxOpen });
      }
      return;
    }
    if (area !== 'hook' || !name || request.method !== 'POST')
      return json(404, { error: 'no such endpoint' });
    const target = endpoint(name);
    const headers = {
      'webhook-id': String(request.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(request.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(request.headers['webhook-signature'] ?? ''),
    };
    let verified = false;
    let error;
    try {
      new Webhook(target.secret ?? 'whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA').verify(body, headers);
      verified = true;
    } catch (cause) {
      error = cause.message;
    }
    const id = headers['webhook-id'];
    const nth = (target.seen.get(id) ?? 0) + 1;
    target.seen.set(id, nth);
    let status;
    if (target.mode === 'hang') status = 0;
    else if (target.mode === 'fail' || nth <= target.failFirst) status = 500;
    else status = verified ? 204 : 400;
    let payload;
    try {
      payload = JSON.parse(body);
    } catch {
      payload = undefined;
    }
    target.requests.push({
      id,
      timestamp: headers['webhook-timestamp'],
      signature: headers['webhook-signature'],
      contentType: request.headers['content-type'],
      verified,
      error,
      status,
      payload,
    });
    target.open += 1;
    target.maxOpen = Math.max(target.maxOpen, target.open);
    response.on('close', () => {
      target.open -= 1;
    });
    if (status === 0) return; // hang: the sender gives up
    response.writeHead(status);
    response.end();
  });
});

serveReceiver(server);
