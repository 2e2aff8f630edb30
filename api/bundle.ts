/**
 * esbuild's bundles for the pages (the Driver Station page's script, the panel's bundled vendor
 * modules), made on first request. esbuild-wasm runs one service per process, whose `stop` ends
 * every build in flight: so the service is let go only once no build is left (two pages first asked
 * for at the same moment both get their bundle), and nothing of it stays once they are made.
 */
import { build, stop, type BuildOptions } from 'esbuild-wasm';

/** Builds in flight. */
let building = 0;

/** The text of the one output file of `options` (write: false), built by the shared service. */
export async function bundleText(options: BuildOptions): Promise<string> {
  building += 1;
  try {
    const result = await build({ ...options, write: false });
    return result.outputFiles[0]!.text;
  } finally {
    building -= 1;
    if (building === 0) void stop();
  }
}
