import type Router from '@koa/router';
import type { AuthState } from '../middleware/auth.ts';
import { presentUser } from '../../src/wire/presenters.ts';
import type { AdminDeps } from '../admin.ts';
import type { UserAnswer, UserChange, UserList } from '../../src/wire/schemas.ts';

/** Users: list, promote, demote (never the last admin), delete (with their workspace). */
export function userRoutes(router: Router<AuthState>, { store }: AdminDeps): void {
  router.get('/users', async (ctx) => {
    ctx.body = { users: (await store.users.list()).map(presentUser) } satisfies UserList;
  });

  router.post('/users/:userId/promote', async (ctx) => {
    const { user, changed } = await store.users.promote(ctx.state.actor!, ctx.params.userId!);
    ctx.body = { user: presentUser(user), changed } satisfies UserChange;
  });

  router.post('/users/:userId/demote', async (ctx) => {
    const { user, changed } = await store.users.demote(ctx.state.actor!, ctx.params.userId!);
    ctx.body = { user: presentUser(user), changed } satisfies UserChange;
  });

  router.delete('/users/:userId', async (ctx) => {
    ctx.body = { user: presentUser(await store.users.delete(ctx.state.actor!, ctx.params.userId!)) } satisfies UserAnswer;
  });
}
