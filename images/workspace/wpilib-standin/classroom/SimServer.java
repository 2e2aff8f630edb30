package classroom;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The classroom stand-in simulator's server: where WPILib's simulator serves NetworkTables (port
 * NT4_PORT, default 5810), it answers every HTTP GET with the robot's mode and SmartDashboard
 * values as JSON. The control plane's alive probe sees the run come up when this answers.
 */
public final class SimServer {
  private static final Map<String, Object> VALUES = new ConcurrentHashMap<>();
  private static volatile String mode = "starting";
  private static HttpServer server;

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
      server = HttpServer.create(new InetSocketAddress("0.0.0.0", port), 16);
    } catch (IOException error) {
      System.err.println("stand-in simulator: cannot listen on port " + port + ": " + error.getMessage());
      System.exit(1);
      return;
    }
    server.createContext("/", exchange -> {
      byte[] body = json().getBytes(StandardCharsets.UTF_8);
      exchange.getResponseHeaders().set("Content-Type", "application/json");
      exchange.sendResponseHeaders(200, body.length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    });
    server.start();
    System.out.println("[stand-in] simulator listening on port " + port + " (NT4_PORT): GET / shows the SmartDashboard values");
  }

  public static void setMode(String value) {
    mode = value;
  }

  public static void put(String key, Object value) {
    VALUES.put(key, value);
  }

  public static Object get(String key) {
    return VALUES.get(key);
  }

  private static String json() {
    StringBuilder out = new StringBuilder("{\"alive\":true,\"standIn\":true,\"mode\":");
    quote(out, mode);
    out.append(",\"values\":{");
    boolean first = true;
    for (Map.Entry<String, Object> entry : new TreeMap<>(VALUES).entrySet()) {
      if (!first) {
        out.append(',');
      }
      first = false;
      quote(out, entry.getKey());
      out.append(':');
      Object value = entry.getValue();
      if (value instanceof Double number && Double.isFinite(number)) {
        out.append(number);
      } else if (value instanceof Boolean bool) {
        out.append(bool);
      } else {
        quote(out, String.valueOf(value));
      }
    }
    return out.append("}}").toString();
  }

  private static void quote(StringBuilder out, String text) {
    out.append('"');
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }
}
