package edu.wpi.first.wpilibj;

import classroom.SimServer;
import java.util.Locale;

/**
 * Classroom stand-in for WPILib's TimedRobot: calls the robot's methods every period (20 ms by
 * default) in WPILib's order: the mode's init when the mode changes (after the old mode's exit),
 * then the mode's periodic, robotPeriodic and simulationPeriodic.
 *
 * <p>With no driver station, the stand-in plays a match: autonomous for 15 s, then teleop until the
 * run is stopped. The environment variable ROBOT_MODE (disabled, autonomous, teleop or test) keeps
 * one mode instead.
 */
public class TimedRobot extends RobotBase {
  /** Default loop period, in seconds. */
  public static final double kDefaultPeriod = 0.02;

  private static final double AUTONOMOUS_SECONDS = 15.0;

  private final double m_period;
  private volatile boolean m_running = true;

  private enum Mode {
    NONE,
    DISABLED,
    AUTONOMOUS,
    TELEOP,
    TEST
  }

  private Mode m_lastMode = Mode.NONE;

  /** A robot whose periodic methods run every 20 ms. */
  protected TimedRobot() {
    this(kDefaultPeriod);
  }

  /** A robot whose periodic methods run every {@code period} seconds. */
  protected TimedRobot(double period) {
    if (period <= 0) {
      throw new IllegalArgumentException("period must be positive, was " + period);
    }
    m_period = period;
  }

  /** The loop period, in seconds. */
  public double getPeriod() {
    return m_period;
  }

  /** Runs once when the robot program starts (newer WPILib code uses the constructor instead). */
  public void robotInit() {}

  /** Runs once at start, after robotInit, in the simulator only. */
  public void simulationInit() {}

  public void driverStationConnected() {}

  public void disabledInit() {}

  public void autonomousInit() {}

  public void teleopInit() {}

  public void testInit() {}

  public void robotPeriodic() {}

  public void simulationPeriodic() {}

  public void disabledPeriodic() {}

  public void autonomousPeriodic() {}

  public void teleopPeriodic() {}

  public void testPeriodic() {}

  public void disabledExit() {}

  public void autonomousExit() {}

  public void teleopExit() {}

  public void testExit() {}

  private static Mode fixedMode() {
    String value = System.getenv("ROBOT_MODE");
    if (value == null || value.isBlank() || value.equalsIgnoreCase("match")) {
      return Mode.NONE;
    }
    try {
      return Mode.valueOf(value.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException error) {
      System.err.println("ROBOT_MODE=" + value + " is not one of disabled, autonomous, teleop, test, match: playing a match");
      return Mode.NONE;
    }
  }

  @Override
  public void startCompetition() {
    robotInit();
    simulationInit();
    driverStationConnected();
    System.out.println("********** Robot program startup complete **********");
    Mode fixed = fixedMode();
    long start = System.nanoTime();
    long periodNanos = (long) (m_period * 1e9);
    long next = start;
    while (m_running) {
      double elapsed = (System.nanoTime() - start) / 1e9;
      Mode mode = fixed != Mode.NONE ? fixed : elapsed < AUTONOMOUS_SECONDS ? Mode.AUTONOMOUS : Mode.TELEOP;
      if (mode != m_lastMode) {
        exit(m_lastMode);
        SimServer.setMode(mode.name().toLowerCase(Locale.ROOT));
        System.out.println("[stand-in] " + mode.name().toLowerCase(Locale.ROOT) + " (at " + String.format(Locale.ROOT, "%.1f", elapsed) + " s)");
        init(mode);
        m_lastMode = mode;
      }
      periodic(mode);
      robotPeriodic();
      simulationPeriodic();
      next += periodNanos;
      long wait = next - System.nanoTime();
      if (wait > 0) {
        try {
          Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          return;
        }
      } else {
        next = System.nanoTime();
      }
    }
  }

  private void init(Mode mode) {
    switch (mode) {
      case DISABLED -> disabledInit();
      case AUTONOMOUS -> autonomousInit();
      case TELEOP -> teleopInit();
      case TEST -> testInit();
      case NONE -> {}
    }
  }

  private void periodic(Mode mode) {
    switch (mode) {
      case DISABLED -> disabledPeriodic();
      case AUTONOMOUS -> autonomousPeriodic();
      case TELEOP -> teleopPeriodic();
      case TEST -> testPeriodic();
      case NONE -> {}
    }
  }

  private void exit(Mode mode) {
    switch (mode) {
      case DISABLED -> disabledExit();
      case AUTONOMOUS -> autonomousExit();
      case TELEOP -> teleopExit();
      case TEST -> testExit();
      case NONE -> {}
    }
  }

  @Override
  public void endCompetition() {
    m_running = false;
  }
}
