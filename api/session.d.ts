declare module 'koa' {
  interface BaseContext {
    /** The koa-session session: loaded on first access; set it to null to end it. */
    session: { regenerate(): Promise<void>; [key: string]: unknown } | null;
  }
}
// oxlint-disable-next-line unicorn/require-module-specifiers -- the empty export makes this a module, so `declare module` augments Koa's types instead of replacing them
export {};
