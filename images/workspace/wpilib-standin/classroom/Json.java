package classroom;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The JSON of NetworkTables 4's control messages: strings quoted for writing, small documents read. */
final class Json {
  private final String text;
  private int at;

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
    if (c == '{') {
      at++;
      Map<String, Object> map = new LinkedHashMap<>();
      if (peek() == '}') {
        at++;
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
        return map;
      }
    }
    if (c == '[') {
      at++;
      List<Object> list = new ArrayList<>();
      if (peek() == ']') {
        at++;
        return list;
      }
      while (true) {
        list.add(value());
        if (peek() == ',') {
          at++;
          continue;
        }
        expect(']');
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
