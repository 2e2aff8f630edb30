import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from './config.ts';

const pkg = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { name: string; version: string };

/** The service name and version reported by /healthz, from package.json. */
export const SERVICE = { name: pkg.name, version: pkg.version };
