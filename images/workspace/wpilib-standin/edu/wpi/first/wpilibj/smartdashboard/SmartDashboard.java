package edu.wpi.first.wpilibj.smartdashboard;

import classroom.SimServer;
import edu.wpi.first.util.sendable.Sendable;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Classroom stand-in for WPILib's SmartDashboard: values put here are published over NetworkTables
 * 4 by the stand-in simulator on NT4_PORT (under /SmartDashboard/, as WPILib does), and served as
 * JSON there too (GET /). putData shows a Field2d or a SendableChooser as WPILib does.
 */
public final class SmartDashboard {
  private static final Map<String, SendableChooser<?>> CHOOSERS = new ConcurrentHashMap<>();

  private SmartDashboard() {}

  public static boolean putNumber(String key, double value) {
    SimServer.put(key, value);
    return true;
  }

  public static boolean putString(String key, String value) {
    SimServer.put(key, value);
    return true;
  }

  public static boolean putBoolean(String key, boolean value) {
    SimServer.put(key, value);
    return true;
  }

  /** Shows a Field2d or a SendableChooser under `key`; other Sendables are not shown by the stand-in. */
  public static synchronized void putData(String key, Sendable data) {
    if (data instanceof Field2d field) {
      field.shownAs(key);
    } else if (data instanceof SendableChooser<?> chooser) {
      CHOOSERS.put(key, chooser);
      chooser.shownAs(key);
    }
  }

  public static double getNumber(String key, double defaultValue) {
    return SimServer.get(key) instanceof Double value ? value : defaultValue;
  }

  public static String getString(String key, String defaultValue) {
    return SimServer.get(key) instanceof String value ? value : defaultValue;
  }

  public static boolean getBoolean(String key, boolean defaultValue) {
    return SimServer.get(key) instanceof Boolean value ? value : defaultValue;
  }

  /** Publishes what changed in the Sendables put here (the robot loop calls this after robotPeriodic). */
  public static void updateValues() {
    for (SendableChooser<?> chooser : CHOOSERS.values()) {
      chooser.update();
    }
  }
}
