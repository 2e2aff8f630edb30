/** What the panel's pages share: reading with live refresh, navigation, times, notices, confirmations. */
import type { ComponentChildren, VNode } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, onLive, messageOf } from './api.ts';
import { html } from './html.ts';

/** The state of something read from the API. */
export interface Resource<T> {
  data: T | undefined;
  error: string | undefined;
  reload: () => void;
}

/** The first wait before a failed read is tried again, and the longest (the wait doubles between). */
const RETRY_FIRST_MS = 2000;
const RETRY_MAX_MS = 30_000;

/** A failure that may pass by itself: the control plane not reached, or a server error (a restart, a failover, the database away). */
const passing = (failure: unknown): boolean => failure instanceof ApiError && (failure.status === 0 || failure.status >= 500);

/**
 * Reads with `load` now, again when `key` changes, and again (300 ms after a change, at most every
 * 300 ms) whenever the live stream says one of `kinds` changed. The last data stays on screen while the next arrives,
 * so a refresh never flickers. A read that failed in a way that may pass by itself (`passing`) is
 * tried again after 2 s, then after twice as long each time up to 30 s, and the error says so: an
 * open page comes back by itself after a restart, without a reload.
 */
export function useResource<T>(load: () => Promise<T>, key: string, kinds: readonly string[] = []): Resource<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const latest = useRef(0);
  const retry = useRef<{ timer?: number; waitMs: number }>({ waitMs: RETRY_FIRST_MS });
  const reload = useCallback(() => {
    const call = ++latest.current;
    clearTimeout(retry.current.timer);
    void (async () => {
      try {
        const value = await load();
        if (call !== latest.current) return;
        retry.current.waitMs = RETRY_FIRST_MS;
        setData(value);
        setError(undefined);
      } catch (failure) {
        if (call !== latest.current) return;
        if (!passing(failure)) return setError(messageOf(failure));
        const waitMs = retry.current.waitMs;
        retry.current = { timer: setTimeout(reload, waitMs), waitMs: Math.min(waitMs * 2, RETRY_MAX_MS) };
        setError(`${messageOf(failure)} Trying again in ${waitMs / 1000} s.`);
      }
    })();
  }, [key]);
  useEffect(() => {
    reload();
    return () => clearTimeout(retry.current.timer);
  }, [reload]);
  useEffect(() => {
    if (kinds.length === 0) return undefined;
    // A read 300 ms after the first change heard, covering every change heard meanwhile: at most one
    // read every 300 ms however fast changes come (a class of 200 changes several times a second, which
    // a timer restarted at each change would put off for as long as the changes go on).
    let timer: number | undefined;
    const stop = onLive((event) => {
      if (event.type === 'change' && !kinds.includes(event.kind)) return;
      if (event.type === 'refusal' && !kinds.includes('refusal')) return;
      timer ??= setTimeout(() => {
        timer = undefined;
        reload();
      }, 300);
    });
    return () => {
      clearTimeout(timer);
      stop();
    };
  }, [reload, kinds.join()]);
  return { data, error, reload };
}

/** Goes to a page of the panel without reloading it (`replace`: without a new history entry). */
export function navigate(to: string, replace = false): void {
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  dispatchEvent(new PopStateEvent('popstate'));
}

/** The current path and query, following navigation. */
export function useLocation(): URL {
  const [url, setUrl] = useState(() => new URL(location.href));
  useEffect(() => {
    const follow = () => setUrl(new URL(location.href));
    addEventListener('popstate', follow);
    return () => removeEventListener('popstate', follow);
  }, []);
  return url;
}

/** Replaces the query of the current page (filters kept in the URL, so a view can be shared and reloaded). */
export function setQuery(values: Record<string, string | number | undefined>): void {
  const url = new URL(location.href);
  for (const [name, value] of Object.entries(values)) {
    if (value === undefined || value === '') url.searchParams.delete(name);
    else url.searchParams.set(name, String(value));
  }
  navigate(url.pathname + url.search, true);
}

/** A link within the panel. */
export function Link({ to, children, current }: { to: string; children: ComponentChildren; current?: boolean }): VNode {
  const follow = (event: MouseEvent) => {
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    navigate(to);
  };
  return html`<a href=${to} onClick=${follow} aria-current=${current ? 'page' : undefined}>${children}</a>`;
}

const localTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** A time in the browser's own time zone, its ISO form on hover; `—` for none. */
export function Time({ iso }: { iso: string | null }): VNode {
  if (!iso) return html`<span class="muted">—</span>`;
  return html`<time datetime=${iso} title=${iso}>${localTime.format(new Date(iso))}</time>`;
}

/** How long ago, in words a coach reads at a glance (the exact time on hover). */
export function Ago({ iso }: { iso: string | null }): VNode {
  if (!iso) return html`<span class="muted">never</span>`;
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  const text =
    seconds < 60
      ? 'just now'
      : seconds < 3600
        ? `${Math.floor(seconds / 60)} min ago`
        : seconds < 86_400
          ? `${Math.floor(seconds / 3600)} h ago`
          : `${Math.floor(seconds / 86_400)} d ago`;
  return html`<time datetime=${iso} title=${`${localTime.format(new Date(iso))} (${iso})`}>${text}</time>`;
}

/** A message above a page: an error (read out at once), a confirmation, or news (a hand raised). */
export function Notice({ kind, children, onClose }: { kind: 'error' | 'ok' | 'info'; children: ComponentChildren; onClose?: () => void }): VNode {
  return html`<div class=${`notice ${kind}`} role=${kind === 'error' ? 'alert' : 'status'}>
    <span>${children}</span>
    ${onClose ? html`<button type="button" class="link" onClick=${onClose}>Dismiss</button>` : null}
  </div>`;
}

/** What an empty list says: what to do next. */
export function Empty({ children }: { children: ComponentChildren }): VNode {
  return html`<p class="empty">${children}</p>`;
}

/** A confirmation: what will happen, named; with `typed`, the coach types that text to confirm. */
export interface Confirmation {
  title: string;
  body: ComponentChildren;
  action: string;
  typed?: string;
  run: () => Promise<void>;
  /**
   * A way out of a refusal, offered beside it (a restore into a running workspace: stop it, then
   * restore): what to say, the button, what it does; its run resolving `'done'` did the confirmed
   * action too, and the dialog closes.
   */
  recover?: (failure: unknown) => { message: string; label: string; run: () => Promise<'done' | void> } | undefined;
}

/**
 * A modal dialog (the browser's own <dialog>: focus is kept in it, Escape cancels) for a
 * confirmation; an API error is shown in it, and nothing closes until the coach says so.
 */
export function ConfirmDialog({ confirmation, onDone }: { confirmation: Confirmation | undefined; onDone: () => void }): VNode | null {
  const dialog = useRef<HTMLDialogElement>(null);
  const [typed, setTyped] = useState('');
  const [error, setError] = useState<string | undefined>(undefined);
  const [recovery, setRecovery] = useState<{ label: string; run: () => Promise<'done' | void> } | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  // A confirmation drawn again from live data keeps its title: only a new one starts afresh.
  const shown = confirmation?.title;
  useEffect(() => {
    setTyped('');
    setError(undefined);
    setRecovery(undefined);
    if (shown !== undefined && !dialog.current?.open) dialog.current?.showModal();
    if (shown === undefined && dialog.current?.open) dialog.current.close();
  }, [shown]);
  if (!confirmation) return html`<dialog ref=${dialog}></dialog>`;
  const ready = !busy && (confirmation.typed === undefined || typed === confirmation.typed);
  const confirm = async (event: Event) => {
    event.preventDefault();
    if (!ready) return;
    setBusy(true);
    try {
      await confirmation.run();
      onDone();
    } catch (failure) {
      const way = confirmation.recover?.(failure);
      setError(way?.message ?? messageOf(failure));
      setRecovery(way);
    } finally {
      setBusy(false);
    }
  };
  const recover = async () => {
    if (!recovery) return;
    setBusy(true);
    try {
      const outcome = await recovery.run();
      setError(undefined);
      setRecovery(undefined);
      if (outcome === 'done') onDone();
    } catch (failure) {
      setError(messageOf(failure));
    } finally {
      setBusy(false);
    }
  };
  return html`<dialog ref=${dialog} aria-labelledby="confirm-title" onClose=${onDone}>
    <form method="dialog" onSubmit=${confirm}>
      <h2 id="confirm-title">${confirmation.title}</h2>
      <div>${confirmation.body}</div>
      ${
        confirmation.typed === undefined
          ? null
          : html`<label
              >Type <strong>${confirmation.typed}</strong> to confirm
              <input value=${typed} onInput=${(event: Event) => setTyped((event.target as HTMLInputElement).value)} autocomplete="off" />
            </label>`
      }
      ${error ? html`<${Notice} kind="error">${error}<//>` : null}
      ${recovery ? html`<button type="button" onClick=${recover} disabled=${busy}>${recovery.label}</button>` : null}
      <div class="actions">
        <button type="button" onClick=${onDone}>Cancel</button>
        <button type="submit" class="danger" disabled=${!ready}>${busy ? 'Working…' : confirmation.action}</button>
      </div>
    </form>
  </dialog>`;
}

/** The line shown until a page's first data is in; nothing once that read failed (its error is shown instead). */
export function Loading({ error }: { error: string | undefined }): VNode | null {
  return error ? null : html`<p class="loading">Loading…</p>`;
}

/** A size in bytes as a person reads it: B, KiB, MiB. */
export const kib = (bytes: number): string =>
  bytes < 1024 ? `${bytes} B` : bytes < 1024 ** 2 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 ** 2).toFixed(1)} MiB`;

/** An age in a coach's words: seconds, then minutes, then hours and minutes. */
export function age(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

/** The seconds now, ticking every second while mounted (the ages shown count on between reads). */
export function useNow(): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  return now;
}
