package edu.wpi.first.math.geometry;

import java.util.Locale;
import java.util.Objects;

/** Classroom stand-in for WPILib's Translation2d: a point or a displacement on the field, in metres. */
public class Translation2d {
  /** The origin. */
  public static final Translation2d kZero = new Translation2d();

  private final double m_x;
  private final double m_y;

  public Translation2d() {
    this(0.0, 0.0);
  }

  public Translation2d(double x, double y) {
    m_x = x;
    m_y = y;
  }

  /** `distance` metres in the direction `angle`. */
  public Translation2d(double distance, Rotation2d angle) {
    this(distance * angle.getCos(), distance * angle.getSin());
  }

  public double getX() {
    return m_x;
  }

  public double getY() {
    return m_y;
  }

  /** The distance from the origin. */
  public double getNorm() {
    return Math.hypot(m_x, m_y);
  }

  /** The direction from the origin. */
  public Rotation2d getAngle() {
    return new Rotation2d(m_x, m_y);
  }

  public double getDistance(Translation2d other) {
    return Math.hypot(other.m_x - m_x, other.m_y - m_y);
  }

  public Translation2d plus(Translation2d other) {
    return new Translation2d(m_x + other.m_x, m_y + other.m_y);
  }

  public Translation2d minus(Translation2d other) {
    return new Translation2d(m_x - other.m_x, m_y - other.m_y);
  }

  public Translation2d times(double scalar) {
    return new Translation2d(m_x * scalar, m_y * scalar);
  }

  public Translation2d div(double scalar) {
    return new Translation2d(m_x / scalar, m_y / scalar);
  }

  /** Rotated counterclockwise about the origin. */
  public Translation2d rotateBy(Rotation2d other) {
    return new Translation2d(m_x * other.getCos() - m_y * other.getSin(), m_x * other.getSin() + m_y * other.getCos());
  }

  @Override
  public String toString() {
    return String.format(Locale.ROOT, "Translation2d(X: %.2f, Y: %.2f)", m_x, m_y);
  }

  /** The same point (within 1e-9 m). */
  @Override
  public boolean equals(Object obj) {
    return obj instanceof Translation2d other && Math.abs(other.m_x - m_x) < 1e-9 && Math.abs(other.m_y - m_y) < 1e-9;
  }

  @Override
  public int hashCode() {
    return Objects.hash(m_x, m_y);
  }
}
