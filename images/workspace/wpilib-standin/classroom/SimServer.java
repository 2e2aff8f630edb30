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
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The classroom stand-in simulator's server, on NT4_PORT (default 5810) where WPILib's simulator
 * serves NetworkTables 4:
 *
 * <ul>
 *   <li>a WebSocket at {@code /nt/<client name>} speaking NetworkTables 4 (subprotocols
 *       v4.1.networktables.first.wpi.edu and networktables.first.wpi.edu): JSON text frames for
 *       subscribe, unsubscribe and announce; MessagePack binary frames for values and time
 *       synchronisation. It publishes every SmartDashboard value under {@code /SmartDashboard/},
 *       a Field2d's robot pose as WPILib does ({@code /SmartDashboard/<name>/Robot}, a double[] of
 *       x, y and degrees), the robot's mode ({@code /classroom/mode}) and the time since the robot
 *       started ({@code /classroom/time}, seconds). What clients publish is ignored (read-only).
 *   <li>any other GET: {@code {"alive":true,"standIn":true,"mode":...,"values":{...}}}, which is
 *       where the control plane's alive probe sees the run come up.
 * </ul>
 *
 * <p>Values go to subscribers when they change, at most every 20 ms (the robot's period).
 */
public final class SimServer {
  private static final String GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  private static final String V41 = "v4.1.networktables.first.wpi.edu";
  private static final String V40 = "networktables.first.wpi.edu";
  private static final long STARTED = System.nanoTime();

  /** A published topic: its id, NetworkTables type and value, and whether it changed since it was last sent. */
  private static final class Topic {
    final int id;
    final String name;
    final String type;
    volatile Object value;
    volatile boolean dirty = true;

    Topic(int id, String name, String type, Object value) {
      this.id = id;
      this.name = name;
      this.type = type;
      this.value = value;
    }
  }

  /** One subscription of a client: the names or prefixes it asked for. */
  private record Subscription(List<String> topics, boolean prefix, boolean topicsOnly) {
    boolean wants(String name) {
      for (String topic : topics) {
        if (prefix ? name.startsWith(topic) : name.equals(topic)) {
          return true;
        }
      }
      return false;
    }
  }

  /** A connected NetworkTables client. */
  private static final class Client {
    final Socket socket;
    final OutputStream out;
    final Map<Integer, Subscription> subscriptions = new ConcurrentHashMap<>();
    final Map<Integer, Boolean> announced = new ConcurrentHashMap<>();

    Client(Socket socket, OutputStream out) {
      this.socket = socket;
      this.out = out;
    }

    boolean wants(Topic topic, boolean values) {
      for (Subscription subscription : subscriptions.values()) {
        if (subscription.wants(topic.name) && !(values && subscription.topicsOnly())) {
          return true;
        }
      }
      return false;
    }

    synchronized void send(int opcode, byte[] payload) throws IOException {
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
  }

  private static final Map<String, Topic> TOPICS = new ConcurrentHashMap<>();
  private static final List<Client> CLIENTS = new CopyOnWriteArrayList<>();
  private static final Map<String, Object> VALUES = new ConcurrentHashMap<>();
  private static volatile String mode = "starting";
  private static ServerSocket server;
  private static int nextId = 1;

  private SimServer() {}

  /** Starts the server on NT4_PORT (once); exits the program when the port cannot be had. */
  public static synchronized void start() {
    if (server != null) {
      return;
    }
    String raw = System.getenv("NT4_PORT");
    int port = 5810;
    if (raw != null && !raw.isBlank()) {
      try {
        port = Integer.parseInt(raw.trim());
      } catch (NumberFormatException error) {
        System.err.println("NT4_PORT=" + raw + " is not a port number: using 5810");
      }
    }
    try {
      server = new ServerSocket();
      server.setReuseAddress(true);
      server.bind(new InetSocketAddress("0.0.0.0", port), 64);
    } catch (IOException error) {
      System.err.println("stand-in simulator: cannot listen on port " + port + ": " + error.getMessage());
      System.exit(1);
      return;
    }
    publish("/classroom/mode", "string", mode);
    publish("/classroom/time", "double", 0.0);
    Thread acceptor = new Thread(SimServer::accept, "nt4-accept");
    acceptor.setDaemon(true);
    acceptor.start();
    Thread sender = new Thread(SimServer::sendLoop, "nt4-send");
    sender.setDaemon(true);
    sender.start();
    System.out.println("[stand-in] simulator listening on port " + port + " (NT4_PORT): NetworkTables 4 at /nt/<name>, GET / shows the values as JSON");
  }

  public static void setMode(String value) {
    mode = value;
    publish("/classroom/mode", "string", value);
  }

  /** A SmartDashboard value: kept for GET / and published under /SmartDashboard/. */
  public static void put(String key, Object value) {
    VALUES.put(key, value);
    String type = value instanceof Double ? "double" : value instanceof Boolean ? "boolean" : "string";
    publish("/SmartDashboard/" + key, type, value instanceof String || value instanceof Double || value instanceof Boolean ? value : String.valueOf(value));
  }

  public static Object get(String key) {
    return VALUES.get(key);
  }

  /** A Field2d's robot pose, as WPILib publishes it: x and y in metres, the heading in degrees. */
  public static void putPose(String field, double x, double y, double degrees) {
    publish("/SmartDashboard/" + field + "/.type", "string", "Field2d");
    publish("/SmartDashboard/" + field + "/Robot", "double[]", new double[] {x, y, degrees});
  }

  /** Sets a topic's value (made on first use); it goes to subscribers at the next send. */
  static synchronized void publish(String name, String type, Object value) {
    Topic topic = TOPICS.get(name);
    if (topic == null || !topic.type.equals(type)) {
      topic = new Topic(nextId++, name, type, value);
      TOPICS.put(name, topic);
      for (Client client : CLIENTS) {
        announceTo(client, List.of(topic));
      }
    } else {
      topic.value = value;
      topic.dirty = true;
    }
  }

  private static double seconds() {
    return (System.nanoTime() - STARTED) / 1e9;
  }

  private static long micros() {
    return (System.nanoTime() - STARTED) / 1000;
  }

  private static void accept() {
    while (true) {
      try {
        Socket socket = server.accept();
        Thread thread = new Thread(() -> serve(socket), "nt4-client");
        thread.setDaemon(true);
        thread.start();
      } catch (IOException error) {
        return;
      }
    }
  }

  /** Every 20 ms: the time, then every changed topic to every client subscribed to it. */
  private static void sendLoop() {
    while (true) {
      try {
        Thread.sleep(20);
      } catch (InterruptedException error) {
        return;
      }
      publish("/classroom/time", "double", seconds());
      List<Topic> changed = new ArrayList<>();
      for (Topic topic : TOPICS.values()) {
        if (topic.dirty) {
          topic.dirty = false;
          changed.add(topic);
        }
      }
      if (changed.isEmpty()) {
        continue;
      }
      for (Client client : CLIENTS) {
        sendValues(client, changed);
      }
    }
  }

  private static void sendValues(Client client, List<Topic> topics) {
    ByteArrayOutputStream frame = new ByteArrayOutputStream();
    long now = micros();
    for (Topic topic : topics) {
      if (client.wants(topic, true)) {
        MsgPack.value(frame, topic.id, now, topic.type, topic.value);
      }
    }
    if (frame.size() == 0) {
      return;
    }
    try {
      client.send(0x2, frame.toByteArray());
    } catch (IOException error) {
      close(client);
    }
  }

  private static void announceTo(Client client, List<Topic> topics) {
    StringBuilder json = new StringBuilder("[");
    for (Topic topic : topics) {
      if (!client.wants(topic, false) || client.announced.putIfAbsent(topic.id, true) != null) {
        continue;
      }
      if (json.length() > 1) {
        json.append(',');
      }
      json.append("{\"method\":\"announce\",\"params\":{\"name\":");
      Json.quote(json, topic.name);
      json.append(",\"id\":").append(topic.id).append(",\"type\":");
      Json.quote(json, topic.type);
      json.append(",\"properties\":{}}}");
    }
    if (json.length() == 1) {
      return;
    }
    try {
      client.send(0x1, json.append(']').toString().getBytes(StandardCharsets.UTF_8));
    } catch (IOException error) {
      close(client);
    }
  }

  private static void close(Client client) {
    CLIENTS.remove(client);
    try {
      client.socket.close();
    } catch (IOException ignored) {
      // Already gone.
    }
  }

  /** One connection: a WebSocket upgrade to /nt/... becomes a NetworkTables client; anything else gets the JSON of GET /. */
  private static void serve(Socket socket) {
    try (socket) {
      InputStream in = socket.getInputStream();
      OutputStream out = socket.getOutputStream();
      List<String> head = readHead(in);
      if (head.isEmpty()) {
        return;
      }
      String[] request = head.get(0).split(" ");
      Map<String, String> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
      for (String line : head.subList(1, head.size())) {
        int colon = line.indexOf(':');
        if (colon > 0) {
          headers.put(line.substring(0, colon).trim(), line.substring(colon + 1).trim());
        }
      }
      String path = request.length > 1 ? request[1] : "/";
      if (path.startsWith("/nt/") && "websocket".equalsIgnoreCase(headers.getOrDefault("Upgrade", ""))) {
        webSocket(socket, in, out, headers);
        return;
      }
      byte[] body = json().getBytes(StandardCharsets.UTF_8);
      out.write(("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + body.length + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
      out.write(body);
      out.flush();
    } catch (IOException error) {
      // The client went away.
    }
  }

  private static List<String> readHead(InputStream in) throws IOException {
    List<String> lines = new ArrayList<>();
    StringBuilder line = new StringBuilder();
    int total = 0;
    for (int c; (c = in.read()) != -1; ) {
      if (++total > 16384) {
        return List.of();
      }
      if (c == '\n') {
        String text = line.toString().replace("\r", "");
        if (text.isEmpty()) {
          return lines;
        }
        lines.add(text);
        line.setLength(0);
      } else {
        line.append((char) c);
      }
    }
    return List.of();
  }

  private static void webSocket(Socket socket, InputStream in, OutputStream out, Map<String, String> headers) throws IOException {
    String offered = headers.getOrDefault("Sec-WebSocket-Protocol", "");
    String protocol = null;
    for (String candidate : List.of(V41, V40)) {
      for (String one : offered.split(",")) {
        if (protocol == null && one.trim().equals(candidate)) {
          protocol = candidate;
        }
      }
    }
    if (protocol == null) {
      out.write("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
      return;
    }
    String accept;
    try {
      MessageDigest sha1 = MessageDigest.getInstance("SHA-1");
      accept = Base64.getEncoder().encodeToString(sha1.digest((headers.getOrDefault("Sec-WebSocket-Key", "") + GUID).getBytes(StandardCharsets.US_ASCII)));
    } catch (java.security.NoSuchAlgorithmException error) {
      throw new IOException(error);
    }
    out.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\nSec-WebSocket-Protocol: " + protocol + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
    out.flush();
    socket.setTcpNoDelay(true);
    Client client = new Client(socket, out);
    CLIENTS.add(client);
    try {
      readFrames(client, in);
    } finally {
      close(client);
    }
  }

  /** Reads a client's frames (masked, as clients send them) until it closes. */
  private static void readFrames(Client client, InputStream in) throws IOException {
    ByteArrayOutputStream message = new ByteArrayOutputStream();
    int messageOpcode = 0;
    while (true) {
      int first = in.read();
      int second = in.read();
      if (first < 0 || second < 0) {
        return;
      }
      int opcode = first & 0x0f;
      long length = second & 0x7f;
      if (length == 126) {
        length = (readByte(in) << 8) | readByte(in);
      } else if (length == 127) {
        length = 0;
        for (int i = 0; i < 8; i++) {
          length = (length << 8) | readByte(in);
        }
      }
      if (length > 1 << 20) {
        return;
      }
      byte[] mask = (second & 0x80) != 0 ? in.readNBytes(4) : null;
      byte[] payload = in.readNBytes((int) length);
      if (payload.length < length) {
        return;
      }
      if (mask != null) {
        for (int i = 0; i < payload.length; i++) {
          payload[i] ^= mask[i % 4];
        }
      }
      switch (opcode) {
        case 0x8 -> {
          client.send(0x8, payload.length >= 2 ? new byte[] {payload[0], payload[1]} : new byte[0]);
          return;
        }
        case 0x9 -> client.send(0xA, payload);
        case 0xA -> {}
        default -> {
          if (opcode != 0) {
            messageOpcode = opcode;
            message.reset();
          }
          message.write(payload);
          if ((first & 0x80) != 0) {
            if (messageOpcode == 0x1) {
              onText(client, message.toString(StandardCharsets.UTF_8));
            } else if (messageOpcode == 0x2) {
              onBinary(client, message.toByteArray());
            }
          }
        }
      }
    }
  }

  private static int readByte(InputStream in) throws IOException {
    int value = in.read();
    if (value < 0) {
      throw new IOException("the connection ended in a frame header");
    }
    return value;
  }

  /** Control messages: subscribe (announce what matches, then send its values) and unsubscribe; the rest is ignored. */
  private static void onText(Client client, String text) {
    Object parsed;
    try {
      parsed = Json.parse(text);
    } catch (IllegalArgumentException error) {
      return;
    }
    if (!(parsed instanceof List<?> messages)) {
      return;
    }
    for (Object item : messages) {
      if (!(item instanceof Map<?, ?> message) || !(message.get("params") instanceof Map<?, ?> params)) {
        continue;
      }
      Object method = message.get("method");
      if (!(params.get("subuid") instanceof Number subuid)) {
        continue;
      }
      if ("subscribe".equals(method)) {
        List<String> topics = new ArrayList<>();
        if (params.get("topics") instanceof List<?> names) {
          for (Object name : names) {
            if (name instanceof String string) {
              topics.add(string);
            }
          }
        }
        Map<?, ?> options = params.get("options") instanceof Map<?, ?> given ? given : Map.of();
        client.subscriptions.put(subuid.intValue(), new Subscription(topics, Boolean.TRUE.equals(options.get("prefix")), Boolean.TRUE.equals(options.get("topicsonly"))));
        List<Topic> all = new ArrayList<>(TOPICS.values());
        announceTo(client, all);
        sendValues(client, all);
      } else if ("unsubscribe".equals(method)) {
        client.subscriptions.remove(subuid.intValue());
      }
    }
  }

  /** Time synchronisation: [-1, 0, type, client time] is answered [-1, server time, type, client time]. */
  private static void onBinary(Client client, byte[] data) {
    MsgPack.Reader reader = new MsgPack.Reader(data);
    try {
      while (reader.more()) {
        Object value = reader.read();
        if (value instanceof List<?> message && message.size() == 4 && message.get(0) instanceof Long id && id == -1) {
          ByteArrayOutputStream frame = new ByteArrayOutputStream();
          MsgPack.timeReply(frame, micros(), ((Number) message.get(2)).intValue(), ((Number) message.get(3)).longValue());
          client.send(0x2, frame.toByteArray());
        }
      }
    } catch (IOException | RuntimeException error) {
      // A message this server does not read: ignored.
    }
  }

  private static String json() {
    StringBuilder out = new StringBuilder("{\"alive\":true,\"standIn\":true,\"mode\":");
    Json.quote(out, mode);
    out.append(",\"values\":{");
    boolean first = true;
    for (Map.Entry<String, Object> entry : new TreeMap<>(VALUES).entrySet()) {
      if (!first) {
        out.append(',');
      }
      first = false;
      Json.quote(out, entry.getKey());
      out.append(':');
      Object value = entry.getValue();
      if (value instanceof Double number && Double.isFinite(number)) {
        out.append(String.format(Locale.ROOT, "%s", number));
      } else if (value instanceof Boolean bool) {
        out.append(bool);
      } else {
        Json.quote(out, String.valueOf(value));
      }
    }
    return out.append("}}").toString();
  }
}
