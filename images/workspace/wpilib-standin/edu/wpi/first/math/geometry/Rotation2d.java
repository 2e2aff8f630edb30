package edu.wpi.first.math.geometry;

/** Classroom stand-in for WPILib's Rotation2d: a heading, counterclockwise. */
public class Rotation2d {
  private final double m_radians;

  public Rotation2d() {
    this(0.0);
  }

  public Rotation2d(double radians) {
    m_radians = radians;
  }

  public static Rotation2d fromDegrees(double degrees) {
    return new Rotation2d(Math.toRadians(degrees));
  }

  public static Rotation2d fromRadians(double radians) {
    return new Rotation2d(radians);
  }

  public double getRadians() {
    return m_radians;
  }

  public double getDegrees() {
    return Math.toDegrees(m_radians);
  }

  @Override
  public String toString() {
    return String.format("Rotation2d(Rads: %.2f, Deg: %.2f)", m_radians, getDegrees());
  }
}
