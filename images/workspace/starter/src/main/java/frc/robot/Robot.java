package frc.robot;

import edu.wpi.first.math.MathUtil;
import edu.wpi.first.math.geometry.Rotation2d;
import edu.wpi.first.wpilibj.DriverStation;
import edu.wpi.first.wpilibj.TimedRobot;
import edu.wpi.first.wpilibj.Timer;
import edu.wpi.first.wpilibj.XboxController;
import edu.wpi.first.wpilibj.drive.DifferentialDrive;
import edu.wpi.first.wpilibj.motorcontrol.PWMSparkMax;
import edu.wpi.first.wpilibj.smartdashboard.Field2d;
import edu.wpi.first.wpilibj.smartdashboard.SendableChooser;
import edu.wpi.first.wpilibj.smartdashboard.SmartDashboard;

/**
 * Your robot: a drivetrain with one motor on the left and one on the right. In teleop you drive it
 * with an Xbox controller; in autonomous it runs the routine picked in "Auto choices".
 *
 * <p>The simulator calls these methods for you: each "Init" once when its mode starts, each
 * "Periodic" every 20 ms while it lasts. Start here: change an autonomous routine, then press Run.
 */
public class Robot extends TimedRobot {
  // The autonomous routines, as the dashboard lists them.
  private static final String kDriveForward = "Drive forward";
  private static final String kDriveAndTurn = "Drive and turn";

  private final PWMSparkMax m_leftMotor = new PWMSparkMax(0);
  private final PWMSparkMax m_rightMotor = new PWMSparkMax(1);
  private final DifferentialDrive m_drive = new DifferentialDrive(m_leftMotor::set, m_rightMotor::set);
  private final XboxController m_controller = new XboxController(0);
  private final SendableChooser<String> m_autoChooser = new SendableChooser<>();
  private final Timer m_autoTimer = new Timer();
  private String m_autoSelected = kDriveForward;

  // The simulated drivetrain: where the robot is on the field, shown in the field view.
  private static final double kMaxSpeed = 3.0; // metres per second at full output
  private static final double kTrackWidth = 0.6; // metres between the left and right wheels
  private static final double kFieldLength = 17.548; // metres: the 2025 field
  private static final double kFieldWidth = 8.052;
  private static final double kHalfRobot = 0.45; // metres from the robot's centre to its bumpers
  private final Field2d m_field = new Field2d();
  private double m_x = 2.0; // metres from the blue wall
  private double m_y = 4.0; // metres from the right side of the field, seen from blue
  private double m_heading = 0.0; // radians, counterclockwise; 0 faces the red wall
  private double m_speed; // metres per second
  private double m_lastPrint;

  /** Runs once when the robot program starts. */
  public Robot() {
    // One side's motor turns the other way round: inverted, both sides drive forward together.
    m_rightMotor.setInverted(true);
    m_autoChooser.setDefaultOption(kDriveForward, kDriveForward);
    m_autoChooser.addOption(kDriveAndTurn, kDriveAndTurn);
    SmartDashboard.putData("Auto choices", m_autoChooser);
    SmartDashboard.putData("Field", m_field);
    System.out.println("Robot program started. Hello from Robot.java!");
  }

  @Override
  public void autonomousInit() {
    m_autoSelected = m_autoChooser.getSelected();
    System.out.println("Auto selected: " + m_autoSelected);
    m_autoTimer.restart();
  }

  @Override
  public void autonomousPeriodic() {
    double time = m_autoTimer.get();
    switch (m_autoSelected) {
      case kDriveAndTurn:
        if (time < 1.5) {
          m_drive.arcadeDrive(0.6, 0.0, false); // forward
        } else if (time < 2.1) {
          m_drive.arcadeDrive(0.0, 0.25, false); // turn left, about a quarter turn
        } else if (time < 3.6) {
          m_drive.arcadeDrive(0.6, 0.0, false); // forward again
        } else {
          m_drive.stopMotor();
        }
        break;
      case kDriveForward:
      default:
        if (time < 2.0) {
          m_drive.arcadeDrive(0.5, 0.0, false);
        } else {
          m_drive.stopMotor();
        }
        break;
    }
  }

  @Override
  public void teleopPeriodic() {
    // Arcade drive: the left stick's Y drives forward and back, the right stick's X turns.
    // Pushing a stick forward (or right) gives a negative Y (or a positive X), hence the minus signs.
    m_drive.arcadeDrive(-m_controller.getLeftY(), -m_controller.getRightX());
  }

  /** Runs every 20 ms in every mode, after the mode's own Periodic. */
  @Override
  public void robotPeriodic() {
    // On the dashboard: the robot's speed, to graph it in the Driver Station.
    SmartDashboard.putNumber("Speed", m_speed);
    // Print once a second, not every 20 ms.
    double now = Timer.getFPGATimestamp();
    if (now - m_lastPrint >= 1.0) {
      m_lastPrint = now;
      System.out.printf("t=%5.1f s  x=%5.2f m  y=%5.2f m  heading=%4.0f deg  speed=%5.2f m/s%n", now, m_x, m_y, Math.toDegrees(m_heading), m_speed);
    }
  }

  /** Runs every 20 ms in the simulator only: moves the robot as its motors would. */
  @Override
  public void simulationPeriodic() {
    // A disabled robot's motors get no power.
    double left = DriverStation.isEnabled() ? m_leftMotor.get() * kMaxSpeed : 0.0;
    double right = DriverStation.isEnabled() ? m_rightMotor.get() * kMaxSpeed : 0.0;
    double dt = getPeriod();
    m_speed = (left + right) / 2;
    m_heading = MathUtil.angleModulus(m_heading + (right - left) / kTrackWidth * dt);
    // The field's walls stop the robot.
    m_x = MathUtil.clamp(m_x + m_speed * Math.cos(m_heading) * dt, kHalfRobot, kFieldLength - kHalfRobot);
    m_y = MathUtil.clamp(m_y + m_speed * Math.sin(m_heading) * dt, kHalfRobot, kFieldWidth - kHalfRobot);
    m_field.setRobotPose(m_x, m_y, Rotation2d.fromRadians(m_heading));
  }
}
