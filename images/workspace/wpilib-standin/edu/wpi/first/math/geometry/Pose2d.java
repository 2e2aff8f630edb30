package edu.wpi.first.math.geometry;

/** Classroom stand-in for WPILib's Pose2d: where the robot is on the field (metres) and where it faces. */
public class Pose2d {
  private final double m_x;
  private final double m_y;
  private final Rotation2d m_rotation;

  public Pose2d() {
    this(0.0, 0.0, new Rotation2d());
  }

  public Pose2d(double x, double y, Rotation2d rotation) {
    m_x = x;
    m_y = y;
    m_rotation = rotation;
  }

  public double getX() {
    return m_x;
  }

  public double getY() {
    return m_y;
  }

  public Rotation2d getRotation() {
    return m_rotation;
  }

  @Override
  public String toString() {
    return String.format("Pose2d(X: %.2f, Y: %.2f, %s)", m_x, m_y, m_rotation);
  }
}
