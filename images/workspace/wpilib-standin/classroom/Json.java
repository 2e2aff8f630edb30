package classroom;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The JSON of NetworkTables 4's control messages and of HALSim's messages: values written, small
 * documents read (nested at most 32 deep, so that no input can exhaust the reader's stack).
 */
final class Json {
  private static final int MAX_DEPTH = 32;
  private final String text;
  private int at;
  private int depth;

  private Json(String text) {
    this.text = text;
  }

  /** Appends `value` as a JSON string. */
  static void quote(StringBuilder out, String value) {
    out.append('"');
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }

  /**
   * Appends `value` as JSON: maps (string keys) as objects, lists as arrays, strings, booleans,
   * numbers (a number that is not finite as null), null.
   */
  static void write(StringBuilder out, Object value) {
    if (value instanceof Map<?, ?> map) {
      out.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> entry : map.entrySet()) {
        if (!first) {
          out.append(',');
        }
        first = false;
        quote(out, String.valueOf(entry.getKey()));
        out.append(':');
        write(out, entry.getValue());
      }
      out.append('}');
    } else if (value instanceof List<?> list) {
      out.append('[');
      for (int i = 0; i < list.size(); i++) {
        if (i > 0) {
          out.append(',');
        }
        write(out, list.get(i));
      }
      out.append(']');
    } else if (value instanceof String string) {
      quote(out, string);
    } else if (value instanceof Double number) {
      out.append(Double.isFinite(number) ? number.toString() : "null");
    } else if (value instanceof Number || value instanceof Boolean) {
      out.append(value);
    } else {
      out.append("null");
    }
  }

  /** Parses a JSON document: objects as maps, arrays as lists, numbers as Double; IllegalArgumentException when it is not JSON. */
  static Object parse(String text) {
    Json json = new Json(text);
    Object value = json.value();
    json.space();
    if (json.at != text.length()) {
      throw new IllegalArgumentException("text after the JSON value");
    }
    return value;
  }

  private void space() {
    while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
      at++;
    }
  }

  private char peek() {
    space();
    if (at >= text.length()) {
      throw new IllegalArgumentException("the JSON ends early");
    }
    return text.charAt(at);
  }

  private void expect(char c) {
    if (peek() != c) {
      throw new IllegalArgumentException("expected " + c);
    }
    at++;
  }

  private Object value() {
    char c = peek();
    if ((c == '{' || c == '[') && ++depth > MAX_DEPTH) {
      throw new IllegalArgumentException("JSON nested deeper than " + MAX_DEPTH);
    }
    if (c == '{') {
      at++;
      Map<String, Object> map = new LinkedHashMap<>();
      if (peek() == '}') {
        at++;
        depth--;
        return map;
      }
      while (true) {
        String key = string();
        expect(':');
        map.put(key, value());
        if (peek() == ',') {
          at++;
          continue;
        }
        expect('}');
        depth--;
        return map;
      }
    }
    if (c == '[') {
      at++;
      List<Object> list = new ArrayList<>();
      if (peek() == ']') {
        at++;
        depth--;
        return list;
      }
      while (true) {
        list.add(value());
        if (peek() == ',') {
          at++;
          continue;
        }
        expect(']');
        depth--;
        return list;
      }
    }
    if (c == '"') {
      return string();
    }
    for (String word : new String[] {"true", "false", "null"}) {
      if (text.startsWith(word, at)) {
        at += word.length();
        return word.equals("null") ? null : Boolean.valueOf(word);
      }
    }
    int start = at;
    while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) {
      at++;
    }
    try {
      return Double.valueOf(text.substring(start, at));
    } catch (NumberFormatException error) {
      throw new IllegalArgumentException("not a JSON value at " + start);
    }
  }

  private String string() {
    expect('"');
    StringBuilder out = new StringBuilder();
    while (at < text.length()) {
      char c = text.charAt(at++);
      if (c == '"') {
        return out.toString();
      }
      if (c != '\\') {
        out.append(c);
        continue;
      }
      if (at >= text.length()) {
        break;
      }
      char escaped = text.charAt(at++);
      switch (escaped) {
        case 'n' -> out.append('\n');
        case 'r' -> out.append('\r');
        case 't' -> out.append('\t');
        case 'b' -> out.append('\b');
        case 'f' -> out.append('\f');
        case 'u' -> {
          if (at + 4 > text.length()) {
            throw new IllegalArgumentException("a \\u escape ends early");
          }
          out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
          at += 4;
        }
        default -> out.append(escaped);
      }
    }
    throw new IllegalArgumentException("a JSON string ends early");
  }
}
