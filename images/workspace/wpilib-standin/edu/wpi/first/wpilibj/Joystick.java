package edu.wpi.first.wpilibj;

/**
 * Classroom stand-in for WPILib's Joystick: a flight-style joystick on a Driver Station port (X
 * axis 0, Y 1, Z and twist 2, throttle 3 by default; trigger button 1, top button 2). As in WPILib,
 * pushing the stick forward gives a negative Y.
 */
public class Joystick extends GenericHID {
  public static final byte kDefaultXChannel = 0;
  public static final byte kDefaultYChannel = 1;
  public static final byte kDefaultZChannel = 2;
  public static final byte kDefaultTwistChannel = 2;
  public static final byte kDefaultThrottleChannel = 3;

  /** The axes of a joystick (indexes into its channel table). */
  public enum AxisType {
    kX(0),
    kY(1),
    kZ(2),
    kTwist(3),
    kThrottle(4);

    /** AxisType value. */
    public final int value;

    AxisType(int value) {
      this.value = value;
    }
  }

  /** The buttons of a joystick. */
  public enum ButtonType {
    kTrigger(1),
    kTop(2);

    /** ButtonType value. */
    public final int value;

    ButtonType(int value) {
      this.value = value;
    }
  }

  private final byte[] m_axes = new byte[AxisType.values().length];

  /** A joystick on Driver Station port {@code port} (0 to 5). */
  public Joystick(final int port) {
    super(port);
    m_axes[AxisType.kX.value] = kDefaultXChannel;
    m_axes[AxisType.kY.value] = kDefaultYChannel;
    m_axes[AxisType.kZ.value] = kDefaultZChannel;
    m_axes[AxisType.kTwist.value] = kDefaultTwistChannel;
    m_axes[AxisType.kThrottle.value] = kDefaultThrottleChannel;
  }

  public void setXChannel(int channel) {
    m_axes[AxisType.kX.value] = (byte) channel;
  }

  public void setYChannel(int channel) {
    m_axes[AxisType.kY.value] = (byte) channel;
  }

  public void setZChannel(int channel) {
    m_axes[AxisType.kZ.value] = (byte) channel;
  }

  public void setThrottleChannel(int channel) {
    m_axes[AxisType.kThrottle.value] = (byte) channel;
  }

  public void setTwistChannel(int channel) {
    m_axes[AxisType.kTwist.value] = (byte) channel;
  }

  public int getXChannel() {
    return m_axes[AxisType.kX.value];
  }

  public int getYChannel() {
    return m_axes[AxisType.kY.value];
  }

  public int getZChannel() {
    return m_axes[AxisType.kZ.value];
  }

  public int getTwistChannel() {
    return m_axes[AxisType.kTwist.value];
  }

  public int getThrottleChannel() {
    return m_axes[AxisType.kThrottle.value];
  }

  public final double getX() {
    return getRawAxis(m_axes[AxisType.kX.value]);
  }

  public final double getY() {
    return getRawAxis(m_axes[AxisType.kY.value]);
  }

  public final double getZ() {
    return getRawAxis(m_axes[AxisType.kZ.value]);
  }

  public final double getTwist() {
    return getRawAxis(m_axes[AxisType.kTwist.value]);
  }

  public final double getThrottle() {
    return getRawAxis(m_axes[AxisType.kThrottle.value]);
  }

  public boolean getTrigger() {
    return getRawButton(ButtonType.kTrigger.value);
  }

  public boolean getTriggerPressed() {
    return getRawButtonPressed(ButtonType.kTrigger.value);
  }

  public boolean getTriggerReleased() {
    return getRawButtonReleased(ButtonType.kTrigger.value);
  }

  public boolean getTop() {
    return getRawButton(ButtonType.kTop.value);
  }

  public boolean getTopPressed() {
    return getRawButtonPressed(ButtonType.kTop.value);
  }

  public boolean getTopReleased() {
    return getRawButtonReleased(ButtonType.kTop.value);
  }

  /** How far the stick is pushed: the length of (X, Y). */
  public double getMagnitude() {
    return Math.hypot(getX(), getY());
  }

  /** The stick's direction in radians: 0 forward, positive clockwise. */
  public double getDirectionRadians() {
    return Math.atan2(getX(), -getY());
  }

  /** The stick's direction in degrees: 0 forward, positive clockwise. */
  public double getDirectionDegrees() {
    return Math.toDegrees(getDirectionRadians());
  }
}
