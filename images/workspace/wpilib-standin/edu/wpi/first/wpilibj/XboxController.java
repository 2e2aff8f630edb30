package edu.wpi.first.wpilibj;

import edu.wpi.first.util.sendable.Sendable;

/**
 * Classroom stand-in for WPILib's XboxController: an Xbox controller on a Driver Station port, its
 * axes and buttons numbered as WPILib numbers them (left stick X 0, Y 1, triggers 2 and 3, right
 * stick X 4, Y 5; buttons A 1 to right stick 10). As in WPILib, pushing a stick forward gives a
 * negative Y.
 */
public class XboxController extends GenericHID implements Sendable {
  /** The buttons of an Xbox controller. */
  public enum Button {
    kA(1),
    kB(2),
    kX(3),
    kY(4),
    kLeftBumper(5),
    kRightBumper(6),
    kBack(7),
    kStart(8),
    kLeftStick(9),
    kRightStick(10);

    /** Button value. */
    public final int value;

    Button(int value) {
      this.value = value;
    }
  }

  /** The axes of an Xbox controller. */
  public enum Axis {
    kLeftX(0),
    kRightX(4),
    kLeftY(1),
    kRightY(5),
    kLeftTrigger(2),
    kRightTrigger(3);

    /** Axis value. */
    public final int value;

    Axis(int value) {
      this.value = value;
    }
  }

  /** A controller on Driver Station port {@code port} (0 to 5). */
  public XboxController(final int port) {
    super(port);
  }

  /** The left stick's X: right is positive. */
  public double getLeftX() {
    return getRawAxis(Axis.kLeftX.value);
  }

  /** The right stick's X: right is positive. */
  public double getRightX() {
    return getRawAxis(Axis.kRightX.value);
  }

  /** The left stick's Y: back is positive (forward is negative). */
  public double getLeftY() {
    return getRawAxis(Axis.kLeftY.value);
  }

  /** The right stick's Y: back is positive (forward is negative). */
  public double getRightY() {
    return getRawAxis(Axis.kRightY.value);
  }

  /** The left trigger, 0 to 1. */
  public double getLeftTriggerAxis() {
    return getRawAxis(Axis.kLeftTrigger.value);
  }

  /** The right trigger, 0 to 1. */
  public double getRightTriggerAxis() {
    return getRawAxis(Axis.kRightTrigger.value);
  }


  /** Whether A is down. */
  public boolean getAButton() {
    return getRawButton(Button.kA.value);
  }

  /** Whether A was pressed since the last check. */
  public boolean getAButtonPressed() {
    return getRawButtonPressed(Button.kA.value);
  }

  /** Whether A was released since the last check. */
  public boolean getAButtonReleased() {
    return getRawButtonReleased(Button.kA.value);
  }

  /** Whether B is down. */
  public boolean getBButton() {
    return getRawButton(Button.kB.value);
  }

  /** Whether B was pressed since the last check. */
  public boolean getBButtonPressed() {
    return getRawButtonPressed(Button.kB.value);
  }

  /** Whether B was released since the last check. */
  public boolean getBButtonReleased() {
    return getRawButtonReleased(Button.kB.value);
  }

  /** Whether X is down. */
  public boolean getXButton() {
    return getRawButton(Button.kX.value);
  }

  /** Whether X was pressed since the last check. */
  public boolean getXButtonPressed() {
    return getRawButtonPressed(Button.kX.value);
  }

  /** Whether X was released since the last check. */
  public boolean getXButtonReleased() {
    return getRawButtonReleased(Button.kX.value);
  }

  /** Whether Y is down. */
  public boolean getYButton() {
    return getRawButton(Button.kY.value);
  }

  /** Whether Y was pressed since the last check. */
  public boolean getYButtonPressed() {
    return getRawButtonPressed(Button.kY.value);
  }

  /** Whether Y was released since the last check. */
  public boolean getYButtonReleased() {
    return getRawButtonReleased(Button.kY.value);
  }

  /** Whether LeftBumper is down. */
  public boolean getLeftBumperButton() {
    return getRawButton(Button.kLeftBumper.value);
  }

  /** Whether LeftBumper was pressed since the last check. */
  public boolean getLeftBumperButtonPressed() {
    return getRawButtonPressed(Button.kLeftBumper.value);
  }

  /** Whether LeftBumper was released since the last check. */
  public boolean getLeftBumperButtonReleased() {
    return getRawButtonReleased(Button.kLeftBumper.value);
  }

  /** Whether RightBumper is down. */
  public boolean getRightBumperButton() {
    return getRawButton(Button.kRightBumper.value);
  }

  /** Whether RightBumper was pressed since the last check. */
  public boolean getRightBumperButtonPressed() {
    return getRawButtonPressed(Button.kRightBumper.value);
  }

  /** Whether RightBumper was released since the last check. */
  public boolean getRightBumperButtonReleased() {
    return getRawButtonReleased(Button.kRightBumper.value);
  }

  /** Whether Back is down. */
  public boolean getBackButton() {
    return getRawButton(Button.kBack.value);
  }

  /** Whether Back was pressed since the last check. */
  public boolean getBackButtonPressed() {
    return getRawButtonPressed(Button.kBack.value);
  }

  /** Whether Back was released since the last check. */
  public boolean getBackButtonReleased() {
    return getRawButtonReleased(Button.kBack.value);
  }

  /** Whether Start is down. */
  public boolean getStartButton() {
    return getRawButton(Button.kStart.value);
  }

  /** Whether Start was pressed since the last check. */
  public boolean getStartButtonPressed() {
    return getRawButtonPressed(Button.kStart.value);
  }

  /** Whether Start was released since the last check. */
  public boolean getStartButtonReleased() {
    return getRawButtonReleased(Button.kStart.value);
  }

  /** Whether LeftStick is down. */
  public boolean getLeftStickButton() {
    return getRawButton(Button.kLeftStick.value);
  }

  /** Whether LeftStick was pressed since the last check. */
  public boolean getLeftStickButtonPressed() {
    return getRawButtonPressed(Button.kLeftStick.value);
  }

  /** Whether LeftStick was released since the last check. */
  public boolean getLeftStickButtonReleased() {
    return getRawButtonReleased(Button.kLeftStick.value);
  }

  /** Whether RightStick is down. */
  public boolean getRightStickButton() {
    return getRawButton(Button.kRightStick.value);
  }

  /** Whether RightStick was pressed since the last check. */
  public boolean getRightStickButtonPressed() {
    return getRawButtonPressed(Button.kRightStick.value);
  }

  /** Whether RightStick was released since the last check. */
  public boolean getRightStickButtonReleased() {
    return getRawButtonReleased(Button.kRightStick.value);
  }

  /**
   * Same as getLeftBumperButton.
   *
   * @deprecated WPILib 2025 renamed it getLeftBumperButton.
   */
  @Deprecated(since = "2025", forRemoval = true)
  public boolean getLeftBumper() {
    return getRawButton(Button.kLeftBumper.value);
  }

  /**
   * Same as getLeftBumperButtonPressed.
   *
   * @deprecated WPILib 2025 renamed it getLeftBumperButtonPressed.
   */
  @Deprecated(since = "2025", forRemoval = true)
  public boolean getLeftBumperPressed() {
    return getRawButtonPressed(Button.kLeftBumper.value);
  }

  /**
   * Same as getLeftBumperButtonReleased.
   *
   * @deprecated WPILib 2025 renamed it getLeftBumperButtonReleased.
   */
  @Deprecated(since = "2025", forRemoval = true)
  public boolean getLeftBumperReleased() {
    return getRawButtonReleased(Button.kLeftBumper.value);
  }

  /**
   * Same as getRightBumperButton.
   *
   * @deprecated WPILib 2025 renamed it getRightBumperButton.
   */
  @Deprecated(since = "2025", forRemoval = true)
  public boolean getRightBumper() {
    return getRawButton(Button.kRightBumper.value);
  }

  /**
   * Same as getRightBumperButtonPressed.
   *
   * @deprecated WPILib 2025 renamed it getRightBumperButtonPressed.
   */
  @Deprecated(since = "2025", forRemoval = true)
  public boolean getRightBumperPressed() {
    return getRawButtonPressed(Button.kRightBumper.value);
  }

  /**
   * Same as getRightBumperButtonReleased.
   *
   * @deprecated WPILib 2025 renamed it getRightBumperButtonReleased.
   */
  @Deprecated(since = "2025", forRemoval = true)
  public boolean getRightBumperReleased() {
    return getRawButtonReleased(Button.kRightBumper.value);
  }
}
