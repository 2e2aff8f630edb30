package edu.wpi.first.wpilibj;

import classroom.HalData;
import edu.wpi.first.math.MathUtil;
import java.util.HashMap;
import java.util.Map;

/**
 * Classroom stand-in for WPILib's GenericHID: a joystick or gamepad on a Driver Station port
 * (0 to 5), read through {@link DriverStation}. Rumble goes back to the Driver Station over HALSim
 * ({@code <rumble_left}, {@code <rumble_right}, 0 to 1).
 */
public class GenericHID {
  /** A rumble motor of the controller. */
  public enum RumbleType {
    /** Left rumble motor. */
    kLeftRumble,
    /** Right rumble motor. */
    kRightRumble,
    /** Both left and right rumble motors. */
    kBothRumble
  }

  /** USB HID interface type. */
  public enum HIDType {
    kUnknown(-1),
    kXInputUnknown(0),
    kXInputGamepad(1),
    kXInputWheel(2),
    kXInputArcadeStick(3),
    kXInputFlightStick(4),
    kXInputDancePad(5),
    kXInputGuitar(6),
    kXInputGuitar2(7),
    kXInputDrumKit(8),
    kXInputGuitar3(11),
    kXInputArcadePad(19),
    kHIDJoystick(20),
    kHIDGamepad(21),
    kHIDDriving(22),
    kHIDFlight(23),
    kHID1stPerson(24);

    /** HIDType value. */
    public final int value;

    private static final Map<Integer, HIDType> map = new HashMap<>();

    HIDType(int value) {
      this.value = value;
    }

    static {
      for (HIDType hidType : HIDType.values()) {
        map.put(hidType.value, hidType);
      }
    }

    /** The HIDType of a value (null when none). */
    public static HIDType of(int value) {
      return map.get(value);
    }
  }

  private final int m_port;
  private double m_leftRumble;
  private double m_rightRumble;

  /** A device on Driver Station port {@code port} (0 to 5). */
  public GenericHID(int port) {
    m_port = port;
    if (port >= 0 && port < DriverStation.kJoystickPorts) {
      HalData.useJoystick(port);
    }
  }

  /** Whether a button (starting at 1) is down. */
  public boolean getRawButton(int button) {
    return DriverStation.getStickButton(m_port, button);
  }

  /** Whether a button was pressed since the last check. */
  public boolean getRawButtonPressed(int button) {
    return DriverStation.getStickButtonPressed(m_port, button);
  }

  /** Whether a button was released since the last check. */
  public boolean getRawButtonReleased(int button) {
    return DriverStation.getStickButtonReleased(m_port, button);
  }

  /** An axis (starting at 0), -1 to 1. */
  public double getRawAxis(int axis) {
    return DriverStation.getStickAxis(m_port, axis);
  }

  /** A POV's angle in degrees (0 up, 90 right, ...), or -1 when not pressed. */
  public int getPOV(int pov) {
    return DriverStation.getStickPOV(m_port, pov);
  }

  /** The first POV's angle in degrees, or -1 when not pressed. */
  public int getPOV() {
    return getPOV(0);
  }

  public int getAxisCount() {
    return DriverStation.getStickAxisCount(m_port);
  }

  public int getPOVCount() {
    return DriverStation.getStickPOVCount(m_port);
  }

  public int getButtonCount() {
    return DriverStation.getStickButtonCount(m_port);
  }

  /** Whether the Driver Station sends this port any axis, button or POV. */
  public boolean isConnected() {
    return DriverStation.isJoystickConnected(m_port);
  }

  /** Always kUnknown: HALSim carries no joystick descriptors. */
  public HIDType getType() {
    return HIDType.of(DriverStation.getJoystickType(m_port));
  }

  /** Always "": HALSim carries no joystick descriptors. */
  public String getName() {
    return DriverStation.getJoystickName(m_port);
  }

  public int getPort() {
    return m_port;
  }

  /** Sets a rumble motor (0 to 1). */
  public void setRumble(RumbleType type, double value) {
    value = MathUtil.clamp(value, 0, 1);
    switch (type) {
      case kLeftRumble -> m_leftRumble = value;
      case kRightRumble -> m_rightRumble = value;
      default -> {
        m_leftRumble = value;
        m_rightRumble = value;
      }
    }
    HalData.setRumble(m_port, m_leftRumble, m_rightRumble);
  }
}
