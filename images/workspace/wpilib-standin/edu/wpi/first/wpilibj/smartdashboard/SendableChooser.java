package edu.wpi.first.wpilibj.smartdashboard;

import classroom.SimServer;
import edu.wpi.first.util.sendable.Sendable;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

/**
 * Classroom stand-in for WPILib's SendableChooser: a choice of options (an autonomous routine,
 * typically) that a dashboard shows and picks from. Put on the SmartDashboard, it is published as
 * WPILib publishes it, under /SmartDashboard/&lt;key&gt;/: .type "String Chooser", .name,
 * .controllable, .instance, options (string[]), default and active (strings). A dashboard picks by
 * publishing /SmartDashboard/&lt;key&gt;/selected (a string); as in WPILib, the robot loop takes the
 * pick (SmartDashboard.updateValues, after robotPeriodic), and getSelected returns that option from
 * then on; an onChange listener runs there, on the robot's thread.
 */
public class SendableChooser<V> implements Sendable, AutoCloseable {
  private static final AtomicInteger s_instances = new AtomicInteger();

  private final Map<String, V> m_map = new LinkedHashMap<>();
  private final int m_instance;
  private String m_defaultChoice = "";
  private String m_selected;
  private String m_previousVal;
  private Consumer<V> m_listener;
  private String m_key;
  /** The dashboard's latest pick, until the robot loop takes it. */
  private final AtomicReference<String> m_received = new AtomicReference<>();

  /** An empty chooser. */
  public SendableChooser() {
    m_instance = s_instances.getAndIncrement();
  }

  @Override
  public void close() {}

  /** Adds an option: its name (shown on the dashboard) and its value. */
  public synchronized void addOption(String name, V object) {
    m_map.put(name, object);
  }

  /** Adds the option chosen until the dashboard picks another. */
  public synchronized void setDefaultOption(String name, V object) {
    Objects.requireNonNull(name, "Parameter name in method setDefaultOption was null when it should not have been!");
    m_defaultChoice = name;
    addOption(name, object);
  }

  /** The value of the option picked on the dashboard, else the default's (null when there is none). */
  public synchronized V getSelected() {
    return m_map.get(m_selected != null ? m_selected : m_defaultChoice);
  }

  /** Calls `listener` with the new option's value each time the dashboard picks another. */
  public synchronized void onChange(Consumer<V> listener) {
    Objects.requireNonNull(listener, "Parameter listener in method onChange was null when it should not have been!");
    m_listener = listener;
  }

  /** Where the SmartDashboard shows it (SmartDashboard.putData): publishes it and takes the dashboard's picks. */
  void shownAs(String key) {
    synchronized (this) {
      m_key = key;
    }
    SimServer.putSendable(key, "String Chooser");
    SimServer.publish("/SmartDashboard/" + key + "/.instance", "int", (long) m_instance);
    SimServer.acceptString("/SmartDashboard/" + key + "/selected", m_received::set);
    update();
  }

  /** Takes the dashboard's latest pick, then publishes the options, the default and the active option (only what changed goes out). */
  void update() {
    String received = m_received.getAndSet(null);
    if (received != null) {
      select(received);
    }
    String key;
    String[] options;
    String defaultChoice;
    String active;
    synchronized (this) {
      key = m_key;
      options = m_map.keySet().toArray(new String[0]);
      defaultChoice = m_defaultChoice;
      active = m_selected != null ? m_selected : m_defaultChoice;
    }
    if (key == null) {
      return;
    }
    SimServer.publish("/SmartDashboard/" + key + "/default", "string", defaultChoice);
    SimServer.publish("/SmartDashboard/" + key + "/options", "string[]", options);
    SimServer.publish("/SmartDashboard/" + key + "/active", "string", active);
  }

  /** The dashboard picked `value`. */
  private void select(String value) {
    V choice = null;
    Consumer<V> listener = null;
    synchronized (this) {
      m_selected = value;
      if (!value.equals(m_previousVal) && m_listener != null) {
        choice = m_map.get(value);
        listener = m_listener;
      }
      m_previousVal = value;
    }
    if (listener != null) {
      listener.accept(choice);
    }
  }
}
