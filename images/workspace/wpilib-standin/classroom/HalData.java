package classroom;

import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentSkipListSet;

/**
 * The stand-in's simulated hardware layer, what WPILib's simulated HAL holds: the Driver Station's
 * data (control word, station, match time, game data) and joysticks coming in, PWM outputs and
 * joystick rumble going out. Thread-safe: the HALSim server writes the inputs, the robot reads them.
 *
 * <p>As in WPILib, inputs are staged and become visible to the robot program only when the Driver
 * Station says new data arrived ({@link #newData()}, HALSim's {@code >new_data}), which also marks
 * the Driver Station attached. Unlike WPILib:
 *
 * <ul>
 *   <li>an e-stop latches: once the robot has seen one, it stays disabled until the program restarts;
 *   <li>when the Driver Station goes away ({@link #driverGone()}), the robot is disabled and forgets
 *       its control data and joysticks (as at start);
 *   <li>ROBOT_MODE (disabled, autonomous, teleop or test) holds one mode whatever the Driver
 *       Station says (joysticks still count);
 *   <li>a robot that is not enabled gets no motor output: {@link #pwmOutput} is 0 (a real robot's
 *       motor controllers get no signal; WPILib's simulator keeps the last value set).
 * </ul>
 */
public final class HalData {
  /** Joystick ports, axes, POVs and buttons per joystick, PWM channels: WPILib's limits. */
  public static final int JOYSTICKS = 6;
  public static final int MAX_AXES = 12;
  public static final int MAX_POVS = 12;
  public static final int MAX_BUTTONS = 32;
  public static final int PWM_CHANNELS = 20;

  /** The Driver Station's control data, as the robot sees it. */
  public record Control(boolean enabled, boolean autonomous, boolean test, boolean eStop, boolean fms, boolean ds, String station, double matchTime, String gameData) {}

  /** One joystick's inputs: axes (-1..1), buttons (bit 0 is button 1) and their count, POVs (degrees or -1). */
  public record Stick(double[] axes, int buttons, int buttonCount, int[] povs) {
    static final Stick NONE = new Stick(new double[0], 0, 0, new int[0]);
  }

  private static final Control START = new Control(false, false, false, false, false, false, "unknown", -1.0, "");
  private static final String FIXED_MODE = readFixedMode();

  private static Control staged = START;
  private static final Stick[] STAGED_STICKS = newSticks();
  private static volatile Control visible = START;
  private static volatile Stick[] visibleSticks = newSticks();
  private static volatile boolean eStopLatched;
  private static long dataVersion;

  private static final Map<Integer, Double> PWM = new TreeMap<>();
  private static final Set<Integer> FREED_PWM = new ConcurrentSkipListSet<>();
  private static final Set<Integer> STICKS_IN_USE = new ConcurrentSkipListSet<>();
  private static final double[][] RUMBLE = new double[JOYSTICKS][2];

  private HalData() {}

  private static Stick[] newSticks() {
    Stick[] sticks = new Stick[JOYSTICKS];
    Arrays.fill(sticks, Stick.NONE);
    return sticks;
  }

  private static String readFixedMode() {
    String value = System.getenv("ROBOT_MODE");
    if (value == null || value.isBlank()) {
      return null;
    }
    String mode = value.trim().toLowerCase(Locale.ROOT);
    if (Set.of("disabled", "autonomous", "teleop", "test").contains(mode)) {
      return mode;
    }
    System.err.println("ROBOT_MODE=" + value + " is not one of disabled, autonomous, teleop, test: the robot follows the Driver Station");
    return null;
  }

  /** The mode ROBOT_MODE holds (disabled, autonomous, teleop or test), or null when the robot follows the Driver Station. */
  public static String fixedMode() {
    return FIXED_MODE;
  }

  // ----- Inputs, staged until newData() (HALSim's ">" keys of DriverStation and Joystick).

  public static synchronized void setEnabled(boolean value) {
    staged = new Control(value, staged.autonomous, staged.test, staged.eStop, staged.fms, staged.ds, staged.station, staged.matchTime, staged.gameData);
  }

  public static synchronized void setAutonomous(boolean value) {
    staged = new Control(staged.enabled, value, staged.test, staged.eStop, staged.fms, staged.ds, staged.station, staged.matchTime, staged.gameData);
  }

  public static synchronized void setTest(boolean value) {
    staged = new Control(staged.enabled, staged.autonomous, value, staged.eStop, staged.fms, staged.ds, staged.station, staged.matchTime, staged.gameData);
  }

  public static synchronized void setEStop(boolean value) {
    staged = new Control(staged.enabled, staged.autonomous, staged.test, value, staged.fms, staged.ds, staged.station, staged.matchTime, staged.gameData);
  }

  public static synchronized void setFms(boolean value) {
    staged = new Control(staged.enabled, staged.autonomous, staged.test, staged.eStop, value, staged.ds, staged.station, staged.matchTime, staged.gameData);
  }

  public static synchronized void setDs(boolean value) {
    staged = new Control(staged.enabled, staged.autonomous, staged.test, staged.eStop, staged.fms, value, staged.station, staged.matchTime, staged.gameData);
  }

  /** red1..red3, blue1..blue3; anything else is ignored, as WPILib does. */
  public static synchronized void setStation(String value) {
    if (Set.of("red1", "red2", "red3", "blue1", "blue2", "blue3").contains(value)) {
      staged = new Control(staged.enabled, staged.autonomous, staged.test, staged.eStop, staged.fms, staged.ds, value, staged.matchTime, staged.gameData);
    }
  }

  public static synchronized void setMatchTime(double value) {
    staged = new Control(staged.enabled, staged.autonomous, staged.test, staged.eStop, staged.fms, staged.ds, staged.station, value, staged.gameData);
  }

  /** At most 64 characters are kept (the size of WPILib's game-specific message). */
  public static synchronized void setGameData(String value) {
    String kept = value.length() > 64 ? value.substring(0, 64) : value;
    staged = new Control(staged.enabled, staged.autonomous, staged.test, staged.eStop, staged.fms, staged.ds, staged.station, staged.matchTime, kept);
  }

  /** The first 12 axes, each clamped to -1..1. */
  public static synchronized void setAxes(int port, double[] axes) {
    double[] kept = Arrays.copyOf(axes, Math.min(axes.length, MAX_AXES));
    for (int i = 0; i < kept.length; i++) {
      kept[i] = Math.max(-1.0, Math.min(1.0, kept[i]));
    }
    Stick stick = STAGED_STICKS[port];
    STAGED_STICKS[port] = new Stick(kept, stick.buttons, stick.buttonCount, stick.povs);
  }

  /** The first 32 buttons; button 1 is index 0. */
  public static synchronized void setButtons(int port, boolean[] buttons) {
    int count = Math.min(buttons.length, MAX_BUTTONS);
    int bits = 0;
    for (int i = 0; i < count; i++) {
      if (buttons[i]) {
        bits |= 1 << i;
      }
    }
    Stick stick = STAGED_STICKS[port];
    STAGED_STICKS[port] = new Stick(stick.axes, bits, count, stick.povs);
  }

  /** The first 12 POVs: degrees, or -1 when not pressed. */
  public static synchronized void setPovs(int port, int[] povs) {
    Stick stick = STAGED_STICKS[port];
    STAGED_STICKS[port] = new Stick(stick.axes, stick.buttons, stick.buttonCount, Arrays.copyOf(povs, Math.min(povs.length, MAX_POVS)));
  }

  /** The Driver Station says new data arrived: what was staged becomes visible, and the Driver Station counts as attached. */
  public static synchronized void newData() {
    staged = new Control(staged.enabled, staged.autonomous, staged.test, staged.eStop, staged.fms, true, staged.station, staged.matchTime, staged.gameData);
    if (staged.eStop) {
      eStopLatched = true;
    }
    visible = staged;
    visibleSticks = STAGED_STICKS.clone();
    dataVersion++;
    HalData.class.notifyAll();
  }

  /** The Driver Station went away: the robot is disabled and forgets its control data and joysticks; an e-stop stays. */
  public static synchronized void driverGone() {
    staged = START;
    Arrays.fill(STAGED_STICKS, Stick.NONE);
    visible = START;
    visibleSticks = newSticks();
    dataVersion++;
    HalData.class.notifyAll();
  }

  /** Waits until new Driver Station data arrives, at most `seconds` (0: no limit); whether it came. */
  public static synchronized boolean waitForData(double seconds) throws InterruptedException {
    long version = dataVersion;
    long deadline = System.nanoTime() + (long) (seconds * 1e9);
    while (dataVersion == version) {
      if (seconds <= 0) {
        HalData.class.wait();
        continue;
      }
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      HalData.class.wait(Math.max(1, left / 1_000_000));
    }
    return true;
  }

  // ----- What the robot sees.

  /** The control data the robot program sees: the Driver Station's, or ROBOT_MODE's; an e-stop disables. */
  public static Control control() {
    Control seen = visible;
    boolean eStop = eStopLatched || seen.eStop;
    if (FIXED_MODE != null) {
      return new Control(!FIXED_MODE.equals("disabled") && !eStop, FIXED_MODE.equals("autonomous"), FIXED_MODE.equals("test"), eStop, seen.fms, true, seen.station, seen.matchTime, seen.gameData);
    }
    return new Control(seen.enabled && !eStop, seen.autonomous, seen.test, eStop, seen.fms, seen.ds, seen.station, seen.matchTime, seen.gameData);
  }

  /** The joysticks the robot program sees (index = port). */
  public static Stick[] sticks() {
    return visibleSticks.clone();
  }

  /** Whether outputs reach the motors: the robot is enabled (with a Driver Station, or by ROBOT_MODE). */
  public static boolean outputsEnabled() {
    Control control = control();
    return control.enabled && control.ds;
  }

  // ----- Outputs.

  /** A joystick port the robot program reads (a GenericHID was made for it): its state goes to HALSim. */
  public static void useJoystick(int port) {
    STICKS_IN_USE.add(port);
  }

  public static Set<Integer> joysticksInUse() {
    return STICKS_IN_USE;
  }

  /** Sets a joystick's rumble, each 0..1 (a port out of 0..5 has none). */
  public static synchronized void setRumble(int port, double left, double right) {
    if (port >= 0 && port < JOYSTICKS) {
      RUMBLE[port][0] = left;
      RUMBLE[port][1] = right;
    }
  }

  /** A joystick's rumble: {left, right}. */
  public static synchronized double[] rumble(int port) {
    return RUMBLE[port].clone();
  }

  /** Takes a PWM channel (0..19) for a motor controller; IllegalArgumentException when out of range, IllegalStateException when taken. */
  public static synchronized void allocatePwm(int channel) {
    if (channel < 0 || channel >= PWM_CHANNELS) {
      throw new IllegalArgumentException("Requested PWM channel is out of range. Minimum: 0, Maximum: " + (PWM_CHANNELS - 1) + ", Requested: " + channel);
    }
    if (PWM.containsKey(channel)) {
      throw new IllegalStateException("PWM or DIO " + channel + " previously allocated.");
    }
    PWM.put(channel, 0.0);
    FREED_PWM.remove(channel);
  }

  /** Gives a PWM channel back. */
  public static synchronized void freePwm(int channel) {
    if (PWM.remove(channel) != null) {
      FREED_PWM.add(channel);
    }
  }

  /** Sets a PWM channel's speed, clamped to -1..1 (0 when not a number). */
  public static synchronized void setPwm(int channel, double speed) {
    if (PWM.containsKey(channel)) {
      PWM.put(channel, Double.isFinite(speed) ? Math.max(-1.0, Math.min(1.0, speed)) : 0.0);
    }
  }

  /** A PWM channel's speed as last set. */
  public static synchronized double getPwm(int channel) {
    return PWM.getOrDefault(channel, 0.0);
  }

  /** What reaches the motor of each allocated PWM channel: its speed, or 0 while outputs are disabled. */
  public static synchronized Map<Integer, Double> pwmOutputs() {
    boolean enabled = outputsEnabled();
    Map<Integer, Double> outputs = new TreeMap<>();
    for (Map.Entry<Integer, Double> entry : PWM.entrySet()) {
      outputs.put(entry.getKey(), enabled ? entry.getValue() : 0.0);
    }
    return outputs;
  }

  /** PWM channels that were allocated and given back. */
  public static Set<Integer> freedPwm() {
    return FREED_PWM;
  }
}
