import { bodyParser } from '@koa/bodyparser';
import type { Ajv, ErrorObject, SchemaObject } from 'ajv';
import type { Middleware } from 'koa';
import { AppError, ValidationError } from '../../src/errors.ts';

/** How an integer query parameter is written: decimal digits, perhaps a minus sign (ajv would also take `Infinity`, `1e2`, `0x10`, ` 5`). */
const INTEGER_TEXT = /^-?\d{1,16}$/;

/**
 * The two validators' compilers, loaded at the first request that needs one (ajv and its formats
 * take a twentieth of a second to load, which the server's start does not wait for).
 */
const compilers = lazily(async (): Promise<{ body: Ajv; query: Ajv }> => {
  const [{ Ajv }, { default: formats }] = await Promise.all([import('ajv'), import('ajv-formats')]);
  // strictNumbers: a JSON number too large for a double (1e400) parses as Infinity, which is no number here.
  const body = new Ajv({ allErrors: false, strict: true, strictNumbers: true });
  // Query strings carry only text: numbers are coerced (once integerParameters has checked how they
  // are written), and defaults fill in missing parameters.
  const query = new Ajv({ allErrors: false, strict: true, strictNumbers: true, coerceTypes: true, useDefaults: true });
  // ajv-formats is CommonJS: ESM importers find its plugin under `default`. Its RFC 3339 date-time
  // also admits leap seconds (23:59:60), which Date cannot hold, so those are refused as well.
  const rfc3339DateTime = formats.default.get('date-time') as { validate: (text: string) => boolean };
  for (const ajv of [body, query]) {
    ajv.addFormat('date-time', { type: 'string', validate: (text) => rfc3339DateTime.validate(text) && !Number.isNaN(Date.parse(text)) });
    ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  }
  return { body, query };
});

/** The largest JSON body any API endpoint accepts; larger bodies get 413. */
export const JSON_BODY_LIMIT = '256kb';

/**
 * Refuses a compressed body (any Content-Encoding but identity) with 415
 * `unsupported_content_encoding` and `Accept-Encoding: identity` (RFC 7694): the bodies are small,
 * and nothing gets to inflate what a client sends.
 */
function uncompressed(parse: Middleware): Middleware {
  return async (ctx, next) => {
    const encoding = ctx.get('content-encoding').trim().toLowerCase();
    if (encoding !== '' && encoding !== 'identity') {
      // The body is left unread; Node's server discards what remains of it once the answer is sent, so
      // the connection stays usable (closing it instead could reset a client still uploading before
      // it read the answer).
      throw new AppError('unsupported_content_encoding', 'Request bodies are taken uncompressed only: send them without Content-Encoding.', {
        'Accept-Encoding': 'identity',
      });
    }
    return parse(ctx, next);
  };
}

/** Parses JSON request bodies only (the proxy never passes through here, so its bodies stream), uncompressed. */
export function jsonBody(): Middleware {
  return uncompressed(bodyParser({ enableTypes: ['json'], jsonLimit: JSON_BODY_LIMIT, encoding: 'utf-8' }));
}

/** Parses the small HTML forms of the sign-in pages (urlencoded, at most 8 KB), uncompressed. */
export function formBody(): Middleware {
  return uncompressed(bodyParser({ enableTypes: ['form'], formLimit: '8kb', encoding: 'utf-8' }));
}

/**
 * The path (`field`, `a.b`) of the first string inside `value` that holds a NUL character, which
 * PostgreSQL can neither store nor compare in text; undefined when there is none.
 */
function unstorableText(value: unknown, path = ''): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? path : undefined;
  if (typeof value !== 'object' || value === null) return undefined;
  for (const [key, item] of Object.entries(value)) {
    const found = unstorableText(item, path === '' ? key : `${path}.${key}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * What `make` makes, made at the first call: a schema's validator is compiled at its first use
 * (compiling every route's schema when the app was built took a fifth of the server's start).
 */
function lazily<F>(make: () => F): () => F {
  let made: F | undefined;
  return () => (made ??= make());
}

/** State that validateBody leaves for the handler: the body. */
export interface BodyState {
  body?: unknown;
}

/**
 * Requires a JSON body (Content-Type application/json) matching `schema` (a TypeBox schema: JSON
 * Schema); otherwise 400 with a message naming the field and the problem. Puts the body in
 * `ctx.state.body`, where the operation's adapter gives it to the handler (api/operation.ts).
 */
export function validateBody(schema: SchemaObject): Middleware<BodyState> {
  const compiled = lazily(async () => (await compilers()).body.compile(schema));
  return async (ctx, next) => {
    const check = await compiled();
    if (!ctx.is('application/json')) {
      throw ValidationError('unsupported_content_type', 'The request body must be JSON, sent with Content-Type: application/json.');
    }
    const body = (ctx.request as { body?: unknown }).body;
    if (!check(body)) throw ValidationError('validation_error', describe(check.errors?.[0]));
    const unstorable = unstorableText(body);
    if (unstorable !== undefined) throw ValidationError('validation_error', `The field "${unstorable}" holds a NUL character, which is not allowed.`);
    ctx.state.body = body;
    await next();
  };
}

/** State that validateQuery leaves for the handler: the coerced query. */
export interface QueryState {
  query?: unknown;
}

/**
 * Requires the query string to match `schema` (an object schema of scalar parameters; numbers are
 * coerced, defaults applied, unknown parameters refused); otherwise 400 `validation_error` naming
 * the parameter. Puts the query in `ctx.state.query`.
 */
export function validateQuery(schema: SchemaObject): Middleware<QueryState> {
  const compiled = lazily(async () => (await compilers()).query.compile(schema));
  const integers = Object.entries((schema.properties ?? {}) as Record<string, { type?: unknown }>)
    .filter(([, property]) => property.type === 'integer')
    .map(([name]) => name);
  return async (ctx, next) => {
    // A copy: ajv coerces in place, and ctx.query is Koa's cached parse.
    const query: Record<string, unknown> = { ...ctx.query };
    // Checked before the schema's own checks: such text must never reach the database.
    const unstorable = unstorableText(query);
    if (unstorable !== undefined) throw ValidationError('validation_error', `The parameter "${unstorable}" holds a NUL character, which is not allowed.`);
    for (const name of integers) {
      const value = query[name];
      if (typeof value === 'string' && !INTEGER_TEXT.test(value)) {
        throw ValidationError('validation_error', `The parameter "${name}" must be a whole number written in digits, such as 50.`);
      }
    }
    const check = await compiled();
    if (!check(query)) throw ValidationError('validation_error', describeParameter(check.errors?.[0]));
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
