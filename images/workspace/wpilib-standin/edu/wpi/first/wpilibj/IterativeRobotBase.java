package edu.wpi.first.wpilibj;

import classroom.SimServer;
import edu.wpi.first.wpilibj.smartdashboard.SmartDashboard;
import java.util.Locale;

/**
 * Classroom stand-in for WPILib's IterativeRobotBase: one loop iteration ({@link #loopFunc()})
 * calls the robot's methods in WPILib's order. The mode comes from the Driver Station (disabled
 * until it enables the robot; autonomous, test, or else teleop), or from ROBOT_MODE. When the mode
 * changes, the old mode's exit runs, then the new mode's init; then the mode's periodic,
 * robotPeriodic, SmartDashboard.updateValues and simulationPeriodic; then motor safety.
 */
public abstract class IterativeRobotBase extends RobotBase {
  private enum Mode {
    kNone,
    kDisabled,
    kAutonomous,
    kTeleop,
    kTest
  }

  private final double m_period;
  private Mode m_lastMode = Mode.kNone;
  private boolean m_calledDsConnected;

  /** A robot whose loop runs every {@code period} seconds. */
  protected IterativeRobotBase(double period) {
    m_period = period;
  }

  /** Provides the loop (TimedRobot's). */
  @Override
  public abstract void startCompetition();

  /** Runs once when the robot program starts (newer WPILib code uses the constructor instead). */
  public void robotInit() {}

  /** Runs once, the first time the Driver Station connects. */
  public void driverStationConnected() {}

  /** Runs once at start, after robotInit, in the simulator only. */
  public void simulationInit() {}

  /** Runs once each time the robot becomes disabled. */
  public void disabledInit() {}

  /** Runs once each time autonomous starts. */
  public void autonomousInit() {}

  /** Runs once each time teleop starts. */
  public void teleopInit() {}

  /** Runs once each time test starts. */
  public void testInit() {}

  /** Runs every loop in every mode, after the mode's periodic. */
  public void robotPeriodic() {}

  /** Runs every loop in the simulator, after robotPeriodic. */
  public void simulationPeriodic() {}

  /** Runs every loop while disabled. */
  public void disabledPeriodic() {}

  /** Runs every loop in autonomous. */
  public void autonomousPeriodic() {}

  /** Runs every loop in teleop. */
  public void teleopPeriodic() {}

  /** Runs every loop in test. */
  public void testPeriodic() {}

  /** Runs once when the robot stops being disabled. */
  public void disabledExit() {}

  /** Runs once when autonomous ends. */
  public void autonomousExit() {}

  /** Runs once when teleop ends. */
  public void teleopExit() {}

  /** Runs once when test ends. */
  public void testExit() {}

  /** The loop period, in seconds. */
  public double getPeriod() {
    return m_period;
  }

  /** One loop iteration: the Driver Station's data, the mode's transitions and periodic methods. */
  protected void loopFunc() {
    DriverStation.refreshData();
    Mode mode;
    if (DriverStation.isDisabled()) {
      mode = Mode.kDisabled;
    } else if (DriverStation.isAutonomous()) {
      mode = Mode.kAutonomous;
    } else if (DriverStation.isTeleop()) {
      mode = Mode.kTeleop;
    } else {
      mode = Mode.kTest;
    }
    if (!m_calledDsConnected && DriverStation.isDSAttached()) {
      m_calledDsConnected = true;
      driverStationConnected();
    }
    if (mode != m_lastMode) {
      switch (m_lastMode) {
        case kDisabled -> disabledExit();
        case kAutonomous -> autonomousExit();
        case kTeleop -> teleopExit();
        case kTest -> testExit();
        case kNone -> {}
      }
      String name = mode.name().substring(1).toLowerCase(Locale.ROOT);
      SimServer.setMode(name);
      System.out.println("[stand-in] " + name + (DriverStation.isEStopped() ? " (emergency stopped)" : "") + " at " + String.format(Locale.ROOT, "%.1f", Timer.getFPGATimestamp()) + " s");
      switch (mode) {
        case kDisabled -> disabledInit();
        case kAutonomous -> autonomousInit();
        case kTeleop -> teleopInit();
        case kTest -> testInit();
        case kNone -> {}
      }
      m_lastMode = mode;
    }
    switch (mode) {
      case kDisabled -> disabledPeriodic();
      case kAutonomous -> autonomousPeriodic();
      case kTeleop -> teleopPeriodic();
      case kTest -> testPeriodic();
      case kNone -> {}
    }
    robotPeriodic();
    SmartDashboard.updateValues();
    simulationPeriodic();
    MotorSafety.checkMotors();
  }
}
