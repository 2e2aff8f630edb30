package edu.wpi.first.wpilibj.motorcontrol;

/** Classroom stand-in for WPILib's PWMVictorSPX: a Cross the Road Electronics Victor SPX (PWM) on a PWM channel (see PWMMotorController). */
public class PWMVictorSPX extends PWMMotorController {
  /** The motor controller on PWM channel {@code channel} (0 to 9 on board, 10 to 19 on the MXP port). */
  public PWMVictorSPX(final int channel) {
    super("PWMVictorSPX", channel);
  }
}
