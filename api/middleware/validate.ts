import { bodyParser } from '@koa/bodyparser';
import { Ajv, type ErrorObject, type JSONSchemaType } from 'ajv';
import type { Middleware } from 'koa';
import { ValidationError } from '../../src/errors.ts';

const ajv = new Ajv({ allErrors: false, strict: true });

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

/** One sentence naming the field and what it must be. */
function describe(error: ErrorObject | undefined): string {
  if (!error) return 'The request body is not valid.';
  if (error.keyword === 'required') return `The field "${String(error.params.missingProperty)}" is required.`;
  if (error.keyword === 'additionalProperties') return `The field "${String(error.params.additionalProperty)}" is not allowed.`;
  const field = error.instancePath.replace(/^\//, '').replaceAll('/', '.');
  return field === '' ? `The request body ${error.message ?? 'is not valid'}.` : `The field "${field}" ${error.message ?? 'is not valid'}.`;
}
