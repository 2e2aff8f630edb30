package edu.wpi.first.math.geometry;

import java.util.Objects;

/** Classroom stand-in for WPILib's Pose2d: where the robot is on the field (metres) and where it faces. */
public class Pose2d {
  /** At the origin, facing along X. */
  public static final Pose2d kZero = new Pose2d();

  private final Translation2d m_translation;
  private final Rotation2d m_rotation;

  public Pose2d() {
    this(Translation2d.kZero, Rotation2d.kZero);
  }

  public Pose2d(Translation2d translation, Rotation2d rotation) {
    m_translation = translation;
    m_rotation = rotation;
  }

  public Pose2d(double x, double y, Rotation2d rotation) {
    this(new Translation2d(x, y), rotation);
  }

  public Translation2d getTranslation() {
    return m_translation;
  }

  public double getX() {
    return m_translation.getX();
  }

  public double getY() {
    return m_translation.getY();
  }

  public Rotation2d getRotation() {
    return m_rotation;
  }

  /** The pose rotated about the origin. */
  public Pose2d rotateBy(Rotation2d other) {
    return new Pose2d(m_translation.rotateBy(other), m_rotation.rotateBy(other));
  }

  @Override
  public String toString() {
    return String.format("Pose2d(%s, %s)", m_translation, m_rotation);
  }

  @Override
  public boolean equals(Object obj) {
    return obj instanceof Pose2d pose && m_translation.equals(pose.m_translation) && m_rotation.equals(pose.m_rotation);
  }

  @Override
  public int hashCode() {
    return Objects.hash(m_translation, m_rotation);
  }
}
