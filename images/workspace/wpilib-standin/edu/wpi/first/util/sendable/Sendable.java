package edu.wpi.first.util.sendable;

/** Classroom stand-in for WPILib's Sendable: something SmartDashboard.putData can show. */
public interface Sendable {}
