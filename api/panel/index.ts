/**
 * The admin panel at `/panel/`: one page (the client routes between its tabs) for a signed-in admin,
 * its assets under a versioned prefix, and nothing else: every change it makes goes through the
 * admin API (`/admin/...`), as the CLI's go through the store.
 */
import { createHash } from 'node:crypto';
import Router from '@koa/router';
import type { Context } from 'koa';
import type { AuthState } from '../middleware/auth.ts';
import { escapeHtml, page, type Routed } from '../pages/page.ts';
import { errorBody } from '../responses.ts';
import { loadAssets, type Assets } from './assets.ts';

/** Where the panel lives (the JSON API is under /admin/, so the two never clash). */
export const PANEL_PATH = '/panel';

const ASSETS = `${PANEL_PATH}/assets`;
/** An asset's route: its version (the panel's content hash) and its name. */
const ASSET_ROUTE = `${ASSETS}/:version/:name` as const;

/** An HTML page for a browser that may not see the panel. */
function refuse(ctx: Context, status: number, title: string, body: string): void {
  ctx.status = status;
  ctx.type = 'html';
  ctx.set('Cache-Control', 'no-store');
  ctx.body = page(title, body);
}

/**
 * The panel's routes. Its page is served to a signed-in admin only: without a session the browser
 * goes to sign in (and comes back), a student gets a 403 page. The page's Content-Security-Policy
 * allows scripts from this origin only (the one inline script, the import map, by its hash), and
 * its assets are cached for good under a URL that changes with their content.
 */
export function panelRouter(): Router<AuthState> {
  // Built at the first request for the panel: stripping its client's types and compressing it
  // takes a tenth of a second, which the server's start no longer waits for.
  let built: Panel | undefined;
  const panel = () => (built ??= buildPanel());
  const router = new Router<AuthState>();

  router.get<unknown, Routed<typeof ASSET_ROUTE>>(ASSET_ROUTE, async (ctx) => {
    const { assets } = panel();
    const current = ctx.params.version === assets.version;
    const asset = current ? (assets.files.get(ctx.params.name) ?? (await assets.bundled(ctx.params.name))) : undefined;
    if (!asset) {
      ctx.status = 404;
      ctx.set('Cache-Control', 'no-store');
      ctx.body = errorBody('not_found', 'No such asset (the panel was updated: reload the page).');
      return;
    }
    ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.vary('Accept-Encoding');
    ctx.type = asset.type;
    const encoding = ctx.acceptsEncodings('br', 'gzip', 'identity');
    if (encoding === 'br' || encoding === 'gzip') ctx.set('Content-Encoding', encoding);
    ctx.body = encoding === 'br' || encoding === 'gzip' ? asset.encoded[encoding] : asset.body;
  });

  // Every page of the panel, loaded or reloaded at its own address: a section, one run (`runs/<id>`), a look at a workspace (`look/<id>`), or a lesson (`lessons/<id>`).
  router.get(
    [PANEL_PATH, `${PANEL_PATH}/`, `${PANEL_PATH}/:page`, `${PANEL_PATH}/runs/:runId`, `${PANEL_PATH}/look/:workspaceId`, `${PANEL_PATH}/lessons/:lessonId`],
    (ctx) => {
      const user = ctx.state.user;
      if (!user) return ctx.redirect(`/auth/sign-in?return_to=${encodeURIComponent(ctx.path)}`);
      if (user.role !== 'admin') {
        return refuse(
          ctx,
          403,
          'Admins only',
          `<h1>Admins only</h1><p class="error">The admin panel is for coaches with an admin account; you are signed in as ${escapeHtml(user.email)}.</p><a class="button" href="/">Back</a>`,
        );
      }
      const { csp, shell } = panel();
      ctx.set('Cache-Control', 'no-store');
      ctx.set('Content-Security-Policy', csp);
      ctx.set('X-Content-Type-Options', 'nosniff');
      ctx.set('Referrer-Policy', 'same-origin');
      ctx.type = 'html';
      ctx.body = shell;
    },
  );

  return router;
}

/** The panel as served: its assets, its page and the page's Content-Security-Policy. */
interface Panel {
  assets: Assets;
  csp: string;
  shell: string;
}

function buildPanel(): Panel {
  const assets = loadAssets(ASSETS);
  const importMapHash = createHash('sha256').update(assets.importMap).digest('base64');
  const csp = [
    "default-src 'none'",
    `script-src 'self' 'sha256-${importMapHash}'`,
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
  const base = `${ASSETS}/${assets.version}`;
  const shell = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Admin panel</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${base}/panel.css">
<script type="importmap">${assets.importMap}</script>
${assets.modules.map((href) => `<link rel="modulepreload" href="${href}">`).join('\n')}
<script type="module" src="${base}/main.ts"></script>
</head><body><div id="app"><p class="loading">Loading the admin panel…</p></div></body></html>`;
  return { assets, csp, shell };
}
