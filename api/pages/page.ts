/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

/** A small self-contained HTML page (no external assets); `body` must already be escaped HTML. */
export function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>
body{font-family:system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;color:#1d2430;line-height:1.5}
h1{font-size:1.4rem} a.button,button{display:block;margin:.6rem 0;padding:.7rem 1rem;border:1px solid #1d2430;border-radius:.4rem;
background:#fff;color:#1d2430;text-decoration:none;font-size:1rem;text-align:center;cursor:pointer}
a.button:hover,button:hover{background:#eef2f7} input{display:block;width:100%;box-sizing:border-box;margin-top:.25rem;padding:.55rem .6rem;font:inherit;border:1px solid #8a94a3;border-radius:.4rem} .note{color:#5a6472;font-size:.9rem} .error{border-left:4px solid #c0392b;padding-left:.8rem}
</style></head><body>${body}</body></html>`;
}

/** A page that says why a browser was refused (403 and the like), with a way on; `message` is plain text. */
export function refusalPage(title: string, message: string, link: { href: string; label: string } = { href: '/', label: 'Back to the start' }): string {
  return page(
    title,
    `<h1>${escapeHtml(title)}</h1><p class="error">${escapeHtml(message)}</p><a class="button" href="${escapeHtml(link.href)}">${escapeHtml(link.label)}</a>`,
  );
}

/** The parameters a koa-router path names (`/auth/link/:token`: `{ token: string }`), each set, never empty, once the route matched. */
export type RouteParams<Path extends string> = Path extends `${string}:${infer Name}/${infer Rest}`
  ? Record<Name, string> & RouteParams<Rest>
  : Path extends `${string}:${infer Name}`
    ? Record<Name, string>
    : unknown;

/** What a route of `Path` adds to koa-router's context (its methods' second type argument): `params` typed from the path. */
export type Routed<Path extends string> = { params: RouteParams<Path> };
