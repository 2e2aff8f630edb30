import Router from '@koa/router';

/**
 * `GET /openapi.json`, public (see api/openapi.ts). The document is built at the first request:
 * TypeBox, which it is built from, takes a fifth of a second to load (hundreds of small modules),
 * which the server's start does not wait for.
 */
export function openApiRouter(): Router {
  const router = new Router();
  let text: Promise<string> | undefined;
  router.get('/openapi.json', async (ctx) => {
    text ??= import('./openapi.ts').then((document) => document.openApiText());
    ctx.type = 'application/json';
    ctx.body = await text;
  });
  return router;
}
