package edu.wpi.first.wpilibj;

/** Classroom stand-in for WPILib's Timer: a stopwatch in seconds, and the time since start. */
public class Timer {
  private static final long START = System.nanoTime();

  private double m_startTime;
  private double m_accumulatedTime;
  private boolean m_running;

  public Timer() {
    reset();
  }

  /** Seconds since the robot program started (WPILib: since the FPGA started). */
  public static double getFPGATimestamp() {
    return (System.nanoTime() - START) / 1e9;
  }

  /** Same as getFPGATimestamp in the stand-in. */
  public static double getTimestamp() {
    return getFPGATimestamp();
  }

  /** The match time in seconds (DriverStation.getMatchTime), -1 when not in a match. */
  public static double getMatchTime() {
    return DriverStation.getMatchTime();
  }

  /** Waits the given number of seconds. */
  public static void delay(double seconds) {
    try {
      Thread.sleep((long) (seconds * 1e3));
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /** Seconds counted so far. */
  public double get() {
    return m_running ? m_accumulatedTime + getFPGATimestamp() - m_startTime : m_accumulatedTime;
  }

  /** Sets the count to zero (it keeps running if it was). */
  public final void reset() {
    m_accumulatedTime = 0;
    m_startTime = getFPGATimestamp();
  }

  /** Starts counting (does nothing if running). */
  public void start() {
    if (!m_running) {
      m_startTime = getFPGATimestamp();
      m_running = true;
    }
  }

  /** Sets the count to zero and starts counting. */
  public void restart() {
    if (m_running) {
      stop();
    }
    reset();
    start();
  }

  /** Stops counting, keeping the count. */
  public void stop() {
    m_accumulatedTime = get();
    m_running = false;
  }

  /** Whether at least {@code seconds} have been counted. */
  public boolean hasElapsed(double seconds) {
    return get() >= seconds;
  }

  /** Whether the timer is counting. */
  public boolean isRunning() {
    return m_running;
  }
}
