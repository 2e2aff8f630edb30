package edu.wpi.first.wpilibj;

import classroom.HalData;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * Classroom stand-in for WPILib's DriverStation: the Driver Station's control data and joysticks,
 * as the robot program sees them. The data comes from the editor's Driver Station over WPILib's
 * HALSim WebSocket protocol; as in WPILib, what arrived becomes visible when the Driver Station
 * says new data is there, and the robot loop takes a snapshot of it at the start of each iteration
 * ({@link #refreshData()}), so that one iteration sees one state.
 */
public final class DriverStation {
  /** Number of joystick ports. */
  public static final int kJoystickPorts = 6;

  private static final double JOYSTICK_WARNING_INTERVAL = 1.0;

  /** The robot's alliance. */
  public enum Alliance {
    /** Red alliance. */
    Red,
    /** Blue alliance. */
    Blue
  }

  /** The type of match. */
  public enum MatchType {
    None,
    Practice,
    Qualification,
    Elimination
  }

  private static HalData.Control s_control = HalData.control();
  private static HalData.Stick[] s_sticks = HalData.sticks();
  private static final int[] s_buttonsPressed = new int[kJoystickPorts];
  private static final int[] s_buttonsReleased = new int[kJoystickPorts];
  private static double s_nextMessageTime;
  private static boolean s_silenceJoystickWarning;

  private DriverStation() {}

  /** Takes the Driver Station's newest data (the robot loop does this at the start of each iteration) and notes the buttons pressed and released since. */
  public static synchronized void refreshData() {
    HalData.Stick[] sticks = HalData.sticks();
    for (int i = 0; i < kJoystickPorts; i++) {
      s_buttonsPressed[i] |= ~s_sticks[i].buttons() & sticks[i].buttons();
      s_buttonsReleased[i] |= s_sticks[i].buttons() & ~sticks[i].buttons();
    }
    s_sticks = sticks;
    s_control = HalData.control();
  }

  /** Prints an error (to stderr), with the stack trace when asked. */
  public static void reportError(String error, boolean printTrace) {
    report("Error", error, printTrace);
  }

  /** Prints a warning (to stderr), with the stack trace when asked. */
  public static void reportWarning(String warning, boolean printTrace) {
    report("Warning", warning, printTrace);
  }

  private static void report(String kind, String message, boolean printTrace) {
    System.err.println(kind + ": " + message);
    if (printTrace) {
      for (StackTraceElement element : Thread.currentThread().getStackTrace()) {
        System.err.println("\tat " + element);
      }
    }
  }

  private static void checkStick(int stick) {
    if (stick < 0 || stick >= kJoystickPorts) {
      throw new IllegalArgumentException("Joystick index is out of range, should be 0-5");
    }
  }

  private static synchronized void joystickWarning(String message) {
    if (isFMSAttached() || !s_silenceJoystickWarning) {
      double now = Timer.getFPGATimestamp();
      if (now > s_nextMessageTime) {
        reportWarning(message, false);
        s_nextMessageTime = now + JOYSTICK_WARNING_INTERVAL;
      }
    }
  }

  /** Whether a button (from 1) of a joystick is down. */
  public static synchronized boolean getStickButton(final int stick, final int button) {
    checkStick(stick);
    if (button <= 0) {
      reportError("Button indexes begin at 1 in WPILib for C++ and Java", false);
      return false;
    }
    if (button <= s_sticks[stick].buttonCount()) {
      return (s_sticks[stick].buttons() & (1 << (button - 1))) != 0;
    }
    joystickWarning("Joystick Button " + button + " on port " + stick + " not available, check if controller is plugged in");
    return false;
  }

  /** Whether a button was pressed since the last check. */
  public static synchronized boolean getStickButtonPressed(final int stick, final int button) {
    return edge(s_buttonsPressed, stick, button);
  }

  /** Whether a button was released since the last check. */
  public static synchronized boolean getStickButtonReleased(final int stick, final int button) {
    return edge(s_buttonsReleased, stick, button);
  }

  private static boolean edge(int[] edges, int stick, int button) {
    if (button <= 0) {
      reportError("Button indexes begin at 1 in WPILib for C++ and Java", false);
      return false;
    }
    checkStick(stick);
    if (button <= s_sticks[stick].buttonCount()) {
      int bit = 1 << (button - 1);
      boolean happened = (edges[stick] & bit) != 0;
      edges[stick] &= ~bit;
      return happened;
    }
    joystickWarning("Joystick Button " + button + " on port " + stick + " not available, check if controller is plugged in");
    return false;
  }

  /** An axis of a joystick, -1 to 1 (0 when the joystick has no such axis). */
  public static synchronized double getStickAxis(int stick, int axis) {
    checkStick(stick);
    if (axis < 0 || axis >= HalData.MAX_AXES) {
      throw new IllegalArgumentException("Joystick axis is out of range");
    }
    if (axis < s_sticks[stick].axes().length) {
      return s_sticks[stick].axes()[axis];
    }
    joystickWarning("Joystick axis " + axis + " on port " + stick + " not available, check if controller is plugged in");
    return 0.0;
  }

  /** A POV of a joystick: its angle in degrees, or -1 when not pressed (or missing). */
  public static synchronized int getStickPOV(int stick, int pov) {
    checkStick(stick);
    if (pov < 0 || pov >= HalData.MAX_POVS) {
      throw new IllegalArgumentException("Joystick POV is out of range");
    }
    if (pov < s_sticks[stick].povs().length) {
      return s_sticks[stick].povs()[pov];
    }
    joystickWarning("Joystick POV " + pov + " on port " + stick + " not available, check if controller is plugged in");
    return -1;
  }

  /** All buttons of a joystick, one bit each (bit 0 is button 1). */
  public static synchronized int getStickButtons(final int stick) {
    checkStick(stick);
    return s_sticks[stick].buttons();
  }

  public static synchronized int getStickAxisCount(int stick) {
    checkStick(stick);
    return s_sticks[stick].axes().length;
  }

  public static synchronized int getStickPOVCount(int stick) {
    checkStick(stick);
    return s_sticks[stick].povs().length;
  }

  public static synchronized int getStickButtonCount(int stick) {
    checkStick(stick);
    return s_sticks[stick].buttonCount();
  }

  /** Always false: HALSim carries no joystick descriptors. */
  public static boolean getJoystickIsXbox(int stick) {
    checkStick(stick);
    return false;
  }

  /** Always -1 (unknown): HALSim carries no joystick descriptors. */
  public static int getJoystickType(int stick) {
    checkStick(stick);
    return -1;
  }

  /** Always "": HALSim carries no joystick descriptors. */
  public static String getJoystickName(int stick) {
    checkStick(stick);
    return "";
  }

  /** Whether the joystick has any axis, button or POV. */
  public static boolean isJoystickConnected(int stick) {
    return getStickAxisCount(stick) > 0 || getStickButtonCount(stick) > 0 || getStickPOVCount(stick) > 0;
  }

  /** Whether the robot is enabled (the Driver Station enabled it and is attached). */
  public static synchronized boolean isEnabled() {
    return s_control.enabled() && s_control.ds();
  }

  public static boolean isDisabled() {
    return !isEnabled();
  }

  /** Whether the robot is emergency stopped (until the program restarts). */
  public static synchronized boolean isEStopped() {
    return s_control.eStop();
  }

  public static synchronized boolean isAutonomous() {
    return s_control.autonomous();
  }

  public static synchronized boolean isAutonomousEnabled() {
    return s_control.autonomous() && s_control.enabled();
  }

  /** Teleop: neither autonomous nor test. */
  public static boolean isTeleop() {
    return !(isAutonomous() || isTest());
  }

  public static synchronized boolean isTeleopEnabled() {
    return !s_control.autonomous() && !s_control.test() && s_control.enabled();
  }

  public static synchronized boolean isTest() {
    return s_control.test();
  }

  public static synchronized boolean isTestEnabled() {
    return s_control.test() && s_control.enabled();
  }

  public static synchronized boolean isDSAttached() {
    return s_control.ds();
  }

  public static synchronized boolean isFMSAttached() {
    return s_control.fms();
  }

  /** The game-specific message (HALSim's {@code >game_data}), "" when none. */
  public static synchronized String getGameSpecificMessage() {
    return s_control.gameData();
  }

  /** Always "": no event in the simulator. */
  public static String getEventName() {
    return "";
  }

  /** Always None: no match in the simulator. */
  public static MatchType getMatchType() {
    return MatchType.None;
  }

  public static int getMatchNumber() {
    return 0;
  }

  public static int getReplayNumber() {
    return 0;
  }

  /** The alliance of the Driver Station's station (HALSim's {@code >station}); empty when unknown. */
  public static Optional<Alliance> getAlliance() {
    String station = HalData.control().station();
    if (station.startsWith("red")) {
      return Optional.of(Alliance.Red);
    }
    if (station.startsWith("blue")) {
      return Optional.of(Alliance.Blue);
    }
    return Optional.empty();
  }

  /** The station's number (1 to 3); empty when unknown. */
  public static OptionalInt getLocation() {
    String station = HalData.control().station();
    if (station.startsWith("red") || station.startsWith("blue")) {
      return OptionalInt.of(station.charAt(station.length() - 1) - '0');
    }
    return OptionalInt.empty();
  }

  /** Waits for new Driver Station data, at most `timeoutSeconds` (0: no limit); whether it came. */
  public static boolean waitForDsConnection(double timeoutSeconds) {
    try {
      return HalData.waitForData(timeoutSeconds);
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** The match time in seconds (HALSim's {@code >match_time}), -1 when not in a match. */
  public static double getMatchTime() {
    return HalData.control().matchTime();
  }

  /** Silences the "not available, check if controller is plugged in" warnings (unless an FMS is attached). */
  public static synchronized void silenceJoystickConnectionWarning(boolean silence) {
    s_silenceJoystickWarning = silence;
  }

  public static synchronized boolean isJoystickConnectionWarningSilenced() {
    return !isFMSAttached() && s_silenceJoystickWarning;
  }
}
