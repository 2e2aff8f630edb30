package classroom;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The MessagePack that NetworkTables 4 needs: value messages (doubles, integers as Long, booleans,
 * strings, double[] and string[]) and time messages written, small messages read.
 */
final class MsgPack {
  private MsgPack() {}

  /** NetworkTables 4's type number of a type name. */
  static int typeNumber(String type) {
    return switch (type) {
      case "boolean" -> 0;
      case "double" -> 1;
      case "int" -> 2;
      case "float" -> 3;
      case "string", "json" -> 4;
      case "boolean[]" -> 16;
      case "double[]" -> 17;
      case "int[]" -> 18;
      case "float[]" -> 19;
      case "string[]" -> 20;
      default -> 5;
    };
  }

  /** One value message: [topic id, time in µs, type number, value]. */
  static void value(ByteArrayOutputStream out, int id, long micros, String type, Object value) {
    out.write(0x94);
    integer(out, id);
    integer(out, micros);
    integer(out, typeNumber(type));
    if (value instanceof Double number) {
      float64(out, number);
    } else if (value instanceof Long number) {
      integer(out, number);
    } else if (value instanceof Boolean bool) {
      out.write(bool ? 0xc3 : 0xc2);
    } else if (value instanceof double[] numbers) {
      arrayHeader(out, numbers.length);
      for (double number : numbers) {
        float64(out, number);
      }
    } else if (value instanceof String[] strings) {
      arrayHeader(out, strings.length);
      for (String string : strings) {
        string(out, string);
      }
    } else {
      string(out, String.valueOf(value));
    }
  }

  /** The answer to a time synchronisation: [-1, server time, type number, the client's time]. */
  static void timeReply(ByteArrayOutputStream out, long serverMicros, int type, long clientTime) {
    out.write(0x94);
    integer(out, -1);
    integer(out, serverMicros);
    integer(out, type);
    integer(out, clientTime);
  }

  static void integer(ByteArrayOutputStream out, long value) {
    if (value >= 0 && value < 128) {
      out.write((int) value);
    } else if (value < 0 && value >= -32) {
      out.write((int) (value & 0xff));
    } else {
      out.write(0xd3);
      for (int shift = 56; shift >= 0; shift -= 8) {
        out.write((int) (value >>> shift));
      }
    }
  }

  static void float64(ByteArrayOutputStream out, double value) {
    long bits = Double.doubleToLongBits(value);
    out.write(0xcb);
    for (int shift = 56; shift >= 0; shift -= 8) {
      out.write((int) (bits >>> shift));
    }
  }

  static void string(ByteArrayOutputStream out, String text) {
    byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
    if (bytes.length < 32) {
      out.write(0xa0 | bytes.length);
    } else if (bytes.length < 256) {
      out.write(0xd9);
      out.write(bytes.length);
    } else {
      out.write(0xda);
      out.write(bytes.length >>> 8);
      out.write(bytes.length);
    }
    out.write(bytes, 0, bytes.length);
  }

  static void arrayHeader(ByteArrayOutputStream out, int length) {
    if (length < 16) {
      out.write(0x90 | length);
    } else {
      out.write(0xdc);
      out.write(length >>> 8);
      out.write(length);
    }
  }

  /** Reads MessagePack values one after another: integers (as Long), floats (as Double), booleans, nil, strings, arrays; maps and binary are skipped as null. */
  static final class Reader {
    private final byte[] data;
    private int at;

    Reader(byte[] data) {
      this.data = data;
    }

    boolean more() {
      return at < data.length;
    }

    private int u8() {
      if (at >= data.length) {
        throw new IllegalArgumentException("the message ends early");
      }
      return data[at++] & 0xff;
    }

    private long unsigned(int bytes) {
      long value = 0;
      for (int i = 0; i < bytes; i++) {
        value = (value << 8) | u8();
      }
      return value;
    }

    Object read() {
      int b = u8();
      if (b < 0x80) {
        return (long) b;
      }
      if (b >= 0xe0) {
        return (long) (byte) b;
      }
      if ((b & 0xf0) == 0x90) {
        return array(b & 0x0f);
      }
      if ((b & 0xf0) == 0x80) {
        return skipMap(b & 0x0f);
      }
      if ((b & 0xe0) == 0xa0) {
        return text(b & 0x1f);
      }
      return switch (b) {
        case 0xc0 -> null;
        case 0xc2 -> false;
        case 0xc3 -> true;
        case 0xcc -> unsigned(1);
        case 0xcd -> unsigned(2);
        case 0xce -> unsigned(4);
        case 0xcf, 0xd3 -> unsigned(8);
        case 0xd0 -> (long) (byte) unsigned(1);
        case 0xd1 -> (long) (short) unsigned(2);
        case 0xd2 -> (long) (int) unsigned(4);
        case 0xca -> (double) Float.intBitsToFloat((int) unsigned(4));
        case 0xcb -> Double.longBitsToDouble(unsigned(8));
        case 0xd9 -> text((int) unsigned(1));
        case 0xda -> text((int) unsigned(2));
        case 0xdb -> text((int) unsigned(4));
        case 0xdc -> array((int) unsigned(2));
        case 0xdd -> array((int) unsigned(4));
        case 0xde -> skipMap((int) unsigned(2));
        case 0xdf -> skipMap((int) unsigned(4));
        case 0xc4 -> skip((int) unsigned(1));
        case 0xc5 -> skip((int) unsigned(2));
        case 0xc6 -> skip((int) unsigned(4));
        default -> throw new IllegalArgumentException("a MessagePack type this server does not read: " + b);
      };
    }

    private List<Object> array(int length) {
      List<Object> items = new ArrayList<>(Math.min(length, 64));
      for (int i = 0; i < length; i++) {
        items.add(read());
      }
      return items;
    }

    private Object skipMap(int length) {
      for (int i = 0; i < length * 2; i++) {
        read();
      }
      return null;
    }

    private Object skip(int length) {
      at += length;
      return null;
    }

    private String text(int length) {
      if (at + length > data.length) {
        throw new IllegalArgumentException("the message ends early");
      }
      String value = new String(data, at, length, StandardCharsets.UTF_8);
      at += length;
      return value;
    }
  }
}
