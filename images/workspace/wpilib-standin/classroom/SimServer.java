package classroom;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

/**
 * The classroom stand-in simulator's server, on NT4_PORT (default 5810) where WPILib's simulator
 * serves NetworkTables 4:
 *
 * <ul>
 *   <li>a WebSocket at {@code /nt/<client name>} speaking NetworkTables 4 (subprotocols
 *       v4.1.networktables.first.wpi.edu and networktables.first.wpi.edu): JSON text frames for
 *       subscribe, unsubscribe, publish, unpublish, announce and unannounce; MessagePack binary
 *       frames for values and time synchronisation. It publishes every SmartDashboard value under
 *       {@code /SmartDashboard/}, Field2d and SendableChooser as WPILib does, the robot's mode
 *       ({@code /classroom/mode}) and the time since the robot started ({@code /classroom/time},
 *       seconds). Clients may publish only the topics the robot accepts (a chooser's
 *       {@code selected}, a string); other publishes are ignored.
 *   <li>any other GET: {@code {"alive":true,"standIn":true,"mode":...,"values":{...}}}, which is
 *       where the control plane's alive probe sees the run come up.
 * </ul>
 *
 * <p>Values go to subscribers when they change, at most every 20 ms (the robot's period).
 */
public final class SimServer {
  private static final String V41 = "v4.1.networktables.first.wpi.edu";
  private static final String V40 = "networktables.first.wpi.edu";
  /** The longest message read from a client, in bytes. */
  private static final int MAX_MESSAGE = 1 << 20;
  private static final long STARTED = System.nanoTime();

  /** A topic: its id, NetworkTables type and value (null until it has one), whether it changed since it was last sent, and how many clients publish it. */
  private static final class Topic {
    final int id;
    final String name;
    final String type;
    volatile Object value;
    volatile boolean dirty = true;
    int clientPublishers;

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

  /** A connected NetworkTables client: its subscriptions, the topics announced to it, its publishers (pubuid to topic name). */
  private static final class Client {
    final WebSocket socket;
    final Map<Integer, Subscription> subscriptions = new ConcurrentHashMap<>();
    final Map<Integer, Boolean> announced = new ConcurrentHashMap<>();
    final Map<Integer, String> publishers = new ConcurrentHashMap<>();

    Client(WebSocket socket) {
      this.socket = socket;
    }

    boolean wants(Topic topic, boolean values) {
      for (Subscription subscription : subscriptions.values()) {
        if (subscription.wants(topic.name) && !(values && subscription.topicsOnly())) {
          return true;
        }
      }
      return false;
    }
  }

  private static final Map<String, Topic> TOPICS = new ConcurrentHashMap<>();
  private static final List<Client> CLIENTS = new CopyOnWriteArrayList<>();
  private static final Map<String, Object> VALUES = new ConcurrentHashMap<>();
  /** The topics clients may publish (string topics), and what the robot does with a value. */
  private static final Map<String, Consumer<String>> ACCEPTED = new ConcurrentHashMap<>();
  private static volatile String mode = "starting";
  private static boolean started;
  private static int nextId = 1;

  private SimServer() {}

  /** Starts the server on NT4_PORT (once); exits the program when the port cannot be had. */
  public static synchronized void start() {
    if (started) {
      return;
    }
    int port = WebSocket.portFromEnvironment("NT4_PORT", 5810);
    publish("/classroom/mode", "string", mode);
    publish("/classroom/time", "double", 0.0);
    WebSocket.listen(port, 64, "NT4_PORT", "nt4", SimServer::serve, SimServer::sendChanges);
    started = true;
    System.out.println("[stand-in] simulator listening on port " + port + " (NT4_PORT): NetworkTables 4 at /nt/<name>, GET / shows the values as JSON");
  }

  /** The robot's mode (disabled, autonomous, teleop, test), published as /classroom/mode. */
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

  /** A Sendable put on the SmartDashboard under `key`, as WPILib publishes one: .type, .name and .controllable. */
  public static void putSendable(String key, String type) {
    publish("/SmartDashboard/" + key + "/.type", "string", type);
    publish("/SmartDashboard/" + key + "/.name", "string", key);
    publish("/SmartDashboard/" + key + "/.controllable", "boolean", true);
  }

  /** Lets clients publish the string topic `name`; each value they send goes to `setter` (on a server thread). */
  public static void acceptString(String name, Consumer<String> setter) {
    ACCEPTED.put(name, setter);
  }

  /** Sets a topic's value (made on first use); it goes to subscribers at the next send when it changed. */
  public static void publish(String name, String type, Object value) {
    publish(name, type, value, null);
  }

  /**
   * publish, by `publisher` when not null: a topic it makes is announced to every other subscriber
   * here, and to it only with its pubuid (publishFrom), as WPILib's server announces it once.
   */
  private static synchronized void publish(String name, String type, Object value, Client publisher) {
    Topic topic = TOPICS.get(name);
    if (topic == null || !topic.type.equals(type)) {
      topic = new Topic(nextId++, name, type, value);
      TOPICS.put(name, topic);
      for (Client client : CLIENTS) {
        if (client != publisher) {
          announceTo(client, List.of(topic), null);
        }
      }
    } else if (!same(topic.value, value)) {
      topic.value = value;
      topic.dirty = true;
    }
  }

  private static boolean same(Object a, Object b) {
    if (a instanceof double[] x && b instanceof double[] y) {
      return Arrays.equals(x, y);
    }
    if (a instanceof Object[] x && b instanceof Object[] y) {
      return Arrays.equals(x, y);
    }
    return Objects.equals(a, b);
  }

  private static double seconds() {
    return (System.nanoTime() - STARTED) / 1e9;
  }

  private static long micros() {
    return (System.nanoTime() - STARTED) / 1000;
  }

  /** Every 20 ms: the time, then every changed topic to every client subscribed to it. */
  private static void sendChanges() {
    publish("/classroom/time", "double", seconds());
    List<Topic> changed = new ArrayList<>();
    for (Topic topic : TOPICS.values()) {
      if (topic.dirty) {
        topic.dirty = false;
        changed.add(topic);
      }
    }
    if (changed.isEmpty()) {
      return;
    }
    for (Client client : CLIENTS) {
      sendValues(client, changed);
    }
  }

  private static void sendValues(Client client, List<Topic> topics) {
    ByteArrayOutputStream frame = new ByteArrayOutputStream();
    long now = micros();
    for (Topic topic : topics) {
      Object value = topic.value;
      if (value != null && client.announced.containsKey(topic.id) && client.wants(topic, true)) {
        MsgPack.value(frame, topic.id, now, topic.type, value);
      }
    }
    if (frame.size() == 0) {
      return;
    }
    try {
      client.socket.send(0x2, frame.toByteArray());
    } catch (IOException error) {
      close(client);
    }
  }

  /** Announces the topics the client subscribed to and was not told of yet; with `pubuid`, the one topic it publishes, always. */
  private static void announceTo(Client client, List<Topic> topics, Integer pubuid) {
    StringBuilder json = new StringBuilder("[");
    for (Topic topic : topics) {
      boolean told = client.announced.containsKey(topic.id);
      if (pubuid == null && (told || !client.wants(topic, false))) {
        continue;
      }
      client.announced.put(topic.id, true);
      if (json.length() > 1) {
        json.append(',');
      }
      json.append("{\"method\":\"announce\",\"params\":{\"name\":");
      Json.quote(json, topic.name);
      json.append(",\"id\":").append(topic.id).append(",\"type\":");
      Json.quote(json, topic.type);
      if (pubuid != null) {
        json.append(",\"pubuid\":").append(pubuid);
      }
      json.append(",\"properties\":{}}}");
    }
    if (json.length() == 1) {
      return;
    }
    try {
      client.socket.sendText(json.append(']').toString());
    } catch (IOException error) {
      close(client);
    }
  }

  /** Ends a client: its publishers are released (a topic no one publishes any more is removed), its socket closed. */
  private static void close(Client client) {
    if (CLIENTS.remove(client)) {
      for (Integer pubuid : new ArrayList<>(client.publishers.keySet())) {
        unpublish(client, pubuid);
      }
    }
    client.socket.close(WebSocket.NORMAL, "");
  }

  /** One connection: a WebSocket upgrade to /nt/... becomes a NetworkTables client; anything else gets the JSON of GET /. */
  private static void serve(Socket socket) {
    try (socket) {
      InputStream in = socket.getInputStream();
      OutputStream out = socket.getOutputStream();
      WebSocket.Request request = WebSocket.readRequest(in);
      if (request == null) {
        return;
      }
      if (!request.path().startsWith("/nt/") || !request.upgrade()) {
        WebSocket.respond(out, 200, "OK", "application/json", json().getBytes(StandardCharsets.UTF_8));
        return;
      }
      String protocol = null;
      for (String candidate : List.of(V41, V40)) {
        for (String offered : request.header("Sec-WebSocket-Protocol").split(",")) {
          if (protocol == null && offered.trim().equals(candidate)) {
            protocol = candidate;
          }
        }
      }
      if (protocol == null) {
        WebSocket.respond(out, 400, "Bad Request", "text/plain; charset=utf-8", "NetworkTables 4 needs the subprotocol v4.1.networktables.first.wpi.edu\n".getBytes(StandardCharsets.UTF_8));
        return;
      }
      Client client = new Client(WebSocket.accept(socket, in, out, request, protocol, MAX_MESSAGE));
      CLIENTS.add(client);
      try {
        for (WebSocket.Message message; (message = client.socket.read()) != null; ) {
          if (message.text()) {
            onText(client, message.string());
          } else {
            onBinary(client, message.data());
          }
        }
      } finally {
        close(client);
      }
    } catch (IOException error) {
      // The client went away.
    }
  }

  /** Control messages: subscribe (announce what matches, then send its values), unsubscribe, publish and unpublish; the rest is ignored. */
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
      if ("publish".equals(method) && params.get("name") instanceof String name && params.get("pubuid") instanceof Double pubuid && "string".equals(params.get("type"))) {
        publishFrom(client, name, pubuid.intValue());
      } else if ("unpublish".equals(method) && params.get("pubuid") instanceof Double pubuid) {
        unpublish(client, pubuid.intValue());
      }
      if (!(params.get("subuid") instanceof Double subuid)) {
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
        announceTo(client, all, null);
        sendValues(client, all);
      } else if ("unsubscribe".equals(method)) {
        client.subscriptions.remove(subuid.intValue());
      }
    }
  }

  /** A client publishes `name`: accepted only for the topics the robot takes (then announced to it with its pubuid). */
  private static void publishFrom(Client client, String name, int pubuid) {
    if (!ACCEPTED.containsKey(name) || client.publishers.containsKey(pubuid)) {
      return;
    }
    Topic topic;
    synchronized (SimServer.class) {
      topic = TOPICS.get(name);
      if (topic == null || !topic.type.equals("string")) {
        publish(name, "string", null, client);
        topic = TOPICS.get(name);
      }
      topic.clientPublishers++;
    }
    client.publishers.put(pubuid, name);
    announceTo(client, List.of(topic), pubuid);
  }

  /** A client's publisher ends; a topic no client publishes any more is removed and unannounced. */
  private static void unpublish(Client client, int pubuid) {
    String name = client.publishers.remove(pubuid);
    if (name == null) {
      return;
    }
    Topic removed = null;
    synchronized (SimServer.class) {
      Topic topic = TOPICS.get(name);
      if (topic != null && --topic.clientPublishers <= 0) {
        TOPICS.remove(name);
        removed = topic;
      }
    }
    if (removed == null) {
      return;
    }
    StringBuilder json = new StringBuilder("[{\"method\":\"unannounce\",\"params\":{\"name\":");
    Json.quote(json, removed.name);
    json.append(",\"id\":").append(removed.id).append("}}]");
    for (Client other : CLIENTS) {
      if (other.announced.remove(removed.id) != null) {
        try {
          other.socket.sendText(json.toString());
        } catch (IOException error) {
          close(other);
        }
      }
    }
  }

  /**
   * Binary messages: a time synchronisation [-1, 0, type, client time] is answered [-1, server
   * time, type, client time]; a value of a topic the client publishes ([pubuid, time, 4, string])
   * goes to the robot and to subscribers. The rest is ignored.
   */
  private static void onBinary(Client client, byte[] data) {
    MsgPack.Reader reader = new MsgPack.Reader(data);
    try {
      while (reader.more()) {
        if (!(reader.read() instanceof List<?> message) || message.size() != 4 || !(message.get(0) instanceof Long id)) {
          continue;
        }
        if (id == -1 && message.get(2) instanceof Long type && message.get(3) instanceof Long clientTime) {
          ByteArrayOutputStream frame = new ByteArrayOutputStream();
          MsgPack.timeReply(frame, micros(), type.intValue(), clientTime);
          client.socket.send(0x2, frame.toByteArray());
          continue;
        }
        String name = client.publishers.get(id.intValue());
        if (name != null && message.get(3) instanceof String value && ACCEPTED.get(name) != null) {
          publish(name, "string", value);
          ACCEPTED.get(name).accept(value);
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
