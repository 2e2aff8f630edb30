package edu.wpi.first.wpilibj;

import classroom.HalSimServer;
import classroom.SimServer;
import java.util.function.Supplier;

/**
 * Classroom stand-in for WPILib's RobotBase: starts a robot program in the simulator. Same names
 * and signatures as WPILib's, far less behind them (see README.md of the stand-in).
 */
public abstract class RobotBase implements AutoCloseable {
  protected RobotBase() {}

  /** Runs the robot program: the mode loop for a TimedRobot. Returns when the program ends. */
  public abstract void startCompetition();

  /** Asks startCompetition to return. */
  public abstract void endCompetition();

  @Override
  public void close() {}

  /** Always true here: the stand-in only ever runs in the simulator. */
  public static boolean isSimulation() {
    return true;
  }

  /** Always false here: there is no roboRIO. */
  public static boolean isReal() {
    return false;
  }

  /** Whether the robot is disabled (DriverStation.isDisabled). */
  public boolean isDisabled() {
    return DriverStation.isDisabled();
  }

  /** Whether the robot is enabled (DriverStation.isEnabled). */
  public boolean isEnabled() {
    return DriverStation.isEnabled();
  }

  /** Whether the Driver Station says autonomous. */
  public boolean isAutonomous() {
    return DriverStation.isAutonomous();
  }

  /** Whether the robot is enabled in autonomous. */
  public boolean isAutonomousEnabled() {
    return DriverStation.isAutonomousEnabled();
  }

  /** Whether the Driver Station says test. */
  public boolean isTest() {
    return DriverStation.isTest();
  }

  /** Whether the robot is enabled in test. */
  public boolean isTestEnabled() {
    return DriverStation.isTestEnabled();
  }

  /** Whether the Driver Station says teleop (neither autonomous nor test). */
  public boolean isTeleop() {
    return DriverStation.isTeleop();
  }

  /** Whether the robot is enabled in teleop. */
  public boolean isTeleopEnabled() {
    return DriverStation.isTeleopEnabled();
  }

  /**
   * Starts the robot program, as WPILib's Main.java does: starts the simulator's servers
   * (NetworkTables 4 on NT4_PORT, HALSim on HALSIMWS_PORT), makes the robot, then runs it until
   * the run is stopped.
   */
  public static <T extends RobotBase> void startRobot(Supplier<T> robotSupplier) {
    SimServer.start();
    HalSimServer.start();
    T robot;
    try {
      robot = robotSupplier.get();
    } catch (Throwable error) {
      System.err.println("Unhandled exception instantiating robot " + error);
      error.printStackTrace();
      System.err.println("The robot program quit unexpectedly.");
      System.exit(1);
      return;
    }
    try {
      robot.startCompetition();
    } catch (Throwable error) {
      System.err.println("Unhandled exception: " + error);
      error.printStackTrace();
      System.err.println("The robot program quit unexpectedly.");
      System.exit(1);
    }
    System.exit(0);
  }
}
