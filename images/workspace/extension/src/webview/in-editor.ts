/**
 * The Driver Station's page in the editor's webview (bundled by build.mjs): its host is the
 * extension (driver-station.ts), reached through VS Code's webview messages.
 */
import type { FromPage, ToPage } from '../ds-view.ts';
import { startPage } from './driver-station.ts';

declare function acquireVsCodeApi(): { postMessage(message: FromPage): void };

const vscode = acquireVsCodeApi();
startPage({
  // oxlint-disable-next-line unicorn/require-post-message-target-origin -- VS Code's webview API: no origin to give
  send: (message) => vscode.postMessage(message),
  listen: (receive) => window.addEventListener('message', (event: MessageEvent<ToPage>) => receive(event.data)),
});
