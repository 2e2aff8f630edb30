package classroom;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;

/**
 * The server's side of a WebSocket (RFC 6455), what both of the stand-in's servers speak (the
 * NetworkTables 4 server and the HALSim server): the HTTP request head, the opening handshake,
 * frames read (masked or not, fragmented or not) up to a bound on a message's size, frames sent.
 */
final class WebSocket {
  private static final String GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  /** The longest request head read, in bytes. */
  private static final int MAX_HEAD = 16384;

  /** Close codes used here (RFC 6455 section 7.4.1). */
  static final int NORMAL = 1000;
  static final int TOO_BIG = 1009;

  /** An HTTP request's head: its method, its path (with the query) and its headers (names in any case). */
  record Request(String method, String path, Map<String, String> headers) {
    /** Whether it asks for a WebSocket. */
    boolean upgrade() {
      return "websocket".equalsIgnoreCase(headers.getOrDefault("Upgrade", "").trim());
    }

    String header(String name) {
      return headers.getOrDefault(name, "");
    }
  }

  /** A data message: its opcode (1 text, 2 binary) and its bytes. */
  record Message(int opcode, byte[] data) {
    boolean text() {
      return opcode == 0x1;
    }

    String string() {
      return new String(data, StandardCharsets.UTF_8);
    }
  }

  private final Socket socket;
  private final InputStream in;
  private final OutputStream out;
  private final int maxMessage;
  private volatile boolean closed;
  /** The close code the peer sent, or 0. */
  private volatile int peerCloseCode;

  private WebSocket(Socket socket, InputStream in, OutputStream out, int maxMessage) {
    this.socket = socket;
    this.in = in;
    this.out = out;
    this.maxMessage = maxMessage;
  }

  /** The port in the environment variable `variable`, else `fallback` (with a line saying why when it is set but is not a number). */
  static int portFromEnvironment(String variable, int fallback) {
    String raw = System.getenv(variable);
    if (raw == null || raw.isBlank()) {
      return fallback;
    }
    try {
      return Integer.parseInt(raw.trim());
    } catch (NumberFormatException error) {
      System.err.println(variable + "=" + raw + " is not a port number: using " + fallback);
      return fallback;
    }
  }

  /**
   * Listens on every address at `port` (the program exits with a line naming `variable` when it
   * cannot), serves each connection with `serve` on a daemon thread of its own (`name`-client), and
   * runs `tick` every 20 ms (the robot's period) on a daemon thread (`name`-send).
   */
  static void listen(int port, int backlog, String variable, String name, Consumer<Socket> serve, Runnable tick) {
    ServerSocket server;
    try {
      server = new ServerSocket();
      server.setReuseAddress(true);
      server.bind(new InetSocketAddress("0.0.0.0", port), backlog);
    } catch (IOException error) {
      System.err.println("stand-in simulator: cannot listen on port " + port + " (" + variable + "): " + error.getMessage());
      System.exit(1);
      return;
    }
    daemon(name + "-accept", () -> {
      while (true) {
        Socket socket;
        try {
          socket = server.accept();
        } catch (IOException error) {
          return;
        }
        daemon(name + "-client", () -> serve.accept(socket));
      }
    });
    daemon(name + "-send", () -> {
      while (true) {
        try {
          Thread.sleep(20);
        } catch (InterruptedException error) {
          return;
        }
        tick.run();
      }
    });
  }

  private static void daemon(String name, Runnable body) {
    Thread thread = new Thread(body, name);
    thread.setDaemon(true);
    thread.start();
  }

  /** Reads an HTTP request's head; null when the connection ends first, the head is longer than 16 KiB or is not HTTP. */
  static Request readRequest(InputStream in) throws IOException {
    List<String> lines = new ArrayList<>();
    StringBuilder line = new StringBuilder();
    int total = 0;
    for (int c; (c = in.read()) != -1; ) {
      if (++total > MAX_HEAD) {
        return null;
      }
      if (c != '\n') {
        line.append((char) c);
        continue;
      }
      String text = line.toString().replace("\r", "");
      line.setLength(0);
      if (!text.isEmpty()) {
        lines.add(text);
        continue;
      }
      if (lines.isEmpty()) {
        return null;
      }
      String[] request = lines.get(0).split(" ");
      if (request.length < 2) {
        return null;
      }
      Map<String, String> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
      for (String header : lines.subList(1, lines.size())) {
        int colon = header.indexOf(':');
        if (colon > 0) {
          headers.put(header.substring(0, colon).trim(), header.substring(colon + 1).trim());
        }
      }
      return new Request(request[0], request[1], headers);
    }
    return null;
  }

  /** Answers a request with a plain HTTP response that closes the connection. */
  static void respond(OutputStream out, int status, String reason, String contentType, byte[] body) throws IOException {
    String head = "HTTP/1.1 " + status + " " + reason + "\r\nContent-Type: " + contentType + "\r\nContent-Length: " + body.length + "\r\nConnection: close\r\n\r\n";
    out.write(head.getBytes(StandardCharsets.US_ASCII));
    out.write(body);
    out.flush();
  }

  /**
   * Completes the opening handshake of `request` (101 Switching Protocols, with `protocol` when
   * not null) and returns the WebSocket, which reads messages of at most `maxMessage` bytes.
   */
  static WebSocket accept(Socket socket, InputStream in, OutputStream out, Request request, String protocol, int maxMessage) throws IOException {
    String accept;
    try {
      MessageDigest sha1 = MessageDigest.getInstance("SHA-1");
      accept = Base64.getEncoder().encodeToString(sha1.digest((request.header("Sec-WebSocket-Key") + GUID).getBytes(StandardCharsets.US_ASCII)));
    } catch (NoSuchAlgorithmException error) {
      throw new IOException(error);
    }
    String head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\n" + (protocol == null ? "" : "Sec-WebSocket-Protocol: " + protocol + "\r\n") + "\r\n";
    out.write(head.getBytes(StandardCharsets.US_ASCII));
    out.flush();
    socket.setTcpNoDelay(true);
    return new WebSocket(socket, in, out, maxMessage);
  }

  /**
   * The next data message. Pings are answered; null when the connection ends: the peer closed it
   * (its code is then {@link #peerCloseCode()}, and the caller answers with {@link #close}), the
   * stream ended, or a message was longer than the bound (then it is closed here with 1009).
   */
  Message read() throws IOException {
    ByteArrayOutputStream message = new ByteArrayOutputStream();
    int messageOpcode = 0;
    while (true) {
      int first = in.read();
      int second = in.read();
      if (first < 0 || second < 0) {
        return null;
      }
      int opcode = first & 0x0f;
      long length = second & 0x7f;
      if (length == 126) {
        length = (readByte() << 8) | readByte();
      } else if (length == 127) {
        length = 0;
        for (int i = 0; i < 8; i++) {
          length = (length << 8) | readByte();
        }
      }
      boolean control = (opcode & 0x8) != 0;
      if (length < 0 || length > maxMessage - (control ? 0 : message.size()) || (control && length > 125)) {
        refuse(length);
        return null;
      }
      byte[] mask = (second & 0x80) != 0 ? in.readNBytes(4) : null;
      byte[] payload = in.readNBytes((int) length);
      if (payload.length < length) {
        return null;
      }
      if (mask != null) {
        for (int i = 0; i < payload.length; i++) {
          payload[i] ^= mask[i % 4];
        }
      }
      switch (opcode) {
        case 0x8 -> {
          peerCloseCode = payload.length >= 2 ? ((payload[0] & 0xff) << 8) | (payload[1] & 0xff) : NORMAL;
          return null;
        }
        case 0x9 -> send(0xA, payload);
        case 0xA -> {}
        default -> {
          if (opcode != 0) {
            messageOpcode = opcode;
            message.reset();
          }
          message.write(payload);
          if ((first & 0x80) != 0) {
            return new Message(messageOpcode, message.toByteArray());
          }
        }
      }
    }
  }

  /**
   * Closes with 1009 (message too big), then reads what is left of the frame (up to 1 MiB, 2 s) before
   * closing the connection: closed with unread data, TCP would reset it, and the peer could lose the
   * close frame that says why.
   */
  private void refuse(long length) {
    String reason = "message too big: the limit is " + maxMessage + " bytes";
    try {
      synchronized (this) {
        send(0x8, closePayload(TOO_BIG, reason));
        closed = true;
      }
      socket.shutdownOutput();
      socket.setSoTimeout(2000);
      long left = length < 0 ? 1 << 20 : Math.min(length + 4, 1 << 20);
      byte[] sink = new byte[8192];
      for (int read; left > 0 && (read = in.read(sink, 0, (int) Math.min(sink.length, left))) > 0; ) {
        left -= read;
      }
    } catch (IOException error) {
      // Gone or slow: closed below either way.
    }
    close(TOO_BIG, reason);
  }

  private static byte[] closePayload(int code, String reason) {
    byte[] text = reason.getBytes(StandardCharsets.UTF_8);
    byte[] payload = new byte[2 + Math.min(text.length, 123)];
    payload[0] = (byte) (code >>> 8);
    payload[1] = (byte) code;
    System.arraycopy(text, 0, payload, 2, payload.length - 2);
    return payload;
  }

  private int readByte() throws IOException {
    int value = in.read();
    if (value < 0) {
      throw new IOException("the connection ended in a frame header");
    }
    return value;
  }

  /** The close code the peer sent (1000 when it sent none), or 0 when it sent no close frame. */
  int peerCloseCode() {
    return peerCloseCode;
  }

  /** Sends one unfragmented frame. */
  synchronized void send(int opcode, byte[] payload) throws IOException {
    if (closed) {
      throw new IOException("the WebSocket is closed");
    }
    ByteArrayOutputStream frame = new ByteArrayOutputStream(payload.length + 10);
    frame.write(0x80 | opcode);
    if (payload.length < 126) {
      frame.write(payload.length);
    } else if (payload.length < 65536) {
      frame.write(126);
      frame.write(payload.length >>> 8);
      frame.write(payload.length);
    } else {
      frame.write(127);
      for (int shift = 56; shift >= 0; shift -= 8) {
        frame.write((int) ((long) payload.length >>> shift));
      }
    }
    frame.write(payload);
    out.write(frame.toByteArray());
    out.flush();
  }

  void sendText(String text) throws IOException {
    send(0x1, text.getBytes(StandardCharsets.UTF_8));
  }

  /** Sends a close frame (code and reason) unless one was sent, then closes the connection. */
  void close(int code, String reason) {
    synchronized (this) {
      if (!closed) {
        try {
          send(0x8, closePayload(code, reason));
        } catch (IOException error) {
          // The peer is gone already.
        }
        closed = true;
      }
    }
    try {
      socket.close();
    } catch (IOException ignored) {
      // Already closed.
    }
  }
}
