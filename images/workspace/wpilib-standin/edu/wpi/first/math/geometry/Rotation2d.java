package edu.wpi.first.math.geometry;

import java.util.Locale;
import java.util.Objects;

/** Classroom stand-in for WPILib's Rotation2d: a heading, counterclockwise positive. */
public class Rotation2d {
  /** No rotation. */
  public static final Rotation2d kZero = new Rotation2d();

  /** Half a turn. */
  public static final Rotation2d kPi = new Rotation2d(Math.PI);

  /** A quarter turn counterclockwise. */
  public static final Rotation2d kCCW_90deg = new Rotation2d(Math.PI / 2);

  /** A quarter turn clockwise. */
  public static final Rotation2d kCW_90deg = new Rotation2d(-Math.PI / 2);

  private final double m_value;
  private final double m_cos;
  private final double m_sin;

  public Rotation2d() {
    this(0.0);
  }

  /** A rotation of `value` radians. */
  public Rotation2d(double value) {
    m_value = value;
    m_cos = Math.cos(value);
    m_sin = Math.sin(value);
  }

  /** The rotation of the vector (x, y) (no rotation when both are 0). */
  public Rotation2d(double x, double y) {
    double magnitude = Math.hypot(x, y);
    m_cos = magnitude > 1e-6 ? x / magnitude : 1.0;
    m_sin = magnitude > 1e-6 ? y / magnitude : 0.0;
    m_value = Math.atan2(m_sin, m_cos);
  }

  public static Rotation2d fromRadians(double radians) {
    return new Rotation2d(radians);
  }

  public static Rotation2d fromDegrees(double degrees) {
    return new Rotation2d(Math.toRadians(degrees));
  }

  public static Rotation2d fromRotations(double rotations) {
    return new Rotation2d(rotations * 2 * Math.PI);
  }

  /** This rotation, then `other` (the result is between -180° and 180°). */
  public Rotation2d plus(Rotation2d other) {
    return rotateBy(other);
  }

  /** This rotation minus `other` (between -180° and 180°). */
  public Rotation2d minus(Rotation2d other) {
    return rotateBy(other.unaryMinus());
  }

  public Rotation2d unaryMinus() {
    return new Rotation2d(-m_value);
  }

  public Rotation2d times(double scalar) {
    return new Rotation2d(m_value * scalar);
  }

  /** This rotation, then `other` (the result is between -180° and 180°). */
  public Rotation2d rotateBy(Rotation2d other) {
    return new Rotation2d(m_cos * other.m_cos - m_sin * other.m_sin, m_cos * other.m_sin + m_sin * other.m_cos);
  }

  public double getRadians() {
    return m_value;
  }

  public double getDegrees() {
    return Math.toDegrees(m_value);
  }

  public double getRotations() {
    return m_value / (2 * Math.PI);
  }

  public double getCos() {
    return m_cos;
  }

  public double getSin() {
    return m_sin;
  }

  public double getTan() {
    return m_sin / m_cos;
  }

  @Override
  public String toString() {
    return String.format(Locale.ROOT, "Rotation2d(Rads: %.2f, Deg: %.2f)", m_value, Math.toDegrees(m_value));
  }

  /** The same heading (within 1e-9). */
  @Override
  public boolean equals(Object obj) {
    return obj instanceof Rotation2d other && Math.hypot(m_cos - other.m_cos, m_sin - other.m_sin) < 1e-9;
  }

  @Override
  public int hashCode() {
    return Objects.hash(m_value);
  }
}
