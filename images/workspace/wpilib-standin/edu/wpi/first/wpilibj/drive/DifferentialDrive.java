package edu.wpi.first.wpilibj.drive;

import edu.wpi.first.math.MathUtil;
import edu.wpi.first.util.sendable.Sendable;
import edu.wpi.first.wpilibj.motorcontrol.MotorController;
import java.util.Objects;
import java.util.function.DoubleConsumer;

/**
 * Classroom stand-in for WPILib's DifferentialDrive: a tank-style drivetrain (a left and a right
 * side), driven by arcade, tank or curvature drive with WPILib's computations: inputs clamped to
 * -1..1 and put through the deadband (0.02 by default), squared when asked (the default for arcade
 * and tank, keeping the sign), then scaled by the maximum output. Forward is positive; a positive
 * rotation turns counterclockwise (left). Motor safety is on: call one of the drive methods every
 * loop.
 */
public class DifferentialDrive extends RobotDriveBase implements Sendable, AutoCloseable {
  private final DoubleConsumer m_leftMotor;
  private final DoubleConsumer m_rightMotor;
  private double m_leftOutput;
  private double m_rightOutput;

  /** Wheel speeds of a differential drive, -1 to 1. */
  @SuppressWarnings("MemberName")
  public static class WheelSpeeds {
    /** Left wheel speed. */
    public double left;

    /** Right wheel speed. */
    public double right;

    /** Both zero. */
    public WheelSpeeds() {}

    public WheelSpeeds(double left, double right) {
      this.left = left;
      this.right = right;
    }
  }

  /** A drive of two motor controllers; invert one side (setInverted) before, as your gearboxes need. */
  public DifferentialDrive(MotorController leftMotor, MotorController rightMotor) {
    this((double output) -> leftMotor.set(output), (double output) -> rightMotor.set(output));
  }

  /** A drive of two setters (for example {@code leftMotor::set}). */
  public DifferentialDrive(DoubleConsumer leftMotor, DoubleConsumer rightMotor) {
    m_leftMotor = Objects.requireNonNull(leftMotor, "Parameter leftMotor in method DifferentialDrive was null when it should not have been!");
    m_rightMotor = Objects.requireNonNull(rightMotor, "Parameter rightMotor in method DifferentialDrive was null when it should not have been!");
  }

  @Override
  public void close() {}

  /** Arcade drive with squared inputs: {@code xSpeed} forward, {@code zRotation} counterclockwise, each -1 to 1. */
  public void arcadeDrive(double xSpeed, double zRotation) {
    arcadeDrive(xSpeed, zRotation, true);
  }

  /** Arcade drive: {@code xSpeed} forward, {@code zRotation} counterclockwise, each -1 to 1; squared inputs are gentler at low speed. */
  public void arcadeDrive(double xSpeed, double zRotation, boolean squareInputs) {
    drive(arcadeDriveIK(MathUtil.applyDeadband(xSpeed, m_deadband), MathUtil.applyDeadband(zRotation, m_deadband), squareInputs));
  }

  /** Curvature drive: {@code zRotation} sets the path's curvature, not the turning rate (unless turning in place is allowed). */
  public void curvatureDrive(double xSpeed, double zRotation, boolean allowTurnInPlace) {
    drive(curvatureDriveIK(MathUtil.applyDeadband(xSpeed, m_deadband), MathUtil.applyDeadband(zRotation, m_deadband), allowTurnInPlace));
  }

  /** Tank drive with squared inputs: each side's speed forward, -1 to 1. */
  public void tankDrive(double leftSpeed, double rightSpeed) {
    tankDrive(leftSpeed, rightSpeed, true);
  }

  /** Tank drive: each side's speed forward, -1 to 1; squared inputs are gentler at low speed. */
  public void tankDrive(double leftSpeed, double rightSpeed, boolean squareInputs) {
    drive(tankDriveIK(MathUtil.applyDeadband(leftSpeed, m_deadband), MathUtil.applyDeadband(rightSpeed, m_deadband), squareInputs));
  }

  private void drive(WheelSpeeds speeds) {
    m_leftOutput = speeds.left * m_maxOutput;
    m_rightOutput = speeds.right * m_maxOutput;
    m_leftMotor.accept(m_leftOutput);
    m_rightMotor.accept(m_rightOutput);
    feed();
  }

  private static double squared(double value) {
    return Math.copySign(value * value, value);
  }

  /** Arcade drive's wheel speeds: forward minus and plus the rotation, scaled down so that neither side passes 1. */
  public static WheelSpeeds arcadeDriveIK(double xSpeed, double zRotation, boolean squareInputs) {
    xSpeed = MathUtil.clamp(xSpeed, -1.0, 1.0);
    zRotation = MathUtil.clamp(zRotation, -1.0, 1.0);
    if (squareInputs) {
      xSpeed = squared(xSpeed);
      zRotation = squared(zRotation);
    }
    double greater = Math.max(Math.abs(xSpeed), Math.abs(zRotation));
    if (greater == 0.0) {
      return new WheelSpeeds(0.0, 0.0);
    }
    double lesser = Math.min(Math.abs(xSpeed), Math.abs(zRotation));
    double scale = greater / (greater + lesser);
    return new WheelSpeeds((xSpeed - zRotation) * scale, (xSpeed + zRotation) * scale);
  }

  /** Curvature drive's wheel speeds: the rotation scaled by the speed (or not, turning in place), normalised when a side passes 1. */
  public static WheelSpeeds curvatureDriveIK(double xSpeed, double zRotation, boolean allowTurnInPlace) {
    xSpeed = MathUtil.clamp(xSpeed, -1.0, 1.0);
    zRotation = MathUtil.clamp(zRotation, -1.0, 1.0);
    double turn = allowTurnInPlace ? zRotation : Math.abs(xSpeed) * zRotation;
    double left = xSpeed - turn;
    double right = xSpeed + turn;
    double most = Math.max(Math.abs(left), Math.abs(right));
    if (most > 1.0) {
      left /= most;
      right /= most;
    }
    return new WheelSpeeds(left, right);
  }

  /** Tank drive's wheel speeds: each side clamped, squared when asked. */
  public static WheelSpeeds tankDriveIK(double leftSpeed, double rightSpeed, boolean squareInputs) {
    leftSpeed = MathUtil.clamp(leftSpeed, -1.0, 1.0);
    rightSpeed = MathUtil.clamp(rightSpeed, -1.0, 1.0);
    if (squareInputs) {
      leftSpeed = squared(leftSpeed);
      rightSpeed = squared(rightSpeed);
    }
    return new WheelSpeeds(leftSpeed, rightSpeed);
  }

  @Override
  public void stopMotor() {
    m_leftOutput = 0.0;
    m_rightOutput = 0.0;
    m_leftMotor.accept(0.0);
    m_rightMotor.accept(0.0);
    feed();
  }

  @Override
  public String getDescription() {
    return "DifferentialDrive";
  }
}
