package edu.wpi.first.wpilibj.smartdashboard;

import classroom.SimServer;
import edu.wpi.first.math.geometry.Pose2d;
import edu.wpi.first.math.geometry.Rotation2d;
import edu.wpi.first.util.sendable.Sendable;
import java.util.ArrayList;
import java.util.List;

/**
 * Classroom stand-in for WPILib's Field2d: the robot's pose on the field, and other objects (a
 * target, a path: getObject). Put on the SmartDashboard (SmartDashboard.putData("Field", field)),
 * it is published as WPILib publishes it: /SmartDashboard/Field/.type "Field2d", and one double[]
 * topic per object (/SmartDashboard/Field/Robot, /SmartDashboard/Field/&lt;name&gt;), x and y in
 * metres and the heading in degrees for each of its poses.
 */
public class Field2d implements Sendable, AutoCloseable {
  private final List<FieldObject2d> m_objects = new ArrayList<>();
  private String m_key;

  /** A field with the robot at the origin. */
  public Field2d() {
    FieldObject2d robot = new FieldObject2d("Robot");
    robot.setPose(Pose2d.kZero);
    m_objects.add(robot);
  }

  @Override
  public void close() {}

  public synchronized void setRobotPose(Pose2d pose) {
    m_objects.get(0).setPose(pose);
  }

  public synchronized void setRobotPose(double xMeters, double yMeters, Rotation2d rotation) {
    m_objects.get(0).setPose(xMeters, yMeters, rotation);
  }

  public synchronized Pose2d getRobotPose() {
    return m_objects.get(0).getPose();
  }

  /** The object named `name`, made (with no pose) the first time. */
  public synchronized FieldObject2d getObject(String name) {
    for (FieldObject2d object : m_objects) {
      if (object.m_name.equals(name)) {
        return object;
      }
    }
    FieldObject2d object = new FieldObject2d(name);
    m_objects.add(object);
    if (m_key != null) {
      object.shownAs(m_key);
    }
    return object;
  }

  /** The robot's object. */
  public synchronized FieldObject2d getRobotObject() {
    return m_objects.get(0);
  }

  /** Where the SmartDashboard shows it (SmartDashboard.putData). */
  synchronized void shownAs(String key) {
    m_key = key;
    SimServer.putSendable(key, "Field2d");
    for (FieldObject2d object : m_objects) {
      object.shownAs(key);
    }
  }
}
