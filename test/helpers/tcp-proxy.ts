import net from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A loopback TCP proxy in front of a real server (on TCP, or on a Unix socket such as Docker
 * Engine's), for fault injection: `dropConnections()` ends every open connection, `stall()` accepts
 * but forwards nothing, `restore()` forwards again.
 */
export class TcpProxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private mode: 'forward' | 'stall' = 'forward';
  private readonly target: { host: string; port: number } | { path: string };
  port = 0;

  constructor(target: { host: string; port: number } | { path: string }) {
    this.target = target;
    this.server = net.createServer((client) => this.accept(client));
  }

  /** Starts listening on a free loopback port (or the given one). */
  async listen(port = 0): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** Starts listening on a Unix socket at `socketPath` (a Docker Engine's address, say, that answers only from now on). */
  async listenAt(socketPath: string): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(socketPath, () => resolve());
    });
    return this;
  }

  private accept(client: net.Socket): void {
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    client.on('error', () => client.destroy());
    // Stalled: what the client sends is read and dropped, so that its end is seen (a paused socket never says so).
    if (this.mode === 'stall') return void client.resume();
    const upstream = net.connect(this.target);
    this.sockets.add(upstream);
    upstream.on('close', () => (this.sockets.delete(upstream), client.destroy()));
    upstream.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    client.pipe(upstream).pipe(client);
  }

  /** How many connections are open (clients and, when forwarding, their upstreams). */
  get openConnections(): number {
    return this.sockets.size;
  }

  /** Destroys every open connection; new ones are still accepted in the current mode. */
  dropConnections(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  /** New connections hang: accepted, never answered. Existing ones are dropped. */
  stall(): void {
    this.mode = 'stall';
    this.dropConnections();
  }

  /** New connections are forwarded again. */
  restore(): void {
    this.mode = 'forward';
  }

  /** Stops listening and drops every connection (the database is "gone"). */
  async close(): Promise<void> {
    this.dropConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Puts a TcpProxy in front of the database at `url`; returns the proxy and the URL through it. */
export async function behindProxy(url: string): Promise<{ proxy: TcpProxy; url: string }> {
  const target = new URL(url);
  const proxy = await new TcpProxy({ host: target.hostname, port: Number(target.port) }).listen();
  const through = new URL(url);
  through.port = String(proxy.port);
  return { proxy, url: through.toString() };
}
