package edu.wpi.first.wpilibj.motorcontrol;

/** Classroom stand-in for WPILib's Spark: a REV Robotics SPARK on a PWM channel (see PWMMotorController). */
public class Spark extends PWMMotorController {
  /** The motor controller on PWM channel {@code channel} (0 to 9 on board, 10 to 19 on the MXP port). */
  public Spark(final int channel) {
    super("Spark", channel);
  }
}
