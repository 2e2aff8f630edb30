import type { Middleware } from 'koa';
import { API_DEADLINE_MS, CallerGoneError, currentCaller, forCaller, type Caller } from '../../src/caller.ts';
import { AppError } from '../../src/errors.ts';
import type { Logger } from '../../src/log.ts';

/**
 * Runs each request for a Caller (src/caller.ts): gone once its connection ends before it is
 * answered (a balancer that gave up on this replica, a client that left), past its deadline
 * API_DEADLINE_MS after it arrived (a route may allow more: longRequest). A change it would make
 * after either is rolled back instead of committed, and said in one line.
 */
export function callerDeadline(log: Logger): Middleware {
  return async (ctx, next) => {
    const { req, res } = ctx;
    let closedEarly = false;
    const onClose = () => {
      if (!res.writableFinished) closedEarly = true;
    };
    res.once('close', onClose);
    const caller: Caller = {
      deadlineAt: performance.now() + API_DEADLINE_MS,
      gone: () => closedEarly || req.socket.destroyed || req.socket.readableEnded,
      released: false,
    };
    try {
      await forCaller(caller, next);
    } catch (error) {
      if (error instanceof CallerGoneError || (error instanceof AppError && error.code === 'deadline_passed')) {
        log.warning(
          { method: ctx.method, path: ctx.path, code: error.code },
          `${ctx.method} ${ctx.path} changed nothing: ${error instanceof CallerGoneError ? 'its client left before the answer' : 'its deadline passed'}`,
        );
      }
      throw error;
    } finally {
      res.off('close', onClose);
      // What the request started and goes on after it (an import's clone, a timer) is not its change.
      caller.released = true;
    }
  };
}

/** Gives the request `ms` from now instead of API_DEADLINE_MS (a backup, a restore: minutes of work). */
export function longRequest(ms: number): Middleware {
  return (_ctx, next) => {
    const caller = currentCaller();
    if (caller) caller.deadlineAt = performance.now() + ms;
    return next();
  };
}
