/**
 * Workspace backups: throughput of writeBackupFile (engine archive → repack and hash → gzip → file)
 * and of restoreBackup (one read: file → gunzip → check and repack → engine extract into a fresh volume)
 * on a home volume of SIZE_MB (default 1024) of mixed data (half /dev/urandom, half base64 text,
 * 2000 small source files), against busybox tar in a container on the same volume, measured in the
 * same run, interleaved, ROUNDS (default 3) times, reporting medians:
 *   backup baseline:  docker run --rm -v <vol>:/v classroom-workspace:test tar czf - /v > /dev/null
 *   restore baseline: docker run -i --rm -v <fresh vol>:/v classroom-workspace:test tar xzf - -C /v < <the backup file>
 * Throughput is the volume's file bytes per second on both sides (MB = 10^6 bytes). Also reports
 * the growth of this process's resident set size over the run (its peak minus its size before the
 * first round), and how long verifying the file alone takes (what `Backups.restore` adds for a file without its manifest beside it). Up to ~65 MB
 * of that growth is V8's young generation growing to its default maximum under a high allocation
 * rate (seen with v8.getHeapSpaceStatistics: new_space 67 MB reserved, under 3 MB in use), not data
 * held: `node --max-semi-space-size=1 bench/backup.ts` caps it. Aborts after 10 minutes; removes
 * every volume, container and file it made.
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/backup.ts
 */
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, openSync, closeSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { restoreBackup } from '../src/backup/restore-backup.ts';
import { verifyBackup } from '../src/backup/verify-backup.ts';
import { writeBackupFile } from '../src/backup/write-backup.ts';
import { DockerRuntime } from '../src/docker/docker-runtime.ts';
import { names } from '../src/docker/runtime.ts';
import { CONTROL_PLANE_LABEL, deadline, docker, IMAGE, median, processRssBytes, removeLabelled } from './lib.ts';

const SIZE_MB = Number(process.env.SIZE_MB ?? 1024);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const controlPlaneId = `bench-${randomBytes(4).toString('hex')}`;
const directory = mkdtempSync(path.join(os.tmpdir(), 'cp-bench-backup-'));
const cleanup = async () => {
  await removeLabelled(CONTROL_PLANE_LABEL, controlPlaneId);
  rmSync(directory, { recursive: true, force: true });
};
deadline(10 * 60_000, cleanup);

const runtime = new DockerRuntime({ controlPlaneId });
const workspace = { workspaceId: randomUUID(), slug: `bench-${randomBytes(3).toString('hex')}`, ownerEmail: 'bench@school.test' };
const volume = names.volume(workspace.slug);
const labelArgs = ['--label', `${CONTROL_PLANE_LABEL}=${controlPlaneId}`];

/** Runs `docker` with these arguments, stdin and stdout from/to the given descriptors; rejects on a non-zero exit. */
function dockerCli(args: string[], stdin: number | 'ignore' = 'ignore', stdout: number | 'ignore' = 'ignore'): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', args, { stdio: [stdin, stdout, 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`docker ${args[0]} exited with ${code}`))));
  });
}

async function timed(action: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await action();
  return (performance.now() - started) / 1000;
}

// Peak RSS, sampled through the whole run.
const rssBefore = processRssBytes(process.pid);
let rssPeak = rssBefore;
const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, processRssBytes(process.pid))), 50);

try {
  await runtime.ensureVolume(workspace, volume);
  const files = Math.max(1, Math.round(SIZE_MB / 16));
  console.log(`filling ${volume} with ~${SIZE_MB} MB (${files} random files of 8 MB, ${files} base64 text files of ~8 MB, 2000 small files)...`);
  const fill = `set -e; cd /home/student; mkdir -p random text src
i=0; while [ $i -lt ${files} ]; do dd if=/dev/urandom of=random/r$i.bin bs=1M count=8 2>/dev/null; i=$((i+1)); done
i=0; while [ $i -lt ${files} ]; do head -c 6291456 /dev/urandom | base64 > text/t$i.txt; i=$((i+1)); done
i=0; while [ $i -lt 2000 ]; do seq $i $((i+150)) > src/f$i.txt; i=$((i+1)); done
chown -R 1000:1000 .`;
  console.log(
    `filled in ${(await timed(() => dockerCli(['run', '--rm', '--network', 'none', ...labelArgs, '-v', `${volume}:/home/student`, IMAGE, 'sh', '-c', fill]))).toFixed(0)} s`,
  );

  const backupFile = path.join(directory, 'backup.tar.gz');
  const ours = { backup: [] as number[], restore: [] as number[], verify: [] as number[] };
  const baseline = { backup: [] as number[], restore: [] as number[] };
  let contentBytes = 0;

  const ourBackup = () =>
    timed(async () => {
      contentBytes = (await writeBackupFile(backupFile, { runtime, volume, image: IMAGE, workspace })).bytes;
    });
  const baselineBackup = async () => {
    const devNull = openSync('/dev/null', 'w');
    try {
      return await timed(() =>
        dockerCli(['run', '--rm', '--network', 'none', ...labelArgs, '-v', `${volume}:/v`, IMAGE, 'tar', 'czf', '-', '/v'], 'ignore', devNull),
      );
    } finally {
      closeSync(devNull);
    }
  };
  const ourRestore = async (round: number) => {
    const staging = `${volume}-restore-${round}`;
    const seconds = await timed(() => restoreBackup({ runtime, path: backupFile, volume: staging, image: IMAGE, workspace }));
    await runtime.removeVolumeNamed(staging);
    return seconds;
  };
  const baselineRestore = async (round: number) => {
    const target = `${volume}-baseline-${round}`;
    await docker.createVolume({ Name: target, Labels: { [CONTROL_PLANE_LABEL]: controlPlaneId } });
    const input = openSync(backupFile, 'r');
    try {
      return await timed(() =>
        dockerCli(['run', '-i', '--rm', '--network', 'none', ...labelArgs, '-v', `${target}:/v`, IMAGE, 'tar', 'xzf', '-', '-C', '/v'], input),
      );
    } finally {
      closeSync(input);
      await docker.getVolume(target).remove();
    }
  };

  // Each round alternates which side goes first; every round's restores read that round's backup.
  for (let round = 0; round < ROUNDS; round++) {
    if (round % 2 === 0) {
      ours.backup.push(await ourBackup());
      baseline.backup.push(await baselineBackup());
      ours.restore.push(await ourRestore(round));
      baseline.restore.push(await baselineRestore(round));
    } else {
      baseline.backup.push(await baselineBackup());
      ours.backup.push(await ourBackup());
      baseline.restore.push(await baselineRestore(round));
      ours.restore.push(await ourRestore(round));
    }
    // How much of a restore its first pass takes: the verification alone, timed apart.
    ours.verify.push(await timed(() => verifyBackup(backupFile)));
    console.log(
      `round ${round + 1}: backup ${ours.backup.at(-1)!.toFixed(1)} s (busybox ${baseline.backup.at(-1)!.toFixed(1)} s), restore ${ours.restore.at(-1)!.toFixed(1)} s (busybox ${baseline.restore.at(-1)!.toFixed(1)} s), verify alone ${ours.verify.at(-1)!.toFixed(1)} s`,
    );
  }

  const mbPerSecond = (seconds: number) => contentBytes / 1e6 / seconds;
  const row = (what: string, ourSeconds: number[], baselineSeconds: number[]) => {
    const oursRate = mbPerSecond(median(ourSeconds));
    const baselineRate = mbPerSecond(median(baselineSeconds));
    return { what, 'ours MB/s': oursRate.toFixed(1), 'busybox tar MB/s': baselineRate.toFixed(1), ratio: (oursRate / baselineRate).toFixed(2) };
  };
  console.log(
    `\nvolume: ${(contentBytes / 1e6).toFixed(0)} MB of file data; backup file: ${(statSync(backupFile).size / 1e6).toFixed(0)} MB; medians of ${ROUNDS} rounds`,
  );
  console.table([row('backup (target ≥ 0.8)', ours.backup, baseline.backup), row('restore (target ≥ 0.8)', ours.restore, baseline.restore)]);
  console.log(`verification alone: ${mbPerSecond(median(ours.verify)).toFixed(1)} MB/s (a stored backup's restore skips it: its manifest is beside it)`);
  console.log(
    `RSS growth of this process: ${((rssPeak - rssBefore) / 1e6).toFixed(0)} MB (target < 100 MB; ${(rssBefore / 1e6).toFixed(0)} MB before, ${(rssPeak / 1e6).toFixed(0)} MB at peak)`,
  );
} finally {
  clearInterval(sampler);
  await cleanup();
}
