/**
 * The pages' bundles (api/bundle.ts) share esbuild-wasm's one service: bundles asked for at the same
 * moment (the Driver Station page and the panel's tar packer, first requested together) are each
 * made whole, and the service is let go once none is left (a later bundle starts it again).
 */
import { bundleText } from '../../api/bundle.ts';

const bundleOf = (value: number) =>
  bundleText({ stdin: { contents: `export const value = ${value} + 1;`, loader: 'ts' }, bundle: true, format: 'esm', minify: true, logLevel: 'silent' });

it('makes bundles asked for at once, each whole, and again after the service was let go', async () => {
  const made = await Promise.all([1, 2, 3, 4].map((value) => bundleOf(value)));
  made.forEach((text, index) => expect(text).toMatch(new RegExp(`${index + 1}\\s*\\+\\s*1|=\\s*${index + 2}\\b`)));
  expect(await bundleOf(9)).toMatch(/9\s*\+\s*1|=\s*10\b/);
}, 30_000);
