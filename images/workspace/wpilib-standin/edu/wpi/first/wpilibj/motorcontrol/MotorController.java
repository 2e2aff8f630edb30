package edu.wpi.first.wpilibj.motorcontrol;

import edu.wpi.first.wpilibj.RobotController;

/** Classroom stand-in for WPILib's MotorController: what every motor controller does. */
public interface MotorController {
  /** Sets the speed, -1 to 1. */
  void set(double speed);

  /** Sets the voltage (compensated for the battery's, a steady 12 V in the stand-in). */
  default void setVoltage(double outputVolts) {
    set(outputVolts / RobotController.getBatteryVoltage());
  }

  /** The speed last set, -1 to 1. */
  double get();

  /** Inverts the direction. */
  void setInverted(boolean isInverted);

  boolean getInverted();

  /** Disables the motor controller (no output until set again). */
  void disable();

  /** Stops the motor; set makes it move again. */
  void stopMotor();
}
