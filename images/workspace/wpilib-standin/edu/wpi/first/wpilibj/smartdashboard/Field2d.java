package edu.wpi.first.wpilibj.smartdashboard;

import classroom.SimServer;
import edu.wpi.first.math.geometry.Pose2d;
import edu.wpi.first.math.geometry.Rotation2d;
import edu.wpi.first.util.sendable.Sendable;

/**
 * Classroom stand-in for WPILib's Field2d: the robot's pose on the field. Put on the SmartDashboard
 * (SmartDashboard.putData("Field", field)), its pose is published as WPILib publishes it:
 * /SmartDashboard/Field/Robot, x and y in metres and the heading in degrees.
 */
public class Field2d implements Sendable {
  private Pose2d m_pose = new Pose2d();
  private String m_key;

  public Field2d() {}

  public synchronized void setRobotPose(Pose2d pose) {
    m_pose = pose;
    publish();
  }

  public void setRobotPose(double xMeters, double yMeters, Rotation2d rotation) {
    setRobotPose(new Pose2d(xMeters, yMeters, rotation));
  }

  public synchronized Pose2d getRobotPose() {
    return m_pose;
  }

  /** Where the SmartDashboard shows it (SmartDashboard.putData). */
  synchronized void shownAs(String key) {
    m_key = key;
    publish();
  }

  private void publish() {
    if (m_key != null) {
      SimServer.putPose(m_key, m_pose.getX(), m_pose.getY(), m_pose.getRotation().getDegrees());
    }
  }
}
