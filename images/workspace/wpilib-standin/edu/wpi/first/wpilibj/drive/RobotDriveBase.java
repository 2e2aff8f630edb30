package edu.wpi.first.wpilibj.drive;

import edu.wpi.first.wpilibj.MotorSafety;

/**
 * Classroom stand-in for WPILib's RobotDriveBase: the deadband (0.02) and maximum output (1.0) of a
 * drive, and motor safety, on by default (call the drive's methods every loop).
 */
public abstract class RobotDriveBase extends MotorSafety {
  /** Default input deadband. */
  public static final double kDefaultDeadband = 0.02;

  /** Default maximum output. */
  public static final double kDefaultMaxOutput = 1.0;

  /** Input deadband. */
  protected double m_deadband = kDefaultDeadband;

  /** Maximum output. */
  protected double m_maxOutput = kDefaultMaxOutput;

  /** A drive with motor safety on. */
  @SuppressWarnings("this-escape")
  public RobotDriveBase() {
    setSafetyEnabled(true);
  }

  /** Inputs smaller than this are 0; larger ones are rescaled to the full range (MathUtil.applyDeadband). */
  public void setDeadband(double deadband) {
    m_deadband = deadband;
  }

  /** Multiplies every output the drive computes. */
  public void setMaxOutput(double maxOutput) {
    m_maxOutput = maxOutput;
  }

  /** Feeds motor safety. */
  public void feedWatchdog() {
    feed();
  }

  @Override
  public abstract void stopMotor();

  @Override
  public abstract String getDescription();
}
