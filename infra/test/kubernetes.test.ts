import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { HERALD_VARIABLES } from '@herald/config';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  APP_DEFAULT_PORT,
  APP_LOAD_CONFIG,
  APP_VARIABLES,
  HEALTH_PATHS,
  requiredVariables,
  SHUTDOWN_MS,
} from './support/apps.js';
import { composeVolumeSource, imageSource, loadCompose, REPO } from './support/compose.js';
import { type K8sObject, kubectlKustomize, kustomizations, kustomize } from './support/kustomize.js';
import { nginxLocations } from './support/nginx.js';

const K8S = join(REPO, 'infra/k8s');
// kubernetes-models (tommy351/kubernetes-models-ts): Kubernetes' OpenAPI schemas compiled to validators;
// types, required fields and formats (it does not refuse unknown fields).
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/Ingress': Ingress,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'v1/ConfigMap': ConfigMap,
  'v1/Namespace': Namespace,
  'v1/Secret': Secret,
  'v1/Service': Service,
};
const hasKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
const secretExample = parse(readFileSync(join(K8S, 'base/secret.example.yaml'), 'utf8')) as K8sObject & {
  stringData: Record<string, string>;
};
/** Values the apps accept, for the Secret's keys (the example's placeholders are refused on purpose). */
const SECRET_VALUES: Record<string, string> = {
  REDIS_URL: 'redis://:4f1c9a7e2b8d6f3a@redis:6379',
  HERALD_JWT_SECRET: 'k7Qz2mB9xL4vN8pR1sT6wY3cF5hJ0aD2eG7iK9oU1qE=',
  HERALD_API_KEYS: 'none',
  HERALD_ADMIN_KEY: 'Zx8Lq3Vn6Rt1Wm4Yp7Ks2Hd5Gf9Jc0Ba3Ne6Ui8Ol1=',
};

interface Container {
  name: string;
  image: string;
  command?: string[];
  ports?: { name?: string; containerPort: number }[];
  envFrom?: { configMapRef?: { name: string } }[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  startupProbe?: { httpGet?: { path: string; port: string | number } };
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
}
interface PodSpec {
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  containers: Container[];
}
const podOf = (deployment: K8sObject) =>
  (deployment.spec as { template: { metadata: { labels: Record<string, string> }; spec: PodSpec } }).template;
const ofKind = (objects: K8sObject[], kind: string) => objects.filter((object) => object.kind === kind);
/** The app a Deployment runs: `herald/<app>` → its compose service's Dockerfile. */
function appOf(container: Container) {
  const app = /herald\/([a-z]+)(?::|$)/.exec(container.image)?.[1] as string;
  const compose = loadCompose({ HERALD_JWT_SECRET: 'x', HERALD_API_KEYS: 'x', REDIS_PASSWORD: 'x' });
  const service = Object.values(compose.services).find((candidate) => candidate.image === `herald/${app}`);
  if (!service) throw new Error(`no compose service builds herald/${app}`);
  return imageSource(service);
}

describe.each(kustomizations(K8S).map((dir) => [relative(K8S, dir), dir]))('infra/k8s/%s', (_, dir) => {
  const objects = kustomize(dir);
  const deployments = ofKind(objects, 'Deployment');
  const configMaps = new Map(ofKind(objects, 'ConfigMap').map((map) => [map.metadata.name, map]));

  it('renders the same objects as `kubectl kustomize` (where kubectl is installed)', {
    skip: !hasKubectl,
  }, () => {
    const key = (object: K8sObject) => `${object.kind}/${object.metadata.name}`;
    const sorted = (list: K8sObject[]) => [...list].sort((a, b) => key(a).localeCompare(key(b)));
    expect(sorted(objects)).toEqual(sorted(kubectlKustomize(dir) ?? []));
  });

  it('validates every object against the Kubernetes schemas', () => {
    expect(objects.length).toBeGreaterThan(0);
    for (const object of objects) {
      const Model = MODELS[`${object.apiVersion}/${object.kind}`];
      expect(Model, `${object.apiVersion} ${object.kind} has a model`).toBeDefined();
      expect(
        () => new (Model as NonNullable<typeof Model>)(object as never).validate(),
        key(object),
      ).not.toThrow();
    }
  });

  it('runs each app as its image does: command, port, probes on /healthz and /readyz, non-root', () => {
    expect(deployments.map((deployment) => deployment.metadata.name).sort()).toEqual(
      ['herald-gateway', 'herald-realtime', 'herald-web', 'herald-worker'].sort(),
    );
    for (const deployment of deployments) {
      const pod = podOf(deployment).spec;
      const [container] = pod.containers;
      const source = appOf(container as Container);
      const name = deployment.metadata.name;
      expect(container?.command, name).toEqual(source.cmd);
      const port = container?.ports?.find((candidate) => candidate.name === 'http');
      expect(port?.containerPort, name).toBe(APP_DEFAULT_PORT[source.packageName]);
      for (const [probe, path] of [
        ['startupProbe', HEALTH_PATHS.liveness],
        ['livenessProbe', HEALTH_PATHS.liveness],
        ['readinessProbe', HEALTH_PATHS.readiness],
      ] as const) {
        expect(container?.[probe]?.httpGet, `${name} ${probe}`).toEqual({ path, port: 'http' });
      }
      expect(pod.securityContext, name).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
      expect(container?.resources?.requests?.cpu, name).toBeDefined();
      expect(container?.resources?.requests?.memory, name).toBeDefined();
      expect(container?.resources?.limits?.memory, name).toBeDefined();
    }
  });

  it('gives each app only settings it reads, its secrets from the Secret, and it starts with them', () => {
    for (const deployment of deployments) {
      const [container] = podOf(deployment).spec.containers as Container[];
      const source = appOf(container as Container);
      const name = deployment.metadata.name;
      const env: Record<string, string> = {};
      for (const from of container?.envFrom ?? []) {
        const map = configMaps.get(from.configMapRef?.name ?? '');
        expect(map, `${name}: ConfigMap ${from.configMapRef?.name}`).toBeDefined();
        Object.assign(env, map?.data);
      }
      const fromSecret = new Set<string>();
      for (const variable of container?.env ?? []) {
        const ref = variable.valueFrom?.secretKeyRef;
        if (ref) {
          expect(ref.name, name).toBe(secretExample.metadata.name);
          expect(Object.keys(secretExample.stringData), `${name}: ${ref.key}`).toContain(ref.key);
          env[variable.name] = SECRET_VALUES[ref.key] as string;
          fromSecret.add(variable.name);
        } else env[variable.name] = variable.value as string;
      }
      for (const variable of Object.keys(env)) {
        if (variable.startsWith('HERALD_'))
          expect(HERALD_VARIABLES, `${name}: ${variable}`).toContain(variable);
        // ConfigMap values are shared: another app's setting is ignored; a literal must be the app's own.
        const literal = container?.env?.some((entry) => entry.name === variable && !entry.valueFrom);
        if (literal) expect(APP_VARIABLES[source.packageName], `${name}: ${variable}`).toContain(variable);
      }
      const load = APP_LOAD_CONFIG[source.packageName] as (env: Record<string, string>) => unknown;
      expect(() => load(env), name).not.toThrow();
      const required = requiredVariables(load, env);
      for (const variable of Object.keys(env)) {
        if (required.includes(variable) || variable === 'REDIS_URL')
          expect(fromSecret, `${name}: ${variable}`).toContain(variable);
      }
    }
  });

  it('lets each app shut down: terminationGracePeriodSeconds covers preStop and the app’s grace', () => {
    for (const deployment of deployments) {
      const pod = podOf(deployment).spec;
      const preStop = pod.containers[0]?.lifecycle?.preStop?.exec?.command.join(' ') ?? '';
      const preStopMs = Number(/setTimeout\(\(\) => \{\}, (\d+)\)/.exec(preStop)?.[1] ?? 0);
      expect((pod.terminationGracePeriodSeconds ?? 30) * 1000, deployment.metadata.name).toBeGreaterThan(
        preStopMs + SHUTDOWN_MS,
      );
    }
  });

  it('puts a Service in front of each Deployment, and HPAs and PDBs on Deployments that exist', () => {
    const services = ofKind(objects, 'Service');
    for (const deployment of deployments) {
      const labels = podOf(deployment).metadata.labels;
      const service = services.find((candidate) => {
        const selector = (candidate.spec as { selector: Record<string, string> }).selector;
        return Object.entries(selector).every(([label, value]) => labels[label] === value);
      });
      expect(service, deployment.metadata.name).toBeDefined();
      const ports = (service?.spec as { ports: { targetPort: string }[] } | undefined)?.ports ?? [];
      expect(ports.map((port) => port.targetPort)).toEqual(['http']);
    }
    const names = deployments.map((deployment) => deployment.metadata.name);
    for (const hpa of ofKind(objects, 'HorizontalPodAutoscaler')) {
      expect(names).toContain((hpa.spec as { scaleTargetRef: { name: string } }).scaleTargetRef.name);
    }
    for (const pdb of ofKind(objects, 'PodDisruptionBudget')) {
      const selector = (pdb.spec as { selector: { matchLabels: Record<string, string> } }).selector
        .matchLabels;
      expect(
        deployments.some(
          (deployment) =>
            podOf(deployment).metadata.labels['app.kubernetes.io/name'] ===
            selector['app.kubernetes.io/name'],
        ),
      ).toBe(true);
    }
    expect(ofKind(objects, 'PodDisruptionBudget')).toHaveLength(4);
    expect(
      ofKind(objects, 'HorizontalPodAutoscaler')
        .map((hpa) => hpa.metadata.name)
        .sort(),
    ).toEqual(['herald-gateway', 'herald-realtime', 'herald-worker']);
  });

  it('routes the Ingress paths as the compose balancer does: /, /api (stripped), /socket.io', () => {
    const services = new Map(ofKind(objects, 'Service').map((service) => [service.metadata.name, service]));
    const routes = new Map<string, { service: string; rewrite: string | undefined }>();
    for (const ingress of ofKind(objects, 'Ingress')) {
      const rewrite = ingress.metadata.annotations?.['nginx.ingress.kubernetes.io/rewrite-target'];
      const rules = (
        ingress.spec as {
          rules: {
            http: {
              paths: { path: string; backend: { service: { name: string; port: { name: string } } } }[];
            };
          }[];
        }
      ).rules;
      for (const { path, backend } of rules.flatMap((rule) => rule.http.paths)) {
        const service = services.get(backend.service.name);
        expect(service, path).toBeDefined();
        expect(
          ((service?.spec as { ports: { name: string }[] } | undefined)?.ports ?? []).map(
            (port) => port.name,
          ),
        ).toContain(backend.service.port.name);
        routes.set(path, { service: backend.service.name, rewrite });
      }
    }
    const compose = loadCompose({ HERALD_JWT_SECRET: 'x', HERALD_API_KEYS: 'x', REDIS_PASSWORD: 'x' });
    const lb = compose.services.lb ?? {};
    const locations = nginxLocations(
      readFileSync(composeVolumeSource(lb, '/etc/nginx/conf.d/default.conf') as string, 'utf8'),
    );
    const upstreamApp: Record<string, string> = {
      herald_web: 'herald-web',
      herald_gateway: 'herald-gateway',
      herald_realtime: 'herald-realtime',
    };
    for (const [prefix, location] of locations) {
      if (!location.upstream) continue;
      const expected = upstreamApp[location.upstream];
      if (location.stripsPrefix) {
        const path = `${prefix.replace(/\/$/, '')}(/|$)(.*)`;
        expect(routes.get(path), prefix).toEqual({ service: expected, rewrite: '/$2' });
      } else {
        const path = prefix === '/' ? '/' : prefix.replace(/\/$/, '');
        expect(routes.get(path)?.service, prefix).toBe(expected);
        expect(routes.get(path)?.rewrite, prefix).toBeUndefined();
      }
    }
    // The gateway's /metrics, which the balancer answers 404 itself: not to the gateway.
    expect([...locations.keys()].some((location) => location.includes('/api/metrics'))).toBe(true);
    expect(routes.get('/api/metrics')).toEqual({ service: 'herald-web', rewrite: undefined });
    expect(routes.size).toBe([...locations.values()].filter((location) => location.upstream).length + 1);
  });
});

function key(object: K8sObject): string {
  return `${object.kind}/${object.metadata.name}`;
}

describe('infra/k8s/base/secret.example.yaml', () => {
  it('is a valid Secret whose placeholders the apps refuse (too short to pass for a secret)', () => {
    expect(() => new Secret(secretExample as never).validate()).not.toThrow();
    const load = APP_LOAD_CONFIG['@herald/gateway'] as (env: Record<string, string>) => unknown;
    expect(() => load(secretExample.stringData)).toThrow(/HERALD_JWT_SECRET/);
  });
});
