/**
 * Jest runs the TypeScript sources as native ES modules (swc strips the types, nothing is bundled),
 * the same modules that Node 24 runs in production. One migrated template database is made per run
 * (test/helpers/global-setup.ts); each worker clones it (test/helpers/db.ts).
 */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2024' }, module: { type: 'es6' } }],
  },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  testSequencer: '<rootDir>/test/sequencer.mjs',
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
  // Every JSON answer of a control plane a test receives is checked against the OpenAPI document.
  setupFilesAfterEnv: ['<rootDir>/test/helpers/contract-setup.ts'],
  // A bound for a test that hangs, not a measure of speed: four workers on 2 cores make every step slower.
  testTimeout: 60000,
  // One file at a time unless told: `npm test -- <file>...` runs them in turn. scripts/test-lanes.sh
  // runs its shared lane with two workers per core (TEST_LANES_WORKERS), each file on containers labelled
  // with its own control-plane id, then the `// @lane alone` files by themselves.
  maxWorkers: 1,
  // A new worker process for every file (a limit every worker is over after a file): a file's
  // PGlite instances, Chromium and sockets end with its process, not in one process for the lane.
  // (V8 has aborted, once, on WebAssembly code freed after many PGlite instances in one process.)
  workerIdleMemoryLimit: '1MB',
};
