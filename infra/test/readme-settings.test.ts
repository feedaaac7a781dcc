import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HERALD_VARIABLES } from '@herald/config';
import { EnvSchema as GatewayEnv, loadConfig as loadGateway } from '@herald/gateway/config';
import { EnvSchema as RealtimeEnv } from '@herald/realtime/config';
import { EnvSchema as WebEnv } from '@herald/web/config';
import { EnvSchema as WorkerEnv } from '@herald/worker/config';
import { describe, expect, it } from 'vitest';
import { REPO } from './support/compose.js';

/**
 * The README's configuration table read mechanically: every row's variables, the apps it names and the
 * default it documents, against each app's env schema (the one place an app reads its environment).
 */
type Schema = { properties: Record<string, { default?: unknown }> };
const SCHEMAS: Readonly<Record<string, Schema>> = {
  gateway: GatewayEnv as unknown as Schema,
  worker: WorkerEnv as unknown as Schema,
  realtime: RealtimeEnv as unknown as Schema,
  web: WebEnv as unknown as Schema,
};

interface Row {
  variables: string[];
  apps: string[];
  meaning: string;
}

function configurationRows(): Row[] {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const table = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('### Security model'));
  return table
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const [names = '', apps = '', ...meaning] = line.slice(1).split(' | ');
      return {
        variables: [...names.matchAll(/`([A-Z_]+)`/g)].map((match) => match[1] as string),
        apps: apps.trim() === 'all' ? Object.keys(SCHEMAS) : apps.split(',').map((app) => app.trim()),
        meaning: meaning.join(' | ').replace(/ \|$/, ''),
      };
    });
}

/**
 * Defaults the schema leaves unset because they are computed from other settings (or are no single
 * value): what the README says instead, checked against the app's parsed configuration where it has one.
 */
const gateway = loadGateway({}, { secrets: false });
const COMPUTED: Readonly<Record<string, string | undefined>> = {
  HERALD_RATE_LIMIT_TIMEOUT_MS: String(gateway.rateLimit.timeoutMs),
  HERALD_ENVELOPE_WINDOW_MS: String(gateway.envelopeWindowMs),
  HERALD_ENVELOPE_TARGET_ITEMS: String(gateway.envelopeTargetItems),
};
/** Rows whose meaning does not open with the default as a backticked value, each with its reason. */
const PROSE: ReadonlySet<string> = new Set([
  'HERALD_JWT_SECRET', // required (a development value in development mode)
  'HERALD_API_KEYS', // required
  'HERALD_ADMIN_KEY', // unset: the admin API is off
  'HERALD_REDIS_CLUSTER_NODES', // unset: one Redis
  'HERALD_VAPID_PUBLIC_KEY', // unset: Web Push off
  'HERALD_VAPID_PRIVATE_KEY', // with the public key
  'HERALD_VAPID_SUBJECT',
  'HERALD_DEMO_API_KEY', // development mode only
  'HERALD_DEMO_USER',
  'PORT', // one per app: checked below
  'HOST',
]);

describe('the README configuration table against the apps', () => {
  const rows = configurationRows();
  const documented = rows.flatMap((row) => row.variables);

  it('lists every variable an app reads, once, and no variable no app reads', () => {
    const read = new Set(Object.values(SCHEMAS).flatMap((schema) => Object.keys(schema.properties)));
    expect([...read].filter((name) => !documented.includes(name)).sort()).toEqual([]);
    expect(documented.filter((name) => !read.has(name))).toEqual([]);
    expect(documented.filter((name, index) => documented.indexOf(name) !== index)).toEqual([]);
    expect(HERALD_VARIABLES.filter((name) => !documented.includes(name))).toEqual([]);
  });

  it('names exactly the apps that read each variable', () => {
    for (const { variables, apps } of rows) {
      for (const variable of variables) {
        const readers = Object.keys(SCHEMAS).filter((app) => variable in (SCHEMAS[app]?.properties ?? {}));
        expect(apps.slice().sort(), variable).toEqual(readers.sort());
      }
    }
  });

  it('documents the default each app applies (the i-th backticked value for the i-th variable)', () => {
    for (const { variables, apps, meaning } of rows) {
      if (variables.every((variable) => PROSE.has(variable))) continue;
      // The defaults open the meaning: "`10`, `10`: …", "`herald:inbox:`, `1000`, 30 days: …".
      const head = /^`[^`]*`(, `[^`]*`)*(, 30 days)?/.exec(meaning)?.[0] ?? meaning.slice(0, 40);
      const values = [...head.matchAll(/`([^`]*)`/g)].map((match) => match[1]);
      variables.forEach((variable, index) => {
        if (PROSE.has(variable)) return;
        const said = values[index];
        if (variable === 'HERALD_INBOX_MAX_AGE_MS') {
          expect(head, variable).toContain('30 days');
          expect(SCHEMAS.worker?.properties[variable]?.default).toBe(30 * 24 * 3600 * 1000);
          return;
        }
        if (variable === 'HERALD_INSTANCE_ID') {
          expect(said, variable).toBe('<app>-<host>-<pid>');
          return;
        }
        expect(said, `${variable}: "${head}" opens with no default`).toBeDefined();
        for (const app of apps) {
          const own = SCHEMAS[app]?.properties[variable]?.default;
          const actual = own === undefined ? COMPUTED[variable] : String(own);
          expect(actual, `${variable} on ${app}`).toBe(said);
        }
      });
    }
  });

  it('documents each app’s default PORT and the default HOST', () => {
    const row = rows.find((candidate) => candidate.variables.includes('PORT'));
    for (const [app, schema] of Object.entries(SCHEMAS)) {
      expect(row?.meaning, app).toContain(`${app} \`${String(schema.properties.PORT?.default)}\``);
      expect(row?.meaning, app).toContain(`\`${String(schema.properties.HOST?.default)}\``);
    }
  });
});
