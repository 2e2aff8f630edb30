package edu.wpi.first.wpilibj.motorcontrol;

/** Classroom stand-in for WPILib's PWMTalonFX: a Cross the Road Electronics Talon FX (PWM) on a PWM channel (see PWMMotorController). */
public class PWMTalonFX extends PWMMotorController {
  /** The motor controller on PWM channel {@code channel} (0 to 9 on board, 10 to 19 on the MXP port). */
  public PWMTalonFX(final int channel) {
    super("PWMTalonFX", channel);
  }
}
