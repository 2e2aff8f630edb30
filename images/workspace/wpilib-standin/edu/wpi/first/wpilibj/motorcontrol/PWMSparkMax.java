package edu.wpi.first.wpilibj.motorcontrol;

/** Classroom stand-in for WPILib's PWMSparkMax: a REV Robotics SPARK MAX (PWM) on a PWM channel (see PWMMotorController). */
public class PWMSparkMax extends PWMMotorController {
  /** The motor controller on PWM channel {@code channel} (0 to 9 on board, 10 to 19 on the MXP port). */
  public PWMSparkMax(final int channel) {
    super("PWMSparkMax", channel);
  }
}
