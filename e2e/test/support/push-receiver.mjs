// A push service as a browser's vendor runs one, reduced to what Herald talks to: its own OS process, an
// HTTPS server (certificate and key from PUSH_RECEIVER_CERT / PUSH_RECEIVER_KEY) that takes Web Push
// messages at `/push/<name>`, checks the VAPID Authorization header (RFC 8292: `vapid t=<JWT>, k=<key>`,
// the ES256 JWT verified against `k`, its `aud` this origin, `exp` within 24 h, `sub` a mailto:/https:
// URL) and decrypts the body as the browser would (RFC 8291 aes128gcm, with the `http_ece` library
// web-push itself uses) with the subscription's ECDH private key and auth secret.
// `POST /control/<name>` sets a subscription: `{ privateKey, publicKey, auth, vapidPublicKey, mode }`,
// mode `ok` (201), `gone` (410) or `fail` (500), and `failFirst: n` (500 to its first n pushes). `GET /control/<name>` answers `{ requests }`: each with
// its headers' facts, the VAPID check, the decrypted JSON (or the decryption error) and the status sent.
import { createECDH, createPublicKey, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import ece from 'http_ece';
import { serveReceiver } from './serve-receiver.mjs';

/** @type {Map<string, { privateKey?: string, publicKey?: string, auth?: string, vapidPublicKey?: string, mode: string, requests: object[] }>} */
const subscriptions = new Map();
const subscription = (name) => {
  let found = subscriptions.get(name);
  if (!found) {
    found = { mode: 'ok', requests: [] };
    subscriptions.set(name, found);
  }
  return found;
};

const P256_SPKI_HEADER = Buffer.from('3059301306072a8648ce3d020106082a8648ce3d030107034200', 'hex');

/** The VAPID header's facts, and why it does not verify (undefined when it does). */
function checkVapid(header, expectedKey, origin) {
  const match = /^vapid t=([^,\s]+),\s*k=([A-Za-z0-9_-]+)$/.exec(header ?? '');
  if (!match) return { error: `not a vapid header: ${header}` };
  const [, jwt, key] = match;
  if (key !== expectedKey) return { error: 'k is not the VAPID public key' };
  const [head, body, signature] = jwt.split('.');
  // The uncompressed point behind the fixed SPKI header of a P-256 key.
  const publicKey = createPublicKey({
    key: Buffer.concat([P256_SPKI_HEADER, Buffer.from(key, 'base64url')]),
    format: 'der',
    type: 'spki',
  });
  const verified = verify(
    'sha256',
    Buffer.from(`${head}.${body}`),
    { key: publicKey, dsaEncoding: 'ieee-p1363' },
    Buffer.from(signature, 'base64url'),
  );
  const claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  const alg = JSON.parse(Buffer.from(head, 'base64url').toString('utf8')).alg;
  const now = Date.now() / 1000;
  if (!verified) return { claims, error: 'signature does not verify' };
  if (alg !== 'ES256') return { claims, error: `alg ${alg}` };
  if (claims.aud !== origin) return { claims, error: `aud ${claims.aud}, not ${origin}` };
  if (!(claims.exp > now && claims.exp <= now + 24 * 3600 + 60)) return { claims, error: 'exp out of range' };
  if (!/^(mailto:|https:)/.test(claims.sub ?? '')) return { claims, error: `sub ${claims.sub}` };
  return { claims };
}

const server = createServer(
  { cert: readFileSync(process.env.PUSH_RECEIVER_CERT), key: readFileSync(process.env.PUSH_RECEIVER_KEY) },
  (request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      const [, area, name] = (request.url ?? '').split('/');
      const json = (status, value) => {
        response.writeHead(status, { 'content-type': 'application/json' });
        response.end(JSON.stringify(value));
      };
      if (area === 'control' && name) {
        const target = subscription(name);
        if (request.method === 'POST') Object.assign(target, JSON.parse(body.toString('utf8')));
        return json(200, request.method === 'POST' ? { ok: true } : { requests: target.requests });
      }
      if (area !== 'push' || !name || request.method !== 'POST') return json(404, { error: 'no such push' });
      const target = subscription(name);
      const vapid = checkVapid(
        request.headers.authorization,
        target.vapidPublicKey,
        `https://${request.headers.host}`,
      );
      let message;
      let error;
      try {
        const ecdh = createECDH('prime256v1');
        ecdh.setPrivateKey(Buffer.from(target.privateKey ?? '', 'base64url'));
        const plain = ece.decrypt(body, { version: 'aes128gcm', privateKey: ecdh, authSecret: target.auth });
        message = JSON.parse(plain.toString('utf8'));
      } catch (cause) {
        error = cause.message;
      }
      const failing = target.mode === 'fail' || target.requests.length < (target.failFirst ?? 0);
      const status = target.mode === 'gone' ? 410 : failing ? 500 : 201;
      target.requests.push({
        contentEncoding: request.headers['content-encoding'],
        ttl: request.headers.ttl,
        urgency: request.headers.urgency,
        vapid,
        message,
        error,
        status,
      });
      response.writeHead(status);
      response.end();
    });
  },
);

serveReceiver(server);
