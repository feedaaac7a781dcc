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

/** ajv's issues as `{ field, message }`, fields under `root` (`body`, `querystring`, `body.notifications.3`). */
export function issueDetails(
  root: string,
  issues: readonly Pick<ErrorObject, 'keyword' | 'instancePath' | 'params' | 'message'>[],
): FieldIssue[] {
  return issues.map((issue) => ({
    field: fieldOf(root, issue.instancePath, issue.params),
    message: messageOf(issue.keyword, issue.message),
  }));
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

function messageOf(keyword: string, message: string | undefined): string {
  if (keyword === 'required') return 'is required';
  if (keyword === 'additionalProperties') return 'is not an accepted field';
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
