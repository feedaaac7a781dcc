import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import fastJsonPatch, { type Operation } from 'fast-json-patch';
import { parse, parseAllDocuments } from 'yaml';

/** A Kubernetes object as these tests read it. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

interface Kustomization {
  apiVersion?: string;
  kind?: string;
  namespace?: string;
  resources?: string[];
  labels?: { pairs: Record<string, string>; includeSelectors?: boolean; includeTemplates?: boolean }[];
  images?: { name: string; newName?: string; newTag?: string }[];
  patches?: { target: { kind?: string; name?: string }; patch: string }[];
}

/** The fields of a kustomization.yaml this renderer knows; any other one is refused, never ignored. */
const KNOWN = new Set(['apiVersion', 'kind', 'namespace', 'resources', 'labels', 'images', 'patches']);
const CLUSTER_SCOPED = new Set(['Namespace']);

function readObjects(file: string): K8sObject[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((document) => document.toJS() as K8sObject | null)
    .filter((object): object is K8sObject => object !== null);
}

/**
 * `kubectl kustomize <dir>` for the part of kustomize infra/k8s uses: `resources` (files and
 * kustomization folders), `namespace`, `labels` (pairs on metadata.labels only), `images` and `patches`
 * (JSON 6902, applied with fast-json-patch, to every object of the target's kind and name). A field it
 * does not know makes it throw, so that it never renders something else than kustomize would.
 */
export function kustomize(dir: string): K8sObject[] {
  const kustomization = parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8')) as Kustomization;
  for (const field of Object.keys(kustomization)) {
    if (!KNOWN.has(field))
      throw new Error(`${dir}/kustomization.yaml: ${field} is not supported by this renderer`);
  }
  let objects = (kustomization.resources ?? []).flatMap((resource) => {
    const path = join(dir, resource);
    return existsSync(path) && statSync(path).isDirectory() ? kustomize(path) : readObjects(path);
  });
  for (const { pairs, includeSelectors, includeTemplates } of kustomization.labels ?? []) {
    if (includeSelectors || includeTemplates) throw new Error(`${dir}: labels with selectors or templates`);
    for (const object of objects) object.metadata.labels = { ...object.metadata.labels, ...pairs };
  }
  if (kustomization.namespace) {
    for (const object of objects) {
      if (!CLUSTER_SCOPED.has(object.kind)) object.metadata.namespace = kustomization.namespace;
    }
  }
  for (const image of kustomization.images ?? []) {
    for (const container of containersOf(objects)) {
      const [name, tag] = splitImage(container.image);
      if (name !== image.name) continue;
      container.image = `${image.newName ?? name}:${image.newTag ?? tag ?? 'latest'}`;
    }
  }
  for (const { target, patch } of kustomization.patches ?? []) {
    const operations = parse(patch) as Operation[];
    objects = objects.map((object) =>
      (target.kind === undefined || target.kind === object.kind) &&
      (target.name === undefined || target.name === object.metadata.name)
        ? (fastJsonPatch.applyPatch(object, operations, true, false).newDocument as K8sObject)
        : object,
    );
  }
  return objects;
}

function splitImage(image: string): [string, string | undefined] {
  const at = image.lastIndexOf(':');
  return at > image.lastIndexOf('/') ? [image.slice(0, at), image.slice(at + 1)] : [image, undefined];
}

/** The containers of every Deployment's pod template. */
export function containersOf(
  objects: K8sObject[],
): { name: string; image: string; [field: string]: unknown }[] {
  return objects.flatMap((object) =>
    object.kind === 'Deployment'
      ? ((object.spec as { template: { spec: { containers: { name: string; image: string }[] } } }).template
          .spec.containers ?? [])
      : [],
  );
}

/** `kubectl kustomize` where kubectl is installed (this renderer's output is compared with it), else undefined. */
export function kubectlKustomize(dir: string): K8sObject[] | undefined {
  const result = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
  if (result.error) return undefined;
  if (result.status !== 0) throw new Error(`kubectl kustomize ${dir}: ${result.stderr}`);
  return parseAllDocuments(result.stdout).map((document) => document.toJS() as K8sObject);
}

/** infra/k8s's kustomizations: `base` and every folder of `overlays`. */
export function kustomizations(k8sDir: string): string[] {
  const overlays = join(k8sDir, 'overlays');
  return [join(k8sDir, 'base'), ...readdirSync(overlays).map((name) => join(overlays, name))];
}
