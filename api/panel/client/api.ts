/**
 * The admin API as the panel calls it (same origin, the session cookie), and the live events that
 * tell it when to read again. The panel changes state through these calls only.
 */
import createClient from 'openapi-fetch';
import type { Refusal } from '../../../src/wire/schemas.ts';
import type { paths } from './openapi.d.ts';

/** An answer of the API that is not a success: its stable code and its message for the coach. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** What to tell the coach about a failure: the API's message, or the error's own. */
export const messageOf = (failure: unknown): string => (failure instanceof ApiError ? failure.message : String(failure));

/**
 * The API's client: openapi-fetch, typed by what openapi-typescript makes of the OpenAPI document
 * (openapi.d.ts, written by `npm run openapi`), so every call names an operation of the document
 * with its path parameters, query and body, and gets its answer's type.
 */
export const client = createClient<paths>({ credentials: 'same-origin', headers: { accept: 'application/json' } });

/** What a call of the client resolves to. */
interface Outcome<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/**
 * The answer of a call: its JSON body; or an ApiError carrying the server's code and message (and
 * a 401 goes to the sign-in page, back here after).
 */
export async function ok<T>(call: Promise<Outcome<T>>): Promise<T> {
  let outcome: Outcome<T>;
  try {
    outcome = await call;
  } catch {
    throw new ApiError(0, 'network_error', 'The control plane cannot be reached; check the connection and try again.');
  }
  const { data, error, response } = outcome;
  if (!response.ok) {
    if (response.status === 401) location.assign(`/auth/sign-in?return_to=${encodeURIComponent(location.pathname + location.search)}`);
    const body = (error as { error?: { code?: string; message?: string } } | undefined)?.error;
    throw new ApiError(response.status, body?.code ?? 'error', body?.message ?? `The control plane answered ${response.status}.`);
  }
  return data as T;
}

/** What the live stream says: a change of some kind of state, or a capacity refusal. */
export type { Refusal };

/** `resync`: changes may have been missed (the server's database listener, or this stream, reconnected): read everything again. */
type LiveEvent = { type: 'change'; kind: string; id: string } | { type: 'refusal'; refusal: Refusal } | { type: 'resync' };

type Listener = (event: LiveEvent) => void;
const listeners = new Set<Listener>();
let source: EventSource | undefined;

/** Follows the live events (one stream for the whole page); returns the function that stops. */
export function onLive(listener: Listener): () => void {
  listeners.add(listener);
  if (!source) {
    source = new EventSource('/admin/events');
    source.addEventListener('change', (event) => {
      const change = JSON.parse((event as MessageEvent<string>).data) as { kind: string; id: string };
      for (const each of listeners) each({ type: 'change', ...change });
    });
    source.addEventListener('refusal', (event) => {
      const refusal = JSON.parse((event as MessageEvent<string>).data) as Refusal;
      for (const each of listeners) each({ type: 'refusal', refusal });
    });
    const resync = () => {
      for (const each of listeners) each({ type: 'resync' });
    };
    source.addEventListener('resync', resync);
    // The stream itself came back (the browser reconnects it, perhaps to another replica): what it missed is read again.
    let opened = 0;
    source.addEventListener('open', () => {
      if (opened++ > 0) resync();
    });
  }
  return () => {
    listeners.delete(listener);
    if (listeners.size === 0) {
      source?.close();
      source = undefined;
    }
  };
}
