package classroom;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.StandardSocketOptions;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;

/**
 * WPILib's "Robot Hardware Interface WebSockets API" (HALSim WebSocket, what WPILib's
 * halsim_ws_server serves), robot side, on HALSIMWS_PORT (default 3300) at HALSIMWS_URI (default
 * /wpilibws): text frames, one JSON object each, {"type","device","data"}.
 *
 * <ul>
 *   <li>One client at a time: a second upgrade while one is connected is refused (HTTP 409).
 *   <li>On connection the robot sends the state of every device: DriverStation (device ""),
 *       each Joystick the robot program reads, each PWM; then, every 20 ms, what changed.
 *   <li>Into the robot: DriverStation's and Joystick's {@code >} keys, staged until a DriverStation
 *       message with {@code >new_data} true (see {@link HalData}).
 *   <li>Ignored, as the spec says: text that is not a JSON object with a string type, a string device
 *       and an object data; types and keys it does not know; values of the wrong JSON type; binary
 *       frames. A message over 64 KiB closes the connection (1009).
 *   <li>When the client goes away, the robot is disabled ({@link HalData#driverGone()}).
 * </ul>
 */
public final class HalSimServer {
  /** The longest message read, in bytes. */
  static final int MAX_MESSAGE = 64 * 1024;

  /** The client, and what it was last sent of each device ("type/device" to its data). */
  private static final class Client {
    final WebSocket socket;
    final Map<String, Map<String, Object>> sent = new HashMap<>();

    Client(WebSocket socket) {
      this.socket = socket;
    }
  }

  /** The client's place, taken while its handshake is under way. */
  private static final Client RESERVED = new Client(null);

  private static final AtomicReference<Client> ACTIVE = new AtomicReference<>();
  private static String uri;

  private HalSimServer() {}

  /** Starts the server on HALSIMWS_PORT (once); exits the program when the port cannot be had. */
  public static synchronized void start() {
    if (uri != null) {
      return;
    }
    int port = WebSocket.portFromEnvironment("HALSIMWS_PORT", 3300);
    String path = System.getenv("HALSIMWS_URI");
    uri = path == null || path.isBlank() ? "/wpilibws" : path.trim();
    WebSocket.listen(port, 16, "HALSIMWS_PORT", "halsim", HalSimServer::serve, HalSimServer::sendChanges);
    System.out.println("[stand-in] HALSim WebSocket on port " + port + " at " + uri + " (HALSIMWS_PORT, HALSIMWS_URI): the Driver Station and joysticks");
  }

  /** Every 20 ms, what changed goes to the client. */
  private static void sendChanges() {
    Client client = ACTIVE.get();
    if (client != null && client != RESERVED) {
      flush(client);
    }
  }

  private static void serve(Socket socket) {
    try (socket) {
      InputStream in = socket.getInputStream();
      OutputStream out = socket.getOutputStream();
      WebSocket.Request request = WebSocket.readRequest(in);
      if (request == null) {
        return;
      }
      if (!request.upgrade() || !request.path().equals(uri)) {
        WebSocket.respond(out, 404, "Not Found", "text/plain; charset=utf-8", ("Not found: the HALSim WebSocket is at " + uri + "\n").getBytes(StandardCharsets.UTF_8));
        return;
      }
      if (!ACTIVE.compareAndSet(null, RESERVED)) {
        WebSocket.respond(out, 409, "Conflict", "text/plain; charset=utf-8", "Only a single simulation websocket is allowed\n".getBytes(StandardCharsets.UTF_8));
        return;
      }
      Client client;
      try {
        keepAlive(socket);
        client = new Client(WebSocket.accept(socket, in, out, request, null, MAX_MESSAGE));
        ACTIVE.set(client);
      } catch (IOException | RuntimeException error) {
        ACTIVE.compareAndSet(RESERVED, null);
        throw error;
      }
      System.out.println("[stand-in] Driver Station connected (HALSim WebSocket)");
      try {
        flush(client);
        for (WebSocket.Message message; (message = client.socket.read()) != null; ) {
          if (message.text()) {
            onText(message.string());
          }
        }
      } finally {
        // Disabled before the place is given up: a Driver Station that connects next keeps what it sends.
        HalData.driverGone();
        ACTIVE.compareAndSet(client, null);
        System.out.println("[stand-in] Driver Station disconnected: robot disabled");
        int code = client.socket.peerCloseCode();
        client.socket.close(code == 0 ? WebSocket.NORMAL : code, "");
      }
    } catch (IOException error) {
      // The client went away.
    }
  }

  /** A client that vanishes without closing (its machine gone) is noticed by TCP keepalive: probes after 10 s without traffic, 3 of them 5 s apart. */
  private static void keepAlive(Socket socket) {
    try {
      socket.setKeepAlive(true);
      socket.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPIDLE, 10);
      socket.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPINTERVAL, 5);
      socket.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPCOUNT, 3);
    } catch (IOException | UnsupportedOperationException error) {
      // The platform's defaults then.
    }
  }

  /** One message in: DriverStation and Joystick, their ">" keys of the right JSON types; everything else is ignored. */
  static void onText(String text) {
    Object parsed;
    try {
      parsed = Json.parse(text);
    } catch (IllegalArgumentException error) {
      return;
    }
    if (!(parsed instanceof Map<?, ?> message) || !(message.get("type") instanceof String type) || !(message.get("device") instanceof String device) || !(message.get("data") instanceof Map<?, ?> data)) {
      return;
    }
    if (type.equals("DriverStation") && device.isEmpty()) {
      onDriverStation(data);
    } else if (type.equals("Joystick") && device.length() == 1 && device.charAt(0) >= '0' && device.charAt(0) < '0' + HalData.JOYSTICKS) {
      onJoystick(device.charAt(0) - '0', data);
    }
  }

  private static void onDriverStation(Map<?, ?> data) {
    if (data.get(">enabled") instanceof Boolean value) {
      HalData.setEnabled(value);
    }
    if (data.get(">autonomous") instanceof Boolean value) {
      HalData.setAutonomous(value);
    }
    if (data.get(">test") instanceof Boolean value) {
      HalData.setTest(value);
    }
    if (data.get(">estop") instanceof Boolean value) {
      HalData.setEStop(value);
    }
    if (data.get(">fms") instanceof Boolean value) {
      HalData.setFms(value);
    }
    if (data.get(">ds") instanceof Boolean value) {
      HalData.setDs(value);
    }
    if (data.get(">station") instanceof String value) {
      HalData.setStation(value);
    }
    if (data.get(">match_time") instanceof Double value && Double.isFinite(value)) {
      HalData.setMatchTime(value);
    }
    if (data.get(">game_data") instanceof String value) {
      HalData.setGameData(value);
    }
    // Last, as WPILib does: the rest of this message is part of the new data.
    if (Boolean.TRUE.equals(data.get(">new_data"))) {
      HalData.newData();
    }
  }

  private static void onJoystick(int port, Map<?, ?> data) {
    if (data.get(">axes") instanceof List<?> list) {
      double[] axes = new double[list.size()];
      boolean valid = true;
      for (int i = 0; i < axes.length; i++) {
        valid &= list.get(i) instanceof Double value && Double.isFinite(value);
        axes[i] = valid ? (Double) list.get(i) : 0.0;
      }
      if (valid) {
        HalData.setAxes(port, axes);
      }
    }
    if (data.get(">buttons") instanceof List<?> list && list.stream().allMatch(Boolean.class::isInstance)) {
      boolean[] buttons = new boolean[list.size()];
      for (int i = 0; i < buttons.length; i++) {
        buttons[i] = (Boolean) list.get(i);
      }
      HalData.setButtons(port, buttons);
    }
    if (data.get(">povs") instanceof List<?> list && list.stream().allMatch(value -> value instanceof Double number && number == Math.rint(number) && Math.abs(number) <= 360)) {
      int[] povs = new int[list.size()];
      for (int i = 0; i < povs.length; i++) {
        povs[i] = ((Double) list.get(i)).intValue();
      }
      HalData.setPovs(port, povs);
    }
  }

  /** Every device's state now, in the order sent on connection: DriverStation, each Joystick read, each PWM. */
  private static Map<String, Map<String, Object>> devices() {
    Map<String, Map<String, Object>> devices = new LinkedHashMap<>();
    HalData.Control control = HalData.control();
    Map<String, Object> ds = new LinkedHashMap<>();
    ds.put(">enabled", control.enabled());
    ds.put(">autonomous", control.autonomous());
    ds.put(">test", control.test());
    ds.put(">estop", control.eStop());
    ds.put(">fms", control.fms());
    ds.put(">ds", control.ds());
    ds.put(">station", control.station());
    ds.put(">match_time", control.matchTime());
    ds.put(">game_data", control.gameData());
    devices.put("DriverStation/", ds);
    HalData.Stick[] sticks = HalData.sticks();
    for (int port : HalData.joysticksInUse()) {
      HalData.Stick stick = sticks[port];
      Map<String, Object> joystick = new LinkedHashMap<>();
      List<Object> axes = new ArrayList<>();
      for (double axis : stick.axes()) {
        axes.add(axis);
      }
      List<Object> buttons = new ArrayList<>();
      for (int i = 0; i < stick.buttonCount(); i++) {
        buttons.add((stick.buttons() & (1 << i)) != 0);
      }
      List<Object> povs = new ArrayList<>();
      for (int pov : stick.povs()) {
        povs.add(pov);
      }
      double[] rumble = HalData.rumble(port);
      joystick.put(">axes", axes);
      joystick.put(">buttons", buttons);
      joystick.put(">povs", povs);
      joystick.put("<rumble_left", rumble[0]);
      joystick.put("<rumble_right", rumble[1]);
      devices.put("Joystick/" + port, joystick);
    }
    for (int channel : HalData.freedPwm()) {
      Map<String, Object> pwm = new LinkedHashMap<>();
      pwm.put("<init", false);
      pwm.put("<speed", 0.0);
      devices.put("PWM/" + channel, pwm);
    }
    for (Map.Entry<Integer, Double> output : HalData.pwmOutputs().entrySet()) {
      Map<String, Object> pwm = new LinkedHashMap<>();
      pwm.put("<init", true);
      pwm.put("<speed", output.getValue());
      devices.put("PWM/" + output.getKey(), pwm);
    }
    return devices;
  }

  /** Sends the client what changed since it was last sent (everything, the first time). */
  private static void flush(Client client) {
    synchronized (client) {
      for (Map.Entry<String, Map<String, Object>> device : devices().entrySet()) {
        Map<String, Object> before = client.sent.computeIfAbsent(device.getKey(), key -> new HashMap<>());
        Map<String, Object> delta = new LinkedHashMap<>();
        for (Map.Entry<String, Object> entry : device.getValue().entrySet()) {
          if (!before.containsKey(entry.getKey()) || !Objects.equals(before.get(entry.getKey()), entry.getValue())) {
            delta.put(entry.getKey(), entry.getValue());
          }
        }
        if (delta.isEmpty()) {
          continue;
        }
        String key = device.getKey();
        Map<String, Object> message = new LinkedHashMap<>();
        message.put("type", key.substring(0, key.indexOf('/')));
        message.put("device", key.substring(key.indexOf('/') + 1));
        message.put("data", delta);
        StringBuilder json = new StringBuilder();
        Json.write(json, message);
        try {
          client.socket.sendText(json.toString());
        } catch (IOException error) {
          client.socket.close(WebSocket.NORMAL, "");
          return;
        }
        before.putAll(delta);
      }
    }
  }
}
