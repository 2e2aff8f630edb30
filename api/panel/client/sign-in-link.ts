/** One-time sign-in links from the panel: a confirmation that names whom the link signs in, then the link, shown once, to copy. */
import type { VNode } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { client, ok } from './api.ts';
import { html } from './html.ts';
import { Notice, Time, type Confirmation } from './ui.ts';
import type { SignInLink } from '../../../src/wire/schemas.ts';

/** Asks before making a link for `email` (whoever holds it is signed in as them); `onMade` gets it. */
export function signInLinkConfirmation(email: string, onMade: (link: SignInLink) => void): Confirmation {
  return {
    title: `A sign-in link for ${email}?`,
    body: html`<p>
      The link signs in as <strong>${email}</strong> without an identity provider, once, within an hour. Whoever opens it first is signed in as them: give it to
      them only.
    </p>`,
    action: 'Make the link',
    run: async () => onMade((await ok(client.POST('/admin/sign-in-links', { body: { email } }))).link),
  };
}

/** The link just made, to copy (it is never shown again: only its hash is kept). */
export function SignInLinkNotice({ link, onClose }: { link: SignInLink; onClose: () => void }): VNode {
  const field = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    field.current?.select();
    // The clipboard API needs a secure context (https, or this machine); elsewhere the selection lets Ctrl+C do it.
    try {
      await navigator.clipboard.writeText(link.url);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  return html`<${Notice} kind="ok" onClose=${onClose}>
    <span class="link-made">
      <label for="sign-in-link">Sign-in link for ${link.email}, once, until <${Time} iso=${link.expiresAt} />:</label>
      <input id="sign-in-link" ref=${field} readonly value=${link.url} onFocus=${() => field.current?.select()} />
      <button type="button" onClick=${copy}>${copied ? 'Copied' : 'Copy'}</button>
    </span>
  <//>`;
}
