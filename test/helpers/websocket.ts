import WebSocket from 'ws';

/** Resolves once `socket` echoes a message (the tunnel to the editor works). */
export async function echoes(socket: WebSocket): Promise<void> {
  const text = `ping ${Math.random()}`;
  const echoed = new Promise<string>((resolve) => socket.once('message', (data: Buffer) => resolve(data.toString())));
  socket.send(text);
  expect(await echoed).toBe(text);
}

/** Whether `socket` closes within `ms`. */
export function closesWithin(socket: WebSocket, ms: number): Promise<boolean> {
  if (socket.readyState === WebSocket.CLOSED) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
