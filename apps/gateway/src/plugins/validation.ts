import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';

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
export function compileBodySchema(schema: object) {
  return body.compile(schema);
}

export function registerValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) =>
    httpPart === 'body' ? body.compile(schema) : text.compile(schema),
  );
}
