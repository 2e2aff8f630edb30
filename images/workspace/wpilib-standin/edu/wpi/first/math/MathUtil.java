package edu.wpi.first.math;

/** Classroom stand-in for WPILib's MathUtil: clamping, deadbands, interpolation, angle wrapping. */
public final class MathUtil {
  private MathUtil() {}

  /** `value` kept between `low` and `high`. */
  public static int clamp(int value, int low, int high) {
    return Math.max(low, Math.min(value, high));
  }

  /** `value` kept between `low` and `high`. */
  public static double clamp(double value, double low, double high) {
    return Math.max(low, Math.min(value, high));
  }

  /**
   * 0 inside the deadband (|value| at most `deadband`); outside it, the rest of the range is
   * stretched linearly so that ±deadband maps to 0 and ±maxMagnitude to ±maxMagnitude.
   */
  public static double applyDeadband(double value, double deadband, double maxMagnitude) {
    if (Math.abs(value) <= deadband) {
      return 0.0;
    }
    double past = value - Math.copySign(deadband, value);
    if (maxMagnitude / deadband > 1.0e12) {
      // An unbounded range: stretching would only add rounding error.
      return past;
    }
    return past * maxMagnitude / (maxMagnitude - deadband);
  }

  /** applyDeadband with a range of -1 to 1. */
  public static double applyDeadband(double value, double deadband) {
    return applyDeadband(value, deadband, 1);
  }

  /** `input` wrapped into minimumInput..maximumInput. */
  public static double inputModulus(double input, double minimumInput, double maximumInput) {
    double modulus = maximumInput - minimumInput;
    input -= (int) ((input - minimumInput) / modulus) * modulus;
    input -= (int) ((input - maximumInput) / modulus) * modulus;
    return input;
  }

  /** An angle in radians wrapped into -π..π. */
  public static double angleModulus(double angleRadians) {
    return inputModulus(angleRadians, -Math.PI, Math.PI);
  }

  /** The value a fraction `t` (kept between 0 and 1) of the way from startValue to endValue. */
  public static double interpolate(double startValue, double endValue, double t) {
    return startValue + (endValue - startValue) * clamp(t, 0, 1);
  }

  /** Whether `actual` is within `tolerance` of `expected`. */
  public static boolean isNear(double expected, double actual, double tolerance) {
    if (tolerance < 0) {
      throw new IllegalArgumentException("Tolerance must be a non-negative number!");
    }
    return Math.abs(expected - actual) < tolerance;
  }
}
