package edu.wpi.first.wpilibj;

import classroom.HalData;

/**
 * Classroom stand-in for WPILib's TimedRobot: runs {@link IterativeRobotBase#loopFunc()} every
 * period (20 ms by default). The robot starts disabled and follows the Driver Station (the
 * editor's, over HALSim); the environment variable ROBOT_MODE (disabled, autonomous, teleop or
 * test) holds one mode instead.
 */
public class TimedRobot extends IterativeRobotBase {
  /** Default loop period, in seconds. */
  public static final double kDefaultPeriod = 0.02;

  private volatile boolean m_running = true;

  /** A robot whose periodic methods run every 20 ms. */
  protected TimedRobot() {
    this(kDefaultPeriod);
  }

  /** A robot whose periodic methods run every {@code period} seconds. */
  protected TimedRobot(double period) {
    super(period);
    if (period <= 0) {
      throw new IllegalArgumentException("period must be positive, was " + period);
    }
  }

  @Override
  public void startCompetition() {
    robotInit();
    simulationInit();
    System.out.println("********** Robot program startup complete **********");
    String fixed = HalData.fixedMode();
    if (fixed != null) {
      System.out.println("[stand-in] ROBOT_MODE=" + fixed + ": the robot stays in " + fixed + " whatever the Driver Station says");
    }
    long periodNanos = (long) (getPeriod() * 1e9);
    long next = System.nanoTime();
    while (m_running) {
      loopFunc();
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

  @Override
  public void endCompetition() {
    m_running = false;
  }
}
