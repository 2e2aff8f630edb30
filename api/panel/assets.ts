import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { bundleText } from '../bundle.ts';

/** One file the panel's pages load. */
export interface Asset {
  body: Buffer;
  /** The same bytes compressed once at start, for browsers that take them. */
  encoded: { br: Buffer; gzip: Buffer };
  type: string;
}

/** The panel's files by their path under the versioned prefix, and that version. */
export interface Assets {
  /** A hash of every file's content: part of every asset URL, so each can be cached for good. */
  version: string;
  files: Map<string, Asset>;
  /** The import map the page declares (bare specifiers of the vendor modules → their URLs). */
  importMap: string;
  /** Every module the page runs, for `<link rel="modulepreload">`: fetched at once, not import by import. */
  modules: string[];
  /** A bundled vendor module by its name (BUNDLED), built at its first request; undefined for any other name. */
  bundled: (name: string) => Promise<Asset> | undefined;
}

const CLIENT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'client');

/** The ES modules of the UI libraries, from node_modules as they are published. */
const VENDOR: Record<string, string> = {
  preact: 'preact',
  'preact/hooks': 'preact/hooks',
  htm: 'htm',
  'openapi-fetch': 'openapi-fetch',
};

/**
 * UI libraries published as several modules, which a page imports only when it needs one (the
 * Lessons page packs a folder into a tar with modern-tar): each is bundled by esbuild into one
 * module at its first request (a second or two, once per process), not at the panel's, and is not
 * preloaded. Its URL's version covers the package's own version.
 */
const BUNDLED: Record<string, string> = {
  'modern-tar': 'modern-tar',
};

/**
 * Modules of the project's own that the panel shares with the workspace's Driver Station, by the
 * bare specifier the client imports them with (api/panel/client/tsconfig.json's `paths` says the
 * same for tsc): served like the client's, with their types stripped. Each imports nothing.
 */
const SHARED: Record<string, string> = {
  // The robot's field: its size, the drawing's scale, the robot's footprint (the coach's look draws it).
  'robot-dashboard': fileURLToPath(new URL('../../images/workspace/extension/src/dashboard.ts', import.meta.url)),
};

/** Bundles a published package into one ES module for the browser. */
async function bundle(module: string): Promise<Asset> {
  const text = await bundleText({
    entryPoints: [fileURLToPath(import.meta.resolve(module))],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  return asset(Buffer.from(text), TYPES['.mjs']!);
}

/** An asset with its compressed forms. */
function asset(body: Buffer, type: string): Asset {
  const br = brotliCompressSync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 6, [constants.BROTLI_PARAM_SIZE_HINT]: body.length } });
  return { body, type, encoded: { br, gzip: gzipSync(body, { level: 9 }) } };
}

const TYPES: Record<string, string> = { '.ts': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

/**
 * Loads the panel's files once: the client's TypeScript with its types stripped (Node's own
 * stripper: no build step, and the browser runs what tsc checked), the SHARED modules alike, its stylesheet, and the UI
 * libraries' published modules (BUNDLED ones at their first request), all under `/panel/assets/<version>/`, each also compressed with
 * brotli (quality 6: within 10% of the smallest, 20 times faster) and gzip (at the first request for the panel: api/panel/index.ts).
 */
export function loadAssets(prefix: string): Assets {
  const files = new Map<string, Asset>();
  for (const name of readdirSync(CLIENT)) {
    const extension = path.extname(name);
    if (!(extension in TYPES) || name.endsWith('.d.ts')) continue;
    const source = readFileSync(path.join(CLIENT, name), 'utf8');
    const body = extension === '.ts' ? stripTypeScriptTypes(source, { mode: 'strip' }) : source;
    files.set(name, asset(Buffer.from(body), TYPES[extension]!));
  }
  const vendorPaths: Record<string, string> = {};
  for (const [specifier, file] of Object.entries(SHARED)) {
    const name = `shared-${specifier}.ts`;
    files.set(name, asset(Buffer.from(stripTypeScriptTypes(readFileSync(file, 'utf8'), { mode: 'strip' })), TYPES['.ts']!));
    vendorPaths[specifier] = name;
  }
  for (const [specifier, module] of Object.entries(VENDOR)) {
    const name = `vendor-${module.replaceAll('/', '-')}.mjs`;
    files.set(name, asset(readFileSync(fileURLToPath(import.meta.resolve(module))), TYPES['.mjs']!));
    vendorPaths[specifier] = name;
  }
  const hash = createHash('sha256');
  for (const [name, file] of [...files].toSorted(([a], [b]) => a.localeCompare(b))) hash.update(name).update(file.body);
  const builds = new Map<string, { module: string; built?: Promise<Asset> }>();
  for (const [specifier, module] of Object.entries(BUNDLED)) {
    const name = `vendor-${module.replaceAll('/', '-')}.mjs`;
    builds.set(name, { module });
    vendorPaths[specifier] = name;
    hash.update(name).update(readFileSync(fileURLToPath(import.meta.resolve(`${module}/package.json`))));
  }
  const version = hash.digest('hex').slice(0, 12);
  const imports = Object.fromEntries(Object.entries(vendorPaths).map(([specifier, name]) => [specifier, `${prefix}/${version}/${name}`]));
  const modules = [...files.keys()].filter((name) => /\.(ts|mjs)$/.test(name)).map((name) => `${prefix}/${version}/${name}`);
  const bundled = (name: string) => {
    const entry = builds.get(name);
    if (!entry) return undefined;
    // A failed build is tried again at the next request.
    entry.built ??= bundle(entry.module).catch((error: unknown) => {
      entry.built = undefined;
      throw error;
    });
    return entry.built;
  };
  return { version, files, importMap: JSON.stringify({ imports }), modules, bundled };
}
