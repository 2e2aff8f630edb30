/**
 * The workspace page's Driver Station: the page the workspace page shows when the student opens it
 * (in a frame in path mode; in a tab of its own in host mode, where the editor is on another site),
 * served under the editor's address at `<editor>/.cp/driver-station` (DRIVER_STATION_PATH;
 * path mode `/u/<slug>/.cp/driver-station`, host mode the workspace's host), where the robot's HALSim
 * and NetworkTables are, so that it reaches them as the editor's own Driver Station does: same
 * origin, the same credentials, the same relay and rules (proxy/halsim.ts).
 *
 * It is the editor's Driver Station without the editor: the same markup and style
 * (images/workspace/extension/src/ds-page.ts), the same page script and core, bundled from
 * images/workspace/extension/src/webview/standalone.ts with esbuild at the first request for it
 * (about a second, once per process; the server's start does not wait for it), then served from
 * memory, gzipped once. The page is the same for every student (it finds its editor's address in
 * its own), so its script and style are allowed by their hashes: nothing else runs or loads, it
 * connects only to its own origin, and only the control plane's own page may frame it (path mode).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type http from 'node:http';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { DRIVER_STATION_STYLE, driverStationMarkup } from '../images/workspace/extension/src/ds-page.ts';
import { bundleText } from './bundle.ts';
import { RESERVED_PREFIX } from './proxy/host.ts';

/** Where, under an editor's address, the Driver Station page is. */
export const DRIVER_STATION_PATH = `${RESERVED_PREFIX}driver-station`;

/** Whether a request target (its path; a query is ignored) is the Driver Station page. */
export const isDriverStationTarget = (target: string): boolean => target.split('?', 1)[0] === DRIVER_STATION_PATH;

const EXTENSION = new URL('../images/workspace/extension/', import.meta.url);

/**
 * VS Code's light theme's colours for the variables the Driver Station's style uses (the editor sets
 * them; here the page does), close to the workspace page's own.
 */
const THEME = `:root{--vscode-foreground:#1d2430;--vscode-font-family:system-ui,sans-serif;--vscode-font-size:14px;
--vscode-editor-font-family:ui-monospace,"DejaVu Sans Mono",monospace;--vscode-descriptionForeground:#5a6472;
--vscode-errorForeground:#a12622;--vscode-textLink-foreground:#1f5fa8;--vscode-contrastBorder:#8a94a3;
--vscode-button-background:#1f5fa8;--vscode-button-foreground:#fff;--vscode-button-secondaryBackground:#e4e8ee;
--vscode-button-secondaryForeground:#1d2430;--vscode-editorWidget-background:#f1f3f6;--vscode-dropdown-background:#fff;
--vscode-dropdown-foreground:#1d2430;--vscode-dropdown-border:#8a94a3;--vscode-charts-green:#2a7d2a;--vscode-charts-red:#c0392b;
--vscode-charts-blue:#1f5fa8;--vscode-charts-orange:#b35c00;--vscode-charts-purple:#7a3fa8;--vscode-charts-yellow:#8a6d00}
body{margin:0;padding:0 12px 12px;background:#fff}`;

/** The page, built once. */
interface BuiltPage {
  body: Buffer;
  gzip: Buffer;
  /** Its Content-Security-Policy without frame-ancestors (which depends on who may frame it). */
  policy: string;
}

let built: Promise<BuiltPage> | undefined;

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/** Bundles the page's script and makes the page (once; a failure is tried again at the next request). */
async function buildPage(): Promise<BuiltPage> {
  const script = await bundleText({
    entryPoints: [fileURLToPath(new URL('src/webview/standalone.ts', EXTENSION))],
    // The same bytes wherever the project is (the names of bundled modules are relative to it).
    absWorkingDir: fileURLToPath(new URL('..', import.meta.url)),
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
    // ntcore-ts-client's WebSocket: the browser's, at the editor's address (nt4-socket.ts).
    alias: { 'isomorphic-ws': fileURLToPath(new URL('src/nt4-socket.ts', EXTENSION)) },
  });
  if (/<\/script/i.test(script)) throw new Error('the Driver Station script contains "</script": it cannot be put inline');
  const uplot = await readFile(fileURLToPath(import.meta.resolve('uplot/dist/uPlot.min.css')), 'utf8');
  const style = `${uplot}${THEME}${DRIVER_STATION_STYLE}`;
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Driver Station</title>
<style>${style}</style></head>
<body class="vscode-light" tabindex="-1">
${driverStationMarkup()}
<script>${script}</script>
</body></html>`;
  const body = Buffer.from(html);
  return {
    body,
    gzip: gzipSync(body, { level: 9 }),
    policy: `default-src 'none'; script-src ${sha256(script)}; style-src ${sha256(style)}; connect-src 'self'; base-uri 'none'; form-action 'none'`,
  };
}

/** The page, built at the first call. */
export function driverStationPage(): Promise<BuiltPage> {
  built ??= buildPage().catch((error: unknown) => {
    built = undefined;
    throw error;
  });
  return built;
}

/**
 * Answers with the Driver Station page; `framers` is its frame-ancestors (`'self'` in path mode, where
 * the workspace page frames it; `'none'` on a workspace's host). Not cached by the browser: a new
 * control plane may serve another script.
 */
export async function sendDriverStationPage(req: http.IncomingMessage, res: http.ServerResponse, framers: string): Promise<void> {
  const page = await driverStationPage();
  const gzip = /\bgzip\b(?!\s*;\s*q=0(\.0*)?\b)/.test(req.headers['accept-encoding'] ?? '');
  const body = gzip ? page.gzip : page.body;
  res.writeHead(200, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': body.length,
    'cache-control': 'no-store',
    vary: 'accept-encoding',
    'x-content-type-options': 'nosniff',
    'content-security-policy': `${page.policy}; frame-ancestors ${framers}`,
    ...(gzip ? { 'content-encoding': 'gzip' } : {}),
  });
  res.end(body);
}
