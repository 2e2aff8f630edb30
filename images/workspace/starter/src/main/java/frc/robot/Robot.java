package frc.robot;

import edu.wpi.first.math.geometry.Rotation2d;
import edu.wpi.first.wpilibj.TimedRobot;
import edu.wpi.first.wpilibj.Timer;
import edu.wpi.first.wpilibj.smartdashboard.Field2d;
import edu.wpi.first.wpilibj.smartdashboard.SmartDashboard;

/**
 * Your robot. The simulator calls these methods for you: each "Init" once when its mode starts,
 * each "Periodic" every 20 ms while it lasts. A match is 15 seconds of autonomous, then teleop.
 *
 * <p>Start here: change AUTO_SPEED, or what autonomousPeriodic does, then press Run.
 */
public class Robot extends TimedRobot {
  /** How fast the robot drives in autonomous, in metres per second. */
  private static final double AUTO_SPEED = 1.0;

  /** How long autonomous drives before stopping, in seconds. */
  private static final double AUTO_DRIVE_SECONDS = 3.0;

  private final Timer m_autoTimer = new Timer();
  private final Field2d m_field = new Field2d(); // where the robot is, shown in the Simulator view
  private double m_speed; // metres per second
  private double m_position; // metres from the start line
  private double m_lastPrint;

  /** Runs once when the robot program starts. */
  public Robot() {
    System.out.println("Robot program started. Hello from Robot.java!");
    SmartDashboard.putData("Field", m_field);
  }

  @Override
  public void autonomousInit() {
    m_autoTimer.restart();
  }

  @Override
  public void autonomousPeriodic() {
    // Drive forward for a few seconds, then stop.
    if (m_autoTimer.get() < AUTO_DRIVE_SECONDS) {
      m_speed = AUTO_SPEED;
    } else {
      m_speed = 0.0;
    }
  }

  @Override
  public void teleopInit() {
    m_speed = 0.0;
  }

  @Override
  public void teleopPeriodic() {
    // No joystick in the classroom simulator, so the robot sways back and forth on its own:
    // watch its pose in the Simulator view, then make it do something of your own here.
    m_speed = 0.5 * Math.sin(Timer.getFPGATimestamp());
  }

  /** Runs every 20 ms in every mode, after the mode's own Periodic. */
  @Override
  public void robotPeriodic() {
    m_position += m_speed * getPeriod();
    SmartDashboard.putNumber("Speed (m/s)", m_speed);
    SmartDashboard.putNumber("Position (m)", m_position);
    m_field.setRobotPose(m_position, 0.0, new Rotation2d());

    // Print once a second, not every 20 ms.
    double now = Timer.getFPGATimestamp();
    if (now - m_lastPrint >= 1.0) {
      m_lastPrint = now;
      System.out.printf("t=%5.1f s  speed=%4.2f m/s  position=%5.2f m%n", now, m_speed, m_position);
    }
  }
}
