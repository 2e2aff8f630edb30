package edu.wpi.first.wpilibj.motorcontrol;

import classroom.HalData;
import edu.wpi.first.util.sendable.Sendable;
import edu.wpi.first.wpilibj.MotorSafety;
import edu.wpi.first.wpilibj.RobotController;
import java.util.ArrayList;

/**
 * Classroom stand-in for WPILib's PWMMotorController: a motor controller on a PWM channel (0 to
 * 19), which the simulator reports over HALSim as the PWM device of that channel ({@code <init},
 * {@code <speed}). While the robot is not enabled, the motor gets no output: HALSim shows 0,
 * whatever was set (get() still returns what was set, as in WPILib).
 */
public abstract class PWMMotorController extends MotorSafety implements MotorController, Sendable, AutoCloseable {
  private final int m_channel;
  private final String m_name;
  private boolean m_isInverted;
  private final ArrayList<PWMMotorController> m_followers = new ArrayList<>();

  /** A motor controller named `name` on PWM channel `channel` (0 to 19; each channel once). */
  protected PWMMotorController(final String name, final int channel) {
    HalData.allocatePwm(channel);
    m_name = name;
    m_channel = channel;
  }

  /** Gives the channel back. */
  @Override
  public void close() {
    HalData.freePwm(m_channel);
  }

  /** Sets the speed, -1 to 1 (reversed when inverted); followers get the same. */
  @Override
  public void set(double speed) {
    if (m_isInverted) {
      speed = -speed;
    }
    HalData.setPwm(m_channel, speed);
    for (var follower : m_followers) {
      follower.set(speed);
    }
    feed();
  }

  /** The speed last set, -1 to 1 (as given to set, inversion undone). */
  @Override
  public double get() {
    return HalData.getPwm(m_channel) * (m_isInverted ? -1.0 : 1.0);
  }

  /** The voltage of the speed last set, on a 12 V battery. */
  public double getVoltage() {
    return get() * RobotController.getBatteryVoltage();
  }

  @Override
  public void setInverted(boolean isInverted) {
    m_isInverted = isInverted;
  }

  @Override
  public boolean getInverted() {
    return m_isInverted;
  }

  @Override
  public void disable() {
    HalData.setPwm(m_channel, 0.0);
    for (var follower : m_followers) {
      follower.disable();
    }
  }

  @Override
  public void stopMotor() {
    HalData.setPwm(m_channel, 0.0);
    for (var follower : m_followers) {
      follower.stopMotor();
    }
  }

  @Override
  public String getDescription() {
    return "PWM " + getChannel();
  }

  /** The PWM channel. */
  public int getChannel() {
    return m_channel;
  }

  /** Makes `follower` get this one's output. */
  public void addFollower(PWMMotorController follower) {
    m_followers.add(follower);
  }

  @Override
  public String toString() {
    return m_name + "[" + m_channel + "]";
  }
}
