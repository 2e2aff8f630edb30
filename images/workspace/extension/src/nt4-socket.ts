/**
 * What ntcore-ts-client gets as its WebSocket (the bundle puts this module where the library
 * imports `isomorphic-ws`). The library dials `ws://<host>:<port>/nt/<client>`; in the classroom the
 * simulator's NetworkTables are reached through the control plane under the editor's own address,
 * `<editor>/.cp/nt4/nt/<client>`, so the address is rewritten to that (wss when the editor is on
 * https). The browser sends the editor's own credentials and Origin; nothing else changes.
 */
let target = '';

/** Where the simulator's NetworkTables are: the editor's address (ending in a slash). */
export function setNt4Base(editorBase: string): void {
  target = new URL('.cp/nt4', editorBase).href.replace(/^http/, 'ws');
}

export default class ClassroomWebSocket extends WebSocket {
  constructor(url: string | URL, protocols?: string | string[]) {
    const path = new URL(url).pathname;
    super(`${target}${path}`, protocols);
  }
}
