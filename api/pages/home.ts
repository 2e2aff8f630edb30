import Router from '@koa/router';
import type { AuthState } from '../middleware/auth.ts';
import { PANEL_PATH } from '../panel/index.ts';

/**
 * `GET /` leads each person to their place: sign-in when signed out, the admin panel's Class page
 * for an admin (a coach's default during class; the Overview is a tab away), their workspace for a
 * student.
 */
export function homeRouter(): Router<AuthState> {
  const router = new Router<AuthState>();
  router.get('/', (ctx) => {
    const user = ctx.state.user;
    ctx.set('Cache-Control', 'no-store');
    if (!user) return ctx.redirect('/auth/sign-in');
    if (user.role === 'admin') return ctx.redirect(`${PANEL_PATH}/class`);
    ctx.redirect(user.workspaceSlug ? `/u/${user.workspaceSlug}/` : '/auth/sign-in');
  });
  return router;
}
