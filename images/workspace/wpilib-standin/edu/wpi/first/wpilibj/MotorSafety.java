package edu.wpi.first.wpilibj;

import java.util.LinkedHashSet;
import java.util.Set;

/**
 * Classroom stand-in for WPILib's MotorSafety: a motor whose safety is on must be given a new
 * output at least every expiration time (0.1 s by default) while the robot is enabled outside test,
 * or it is stopped with an error. The stand-in checks once per robot loop, after the loop's methods.
 */
public abstract class MotorSafety {
  private static final double kDefaultSafetyExpiration = 0.1;
  private static final Set<MotorSafety> s_instances = new LinkedHashSet<>();

  private double m_expiration = kDefaultSafetyExpiration;
  private boolean m_enabled;
  private double m_stopTime = Timer.getFPGATimestamp();

  /** Registers this motor for the checks. */
  @SuppressWarnings("this-escape")
  public MotorSafety() {
    synchronized (s_instances) {
      s_instances.add(this);
    }
  }

  /** Feeds the watchdog: the motor may run another expiration time. */
  public synchronized void feed() {
    m_stopTime = Timer.getFPGATimestamp() + m_expiration;
  }

  public synchronized void setExpiration(double expirationTime) {
    m_expiration = expirationTime;
  }

  public synchronized double getExpiration() {
    return m_expiration;
  }

  /** Whether the motor is fed (or its safety is off). */
  public synchronized boolean isAlive() {
    return !m_enabled || m_stopTime > Timer.getFPGATimestamp();
  }

  /** Stops the motor, with an error, when its safety is on, the robot enabled outside test, and it was not fed in time. */
  public void check() {
    boolean enabled;
    double stopTime;
    synchronized (this) {
      enabled = m_enabled;
      stopTime = m_stopTime;
    }
    if (!enabled || DriverStation.isDisabled() || DriverStation.isTest()) {
      return;
    }
    if (stopTime < Timer.getFPGATimestamp()) {
      DriverStation.reportError(getDescription() + "... Output not updated often enough. See https://docs.wpilib.org/motorsafety for more information.", false);
      stopMotor();
    }
  }

  public synchronized void setSafetyEnabled(boolean enabled) {
    m_enabled = enabled;
  }

  public synchronized boolean isSafetyEnabled() {
    return m_enabled;
  }

  /** Checks every motor (the robot loop calls this). */
  public static void checkMotors() {
    synchronized (s_instances) {
      for (MotorSafety motor : s_instances) {
        motor.check();
      }
    }
  }

  /** Stops the motor. */
  public abstract void stopMotor();

  /** What the motor is, for the error message. */
  public abstract String getDescription();
}
