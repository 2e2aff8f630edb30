import { bodyParser } from '@koa/bodyparser';
import { Ajv, type ErrorObject, type JSONSchemaType, type SchemaObject } from 'ajv';
import formats from 'ajv-formats';
import type { Middleware } from 'koa';
import { ValidationError } from '../../src/errors.ts';

const ajv = new Ajv({ allErrors: false, strict: true });
// Query strings carry only text: numbers are coerced, and defaults fill in missing parameters.
const queryAjv = new Ajv({ allErrors: false, strict: true, coerceTypes: true, useDefaults: true });
// ajv-formats is CommonJS: ESM importers find its plugin under `default`. Its RFC 3339 date-time
// also admits leap seconds (23:59:60), which Date cannot hold, so those are refused as well.
const rfc3339DateTime = formats.default.get('date-time') as { validate: (text: string) => boolean };
queryAjv.addFormat('date-time', { type: 'string', validate: (text) => rfc3339DateTime.validate(text) && !Number.isNaN(Date.parse(text)) });

/** The largest JSON body any API endpoint accepts; larger bodies get 413. */
export const JSON_BODY_LIMIT = '256kb';

/** Parses JSON request bodies only (the proxy never passes through here, so its bodies stream). */
export const jsonBody = (): Middleware => bodyParser({ enableTypes: ['json'], jsonLimit: JSON_BODY_LIMIT, encoding: 'utf-8' });

/** State that validateBody leaves for the handler: the typed body. */
export interface BodyState<T> {
  body: T;
}

/**
 * Requires a JSON body (Content-Type application/json) matching `schema`; otherwise 400 with a
 * message naming the field and the problem. Puts the typed body in `ctx.state.body`.
 */
export function validateBody<T>(schema: JSONSchemaType<T>): Middleware<BodyState<T>> {
  const check = ajv.compile(schema);
  return async (ctx, next) => {
    if (!ctx.is('application/json')) {
      throw ValidationError('The request body must be JSON, sent with Content-Type: application/json.', 'unsupported_content_type');
    }
    const body = (ctx.request as { body?: unknown }).body;
    if (!check(body)) throw ValidationError(describe(check.errors?.[0]));
    ctx.state.body = body;
    await next();
  };
}

/** State that validateQuery leaves for the handler: the typed, coerced query. */
export interface QueryState<T> {
  query: T;
}

/**
 * Requires the query string to match `schema` (an object schema of scalar parameters; numbers are
 * coerced, defaults applied, unknown parameters refused); otherwise 400 `validation_error` naming
 * the parameter. Puts the typed query in `ctx.state.query`.
 */
export function validateQuery<T>(schema: SchemaObject): Middleware<QueryState<T>> {
  const check = queryAjv.compile<T>(schema);
  return async (ctx, next) => {
    // A copy: ajv coerces in place, and ctx.query is Koa's cached parse.
    const query: unknown = { ...ctx.query };
    if (!check(query)) throw ValidationError(describeParameter(check.errors?.[0]));
    ctx.state.query = query;
    await next();
  };
}

/** One sentence naming the query parameter and what it must be. */
function describeParameter(error: ErrorObject | undefined): string {
  if (!error) return 'The query string is not valid.';
  if (error.keyword === 'required') return `The parameter "${String(error.params.missingProperty)}" is required.`;
  if (error.keyword === 'additionalProperties') return `The parameter "${String(error.params.additionalProperty)}" is not allowed.`;
  const name = error.instancePath.replace(/^\//, '');
  if (error.keyword === 'format' && error.params.format === 'date-time') {
    return `The parameter "${name}" must be an ISO 8601 date-time with a time zone, such as 2026-03-04T05:06:07Z.`;
  }
  return `The parameter "${name}" ${error.message ?? 'is not valid'}.`;
}

/** One sentence naming the field and what it must be. */
function describe(error: ErrorObject | undefined): string {
  if (!error) return 'The request body is not valid.';
  if (error.keyword === 'required') return `The field "${String(error.params.missingProperty)}" is required.`;
  if (error.keyword === 'additionalProperties') return `The field "${String(error.params.additionalProperty)}" is not allowed.`;
  const field = error.instancePath.replace(/^\//, '').replaceAll('/', '.');
  return field === '' ? `The request body ${error.message ?? 'is not valid'}.` : `The field "${field}" ${error.message ?? 'is not valid'}.`;
}
