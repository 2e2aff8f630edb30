import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * The key that signs session cookies: SESSION_SECRET when set (config requires it in production);
 * otherwise one generated on first start and kept in `<dataDir>/session-secret` (mode 0600), so
 * that sessions survive restarts. Two processes starting at once agree on one (exclusive create).
 */
export async function loadSessionSecret(configured: string | undefined, dataDir: string): Promise<{ secret: string; generated: boolean }> {
  if (configured !== undefined) return { secret: configured, generated: false };
  const file = path.join(dataDir, 'session-secret');
  try {
    return { secret: (await readFile(file, 'utf8')).trim(), generated: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  await mkdir(dataDir, { recursive: true });
  const secret = randomBytes(48).toString('base64url');
  try {
    await writeFile(file, `${secret}\n`, { mode: 0o600, flag: 'wx' });
    return { secret, generated: true };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return { secret: (await readFile(file, 'utf8')).trim(), generated: false };
  }
}
