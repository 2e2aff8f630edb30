package edu.wpi.first.wpilibj.smartdashboard;

import classroom.SimServer;

/**
 * Classroom stand-in for WPILib's SmartDashboard: values put here are served as JSON by the
 * stand-in simulator on NT4_PORT (GET /), where the real one publishes them over NetworkTables.
 */
public final class SmartDashboard {
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

  public static double getNumber(String key, double defaultValue) {
    return SimServer.get(key) instanceof Double value ? value : defaultValue;
  }

  public static String getString(String key, String defaultValue) {
    return SimServer.get(key) instanceof String value ? value : defaultValue;
  }

  public static boolean getBoolean(String key, boolean defaultValue) {
    return SimServer.get(key) instanceof Boolean value ? value : defaultValue;
  }
}
