package edu.wpi.first.wpilibj.smartdashboard;

import classroom.SimServer;
import edu.wpi.first.math.geometry.Pose2d;
import edu.wpi.first.math.geometry.Rotation2d;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * Classroom stand-in for WPILib's FieldObject2d: one object of a Field2d with its poses (one for a
 * robot or a game piece, many for a path), published as one double[] of x, y and degrees per pose.
 */
public class FieldObject2d implements AutoCloseable {
  final String m_name;
  private final List<Pose2d> m_poses = new ArrayList<>();
  private String m_topic;

  FieldObject2d(String name) {
    m_name = name;
  }

  @Override
  public void close() {}

  /** Sets its one pose. */
  public synchronized void setPose(Pose2d pose) {
    setPoses(pose);
  }

  public synchronized void setPose(double xMeters, double yMeters, Rotation2d rotation) {
    setPose(new Pose2d(xMeters, yMeters, rotation));
  }

  /** Its first pose (the origin when it has none). */
  public synchronized Pose2d getPose() {
    return m_poses.isEmpty() ? Pose2d.kZero : m_poses.get(0);
  }

  public synchronized void setPoses(List<Pose2d> poses) {
    m_poses.clear();
    m_poses.addAll(poses);
    publish();
  }

  public synchronized void setPoses(Pose2d... poses) {
    m_poses.clear();
    Collections.addAll(m_poses, poses);
    publish();
  }

  public synchronized List<Pose2d> getPoses() {
    return new ArrayList<>(m_poses);
  }

  /** Published under the Field2d's key from now on. */
  synchronized void shownAs(String fieldKey) {
    m_topic = "/SmartDashboard/" + fieldKey + "/" + m_name;
    publish();
  }

  private void publish() {
    if (m_topic == null) {
      return;
    }
    double[] values = new double[m_poses.size() * 3];
    for (int i = 0; i < m_poses.size(); i++) {
      Pose2d pose = m_poses.get(i);
      values[i * 3] = pose.getX();
      values[i * 3 + 1] = pose.getY();
      values[i * 3 + 2] = pose.getRotation().getDegrees();
    }
    SimServer.publish(m_topic, "double[]", values);
  }
}
