/**
 * A git server on loopback for the import's tests: Git's own `git http-backend` (the smart HTTP
 * protocol, as GitHub and GitLab speak it) behind a small Node https server, with a self-signed
 * certificate made for the test (localhost, 127.0.0.1, 127.0.0.2) that git and the control plane
 * trust through IMPORT_CA_FILE. Besides the repositories under `/git/`, it answers paths that play
 * a bad server: a redirect, a page that is no repository, one that never answers, and one that
 * answers slowly.
 */
import { execFile, spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import type http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** How long `/slow/...` waits before it answers. */
export const SLOW_MS = 1500;

/** git with no configuration of the machine's or the user's, and a fixed author. */
const GIT_ENV = {
  PATH: '/usr/bin:/bin',
  HOME: os.tmpdir(),
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'Team 9999',
  GIT_AUTHOR_EMAIL: 'team@robots.test',
  GIT_COMMITTER_NAME: 'Team 9999',
  GIT_COMMITTER_EMAIL: 'team@robots.test',
  LC_ALL: 'C',
};

/** A file of a repository: its text or bytes, optionally executable, or a symbolic link to `link`. */
export type RepoFile = string | Buffer | { link: string } | { text: string; executable: true };

/** The server, its certificate and its repositories. */
export interface GitServer {
  /** `https://<host>:<port>`, for a host the certificate names (localhost, 127.0.0.1, 127.0.0.2). */
  origin(host?: string): string;
  port: number;
  /** The PEM file of the server's self-signed certificate (its own CA). */
  caFile: string;
  /** Makes a bare repository `/git/<name>.git` with one commit of `files` on `branch` (default main), and more branches if given. */
  repository(
    name: string,
    files: Record<string, RepoFile>,
    options?: { branch?: string; branches?: Record<string, Record<string, RepoFile>> },
  ): Promise<string>;
  /** Paths that answer a redirect to `location` (from `/redirect/<name>/...`). */
  redirect(name: string, location: string): string;
  /** Requests the server received, in order (method and path). */
  requests: string[];
  close(): Promise<void>;
}

/**
 * Starts the server on 127.0.0.1 (and 127.0.0.2's loopback address is named by its certificate,
 * for a redirect target). Paths: `/git/<repo>.git/...` (git http-backend), `/redirect/<name>/...`
 * (302 to where `redirect` said, with the rest of the path), `/page/...` (200, an HTML page: no
 * repository), `/hang/...` (accepted, never answered), `/slow/<any of these>` (the same, SLOW_MS later).
 */
export async function startGitServer(): Promise<GitServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'cp-git-server-'));
  const root = path.join(dir, 'repositories');
  await mkdir(root);
  const key = path.join(dir, 'key.pem');
  const caFile = path.join(dir, 'cert.pem');
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    caFile,
    '-days',
    '2',
    '-subj',
    '/CN=localhost',
    '-addext',
    'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:127.0.0.2',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
  ]);
  const redirects = new Map<string, string>();
  const requests: string[] = [];
  const hanging = new Set<Socket>();
  const server = https.createServer({ key: await readFile(key), cert: await readFile(caFile) }, (request, response) => {
    const url = new URL(request.url ?? '/', 'https://localhost');
    requests.push(`${request.method} ${url.pathname}${url.search}`);
    // A slow server: the same answer, a while later (so that a page shows each phase).
    if (url.pathname.startsWith('/slow/')) {
      url.pathname = url.pathname.slice('/slow'.length);
      return void setTimeout(() => answer(url, request, response), SLOW_MS);
    }
    answer(url, request, response);
  });
  const answer = (url: URL, request: http.IncomingMessage, response: http.ServerResponse) => {
    if (url.pathname.startsWith('/git/')) return backend(root, url, request, response);
    const redirect = /^\/redirect\/([^/]+)(\/.*)$/.exec(url.pathname);
    if (redirect && redirects.has(redirect[1]!)) {
      response.writeHead(302, { location: `${redirects.get(redirect[1]!)}${redirect[2]}${url.search}` });
      return void response.end();
    }
    if (url.pathname.startsWith('/page/')) {
      response.writeHead(200, { 'content-type': 'text/html' });
      return void response.end('<html><body>A team page, not a repository.</body></html>');
    }
    if (url.pathname.startsWith('/hang/')) return void hanging.add(request.socket);
    response.writeHead(404, { 'content-type': 'text/plain' });
    response.end('not found');
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;

  return {
    port,
    caFile,
    requests,
    origin: (host = 'localhost') => `https://${host}:${port}`,
    async repository(name, files, options = {}) {
      const work = await mkdtemp(path.join(dir, 'work-'));
      const git = (...args: string[]) => run('git', args, { cwd: work, env: GIT_ENV, maxBuffer: 64 * 1024 * 1024 });
      await git('init', '-q', '-b', options.branch ?? 'main');
      await writeFiles(work, files);
      await git('add', '-A');
      await git('commit', '-q', '-m', 'Robot code');
      for (const [branch, more] of Object.entries(options.branches ?? {})) {
        await git('checkout', '-q', '-b', branch);
        await writeFiles(work, more);
        await git('add', '-A');
        await git('commit', '-q', '-m', `On ${branch}`);
        await git('checkout', '-q', options.branch ?? 'main');
      }
      await run('git', ['clone', '-q', '--bare', work, path.join(root, `${name}.git`)], { env: GIT_ENV });
      await rm(work, { recursive: true, force: true });
      return `/git/${name}.git`;
    },
    redirect(name, location) {
      redirects.set(name, location);
      return `/redirect/${name}`;
    },
    async close() {
      for (const socket of hanging) socket.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function writeFiles(work: string, files: Record<string, RepoFile>): Promise<void> {
  for (const [name, content] of Object.entries(files)) {
    const file = path.join(work, name);
    await mkdir(path.dirname(file), { recursive: true });
    if (typeof content === 'object' && 'link' in content) await symlink(content.link, file);
    else if (typeof content === 'object' && 'executable' in content) {
      await writeFile(file, content.text);
      await chmod(file, 0o755);
    } else await writeFile(file, content);
  }
}

/** Answers one request with `git http-backend` (a CGI program): the request's body in, its headers and body out. */
function backend(root: string, url: URL, request: http.IncomingMessage, response: http.ServerResponse): void {
  const child = spawn('git', ['http-backend'], {
    env: {
      ...GIT_ENV,
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: decodeURIComponent(url.pathname.slice('/git'.length)),
      QUERY_STRING: url.search.slice(1),
      REQUEST_METHOD: request.method ?? 'GET',
      CONTENT_TYPE: request.headers['content-type'] ?? '',
      REMOTE_ADDR: '127.0.0.1',
      ...(request.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: request.headers['content-encoding'] } : {}),
      ...(request.headers['git-protocol'] ? { GIT_PROTOCOL: String(request.headers['git-protocol']) } : {}),
    },
  });
  request.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let started = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (started) return void response.write(chunk);
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    started = true;
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
      const at = line.indexOf(':');
      const name = line.slice(0, at).trim().toLowerCase();
      const value = line.slice(at + 1).trim();
      if (name === 'status') status = Number(value.split(' ')[0]);
      else headers[name] = value;
    }
    response.writeHead(status, headers);
    response.write(head.subarray(end + 4));
  });
  child.on('close', () => {
    if (!started) response.writeHead(500);
    response.end();
  });
}
