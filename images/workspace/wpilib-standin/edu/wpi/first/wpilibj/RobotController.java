package edu.wpi.first.wpilibj;

/** Classroom stand-in for WPILib's RobotController: the battery (a steady 12 V here) and the clock. */
public final class RobotController {
  private RobotController() {}

  /** The battery's voltage: always 12 V in the stand-in (no battery model). */
  public static double getBatteryVoltage() {
    return 12.0;
  }

  /** The robot's input voltage: always 12 V in the stand-in. */
  public static double getInputVoltage() {
    return 12.0;
  }

  /** Microseconds since the robot program started. */
  public static long getFPGATime() {
    return (long) (Timer.getFPGATimestamp() * 1e6);
  }
}
