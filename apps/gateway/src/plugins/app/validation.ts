import { Ajv, type ErrorObject, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import fp from 'fastify-plugin';

const common: Options = {
  useDefaults: true,
  // Unknown fields are an error the client should hear about, not something to drop silently.
  removeAdditional: false,
  // allErrors would let one huge invalid body cost a validation of every field (a DoS vector).
  allErrors: false,
  addUsedSchema: false,
  // Errors carry their schema and value: a union's error needs its branches' schemas and the value sent
  // to tell which branch was meant (see issueDetails). Only a failed validation pays for it.
  verbose: true,
};

/**
 * Validation per part of the request, as Fastify documents it: a JSON body is typed, so nothing is
 * coerced ("1" is not 1); the query string, path and headers are text, so numbers there are coerced.
 */
const body = new Ajv({ ...common, coerceTypes: false });
const text = new Ajv({ ...common, coerceTypes: 'array' });
for (const ajv of [body, text]) addFormats.default(ajv);

/** A validator for JSON-body values (no coercion), for parts a route validates itself (batch items). */
export function compileBodySchema<T>(schema: object) {
  return body.compile<T>(schema);
}

/** One problem of a request, naming its field (`body.userId`). */
export interface FieldIssue {
  field: string;
  message: string;
}

/** An ajv error as issueDetails reads it (`schemaPath`, `schema` and `data` are there with `verbose`). */
export type AjvIssue = Pick<ErrorObject, 'keyword' | 'instancePath' | 'params' | 'message'> &
  Partial<Pick<ErrorObject, 'schemaPath' | 'schema' | 'parentSchema' | 'data'>>;

/** What a value may be: from a `const`, an `enum`, a `type` (`null` counts as a value). */
interface Allowed {
  values: unknown[];
  types: string[];
}

/** A problem found, with what the value may be when it is one of a few values or types. */
interface Found extends FieldIssue {
  /** How deep the value is (segments of its instancePath): a branch whose problem lies deeper got further. */
  depth: number;
  /** What the value may be, merged across a union of such constraints into one problem. */
  allowed?: Allowed;
  /** A `type` error: the value is not even of the branch's type. */
  wrongType?: boolean;
}

/** An ajv error, and for a failed `anyOf`/`oneOf` the errors of each of its branches. */
interface ErrorNode {
  error: AjvIssue;
  branches?: { index: number; nodes: ErrorNode[] }[];
}

/** At most this many allowed values are listed in a message. */
const VALUES_SHOWN = 20;

/**
 * ajv's issues as `{ field, message }`, fields under `root` (`body`, `querystring`,
 * `body.notifications.3`), the headline first. A failed union (`anyOf`, `oneOf`) is one problem, not
 * each branch's: a union of constants, enums or types says once what the value may be (`must be one of
 * "a", "b"`); a union of forms reports the branch that best matches what was sent (the one with most
 * of its keys present, a constant of it matched, then the one whose type matched, then the one that got
 * deepest), or, when none stands out, that nothing matched, with each branch's problem.
 */
export function issueDetails(root: string, issues: readonly AjvIssue[]): FieldIssue[] {
  return foundOf(root, errorTree(issues)).map(({ field, message }) => ({ field, message }));
}

/**
 * ajv lists a failed union's branch errors just before the union's own error, each under the union's
 * schemaPath (`#/properties/events/items/anyOf/2/const`): gathered under it, nested unions included.
 */
function errorTree(issues: readonly AjvIssue[]): ErrorNode[] {
  const nodes: ErrorNode[] = [];
  for (const error of issues) {
    const union = error.keyword === 'anyOf' || error.keyword === 'oneOf';
    // A oneOf that failed because several branches matched: not a branch's problem.
    const manyMatched = error.keyword === 'oneOf' && Array.isArray(error.params.passingSchemas);
    if (!union || error.schemaPath === undefined) {
      nodes.push({ error });
      continue;
    }
    const prefix = `${error.schemaPath}/`;
    let start = nodes.length;
    while (start > 0 && nodes[start - 1]?.error.schemaPath?.startsWith(prefix)) start--;
    const inner = nodes.splice(start);
    if (manyMatched || inner.length === 0) {
      nodes.push({ error });
      continue;
    }
    const branches: { index: number; nodes: ErrorNode[] }[] = [];
    for (const node of inner) {
      const index = Number.parseInt((node.error.schemaPath ?? '').slice(prefix.length), 10);
      const branch = branches.find((each) => each.index === index);
      if (branch) branch.nodes.push(node);
      else branches.push({ index, nodes: [node] });
    }
    nodes.push({ error, branches });
  }
  return nodes;
}

function foundOf(root: string, nodes: readonly ErrorNode[]): Found[] {
  return nodes.flatMap((node) => (node.branches ? unionFound(root, node) : [leafFound(root, node.error)]));
}

const depthOf = (instancePath: string): number => instancePath.split('/').filter(Boolean).length;
const listed = (values: readonly unknown[]): string =>
  values.length > VALUES_SHOWN
    ? `${values.slice(0, VALUES_SHOWN).map(shownValue).join(', ')}, …`
    : values.map(shownValue).join(', ');
const shownValue = (value: unknown): string => JSON.stringify(value) ?? String(value);

function leafFound(root: string, error: AjvIssue): Found {
  const field = fieldOf(root, error.instancePath, error.params);
  const depth = depthOf(error.instancePath);
  const { keyword, params } = error;
  if (keyword === 'const') {
    return allowedFound(field, depth, { values: [params.allowedValue], types: [] });
  }
  if (keyword === 'enum' && Array.isArray(params.allowedValues)) {
    return allowedFound(field, depth, { values: params.allowedValues, types: [] });
  }
  // A query parameter (or header) sent twice arrives as an array where one value is wanted.
  if (keyword === 'type' && root !== 'body' && !root.startsWith('body.') && Array.isArray(error.data)) {
    return { field, depth, message: 'is given more than once: give it once' };
  }
  if (keyword === 'type' && (typeof params.type === 'string' || Array.isArray(params.type))) {
    const types = (Array.isArray(params.type) ? params.type : params.type.split(',')) as string[];
    const found = allowedFound(field, depth, {
      values: types.includes('null') ? [null] : [],
      types: types.filter((type) => type !== 'null'),
    });
    return { ...found, wrongType: true };
  }
  if (keyword === 'oneOf' && Array.isArray(params.passingSchemas)) {
    return { field, message: 'matches more than one of its accepted forms', depth };
  }
  const properties = (error.parentSchema as { properties?: object } | undefined)?.properties;
  if (keyword === 'minProperties' && properties !== undefined) {
    const fields = Object.keys(properties).join(', ');
    return { field, message: `must have at least ${params.limit} of its fields ${fields}`, depth };
  }
  return { field, message: messageOf(keyword, error.message, root), depth };
}

/** `must be "a"`, `must be one of "a", "b"`, `must be string or null`, `must be integer or one of 1, 2`. */
function allowedFound(field: string, depth: number, allowed: Allowed): Found {
  const values = allowed.values.filter(
    (value, index) => allowed.values.findIndex((other) => shownValue(other) === shownValue(value)) === index,
  );
  const types = [...new Set(allowed.types)];
  const choices = [...types];
  if (values.length === 1) choices.push(shownValue(values[0]));
  else if (values.length > 1) choices.push(`one of ${listed(values)}`);
  return { field, message: `must be ${choices.join(' or ')}`, depth, allowed: { values, types } };
}

/** How well `data` fits the object schema `branch`: its keys present, more for a constant of it matched. */
function branchFit(branch: unknown, data: unknown): number {
  if (typeof branch !== 'object' || branch === null || typeof data !== 'object' || data === null) return 0;
  if (Array.isArray(data)) return 0;
  const properties = (branch as { properties?: Record<string, { const?: unknown }> }).properties;
  if (properties === undefined) return 0;
  let score = 0;
  for (const [key, value] of Object.entries(data)) {
    const property = Object.hasOwn(properties, key) ? properties[key] : undefined;
    if (property === undefined) continue;
    score += 1;
    if ('const' in property && shownValue(property.const) === shownValue(value)) score += 2;
  }
  return score;
}

function unionFound(root: string, node: ErrorNode): Found[] {
  const { error } = node;
  const field = fieldOf(root, error.instancePath, error.params);
  const depth = depthOf(error.instancePath);
  const branches = (node.branches ?? []).map(({ index, nodes }) => ({ index, found: foundOf(root, nodes) }));
  // A union of constants, enums and types: one problem, saying what the value may be.
  const allowed = branches.map(({ found }) =>
    found.length === 1 && found[0]?.field === field ? found[0].allowed : undefined,
  );
  if (allowed.every((each) => each !== undefined)) {
    return [
      allowedFound(field, depth, {
        values: allowed.flatMap((each) => each.values),
        types: allowed.flatMap((each) => each.types),
      }),
    ];
  }
  // A union of forms: the branch that best matches what was sent, by (1) its keys present and its
  // constants matched, (2) the value being of its type, (3) how deep its problem lies.
  const schemas = Array.isArray(error.schema) ? error.schema : [];
  const scored = branches.map(({ index, found }) => ({
    found,
    score: [branchFit(schemas[index], error.data), found[0]?.wrongType ? 0 : 1, found[0]?.depth ?? 0],
  }));
  const compare = (a: number[], b: number[]): number => {
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return (a[i] ?? 0) - (b[i] ?? 0);
    return 0;
  };
  const top = scored
    .map(({ score }) => score)
    .reduce((best, score) => (compare(score, best) > 0 ? score : best), [-1, -1, -1]);
  const tied = scored.filter((each) => compare(each.score, top) === 0);
  const headlines = [...new Set(tied.map(({ found }) => `${found[0]?.field} ${found[0]?.message}`))];
  if (headlines.length <= 1) return tied[0]?.found ?? [];
  // None stands out: nothing matched, and each form says why.
  const seen = new Set<string>();
  const each = tied
    .flatMap(({ found }) => found)
    .filter(({ field: at, message }) => !seen.has(`${at} ${message}`) && seen.add(`${at} ${message}`));
  return [
    { field, message: `matches none of its accepted forms: ${headlines.join('; or ')}`, depth },
    ...each,
  ];
}

/** `body.userId` from ajv's instancePath and params (required/additional properties name the field in params). */
function fieldOf(root: string, instancePath: string, params: Record<string, unknown>): string {
  const path = instancePath
    .split('/')
    .filter(Boolean)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
  const missing = params.missingProperty ?? params.additionalProperty;
  if (typeof missing === 'string') path.push(missing);
  return [root, ...path].join('.');
}

function messageOf(keyword: string, message: string | undefined, root = 'body'): string {
  if (keyword === 'required') return 'is required';
  if (keyword === 'additionalProperties')
    return root === 'querystring' ? 'is not an accepted parameter' : 'is not an accepted field';
  return message ?? 'is invalid';
}

/** Route schemas are compiled with the validators above. */
export default fp(
  async (app) => {
    app.setValidatorCompiler(({ schema, httpPart }) =>
      httpPart === 'body' ? body.compile(schema) : text.compile(schema),
    );
  },
  { name: 'validation', fastify: '5.x' },
);
