declare module 'koa' {
  interface BaseContext {
    /** The koa-session session: loaded on first access; set it to null to end it. */
    session: ({ regenerate(): Promise<void>; [key: string]: unknown }) | null;
  }
}
export {};
