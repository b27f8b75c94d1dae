//===- Json.cpp - a small JSON reader and writer ---------------------------===//

#include "support/Json.h"
#include "support/Error.h"

#include <cstdlib>

namespace mlc::rt {
namespace {

class Parser {
public:
  Parser(const std::string &text, const std::string &what, bool uniqueKeys)
      : s(text), what(what), uniqueKeys(uniqueKeys) {}

  Json document() {
    Json v = value();
    space();
    if (i != s.size())
      error("trailing characters");
    return v;
  }

private:
  [[noreturn]] void error(const std::string &msg) {
    fail(what + ": invalid JSON at byte " + std::to_string(i) + ": " + msg);
  }
  /// The four hex digits of a \\u escape at `at`.
  unsigned hex4(size_t at) {
    if (at + 4 > s.size())
      error("short \\u escape");
    unsigned v = 0;
    for (size_t k = at; k < at + 4; ++k) {
      char c = s[k];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0)
        error("\\u escape with a non-hex digit");
      v = v * 16 + unsigned(d);
    }
    return v;
  }
  void space() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t'))
      ++i;
  }
  bool take(char c) {
    space();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c))
      error(std::string("expected '") + c + "'");
  }
  Json value() {
    space();
    if (i >= s.size())
      error("unexpected end");
    struct Level {
      int &depth;
      ~Level() { --depth; }
    } level{++depth};
    if (depth > Json::kMaxDepth)
      error("nested deeper than " + std::to_string(Json::kMaxDepth) + " levels");
    Json v;
    char c = s[i];
    if (c == '{') {
      ++i;
      v.kind = Json::Object;
      if (take('}'))
        return v;
      do {
        space();
        std::string key = str();
        expect(':');
        if (uniqueKeys && v.object.count(key))
          error("duplicate key " + jsonQuote(key));
        v.object[key] = value();
      } while (take(','));
      expect('}');
    } else if (c == '[') {
      ++i;
      v.kind = Json::Array;
      if (take(']'))
        return v;
      do
        v.array.push_back(value());
      while (take(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::String;
      v.string = str();
    } else if (s.compare(i, 4, "true") == 0) {
      i += 4;
      v.kind = Json::Bool;
      v.boolean = true;
    } else if (s.compare(i, 5, "false") == 0) {
      i += 5;
      v.kind = Json::Bool;
    } else if (s.compare(i, 4, "null") == 0) {
      i += 4;
    } else {
      const char *begin = s.c_str() + i;
      char *end;
      v.kind = Json::Number;
      v.number = std::strtod(begin, &end);
      if (end == begin)
        error("unexpected character");
      i += end - begin;
    }
    return v;
  }
  std::string str() {
    if (i >= s.size() || s[i] != '"')
      error("expected a string");
    ++i;
    std::string out;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= s.size())
        error("unterminated escape");
      char e = s[i++];
      switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'u': {
        unsigned cp = hex4(i);
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= s.size() && s[i] == '\\' &&
            s[i + 1] == 'u') {
          unsigned lo = hex4(i + 2);
          if (lo < 0xDC00 || lo >= 0xE000)
            error("a high surrogate not followed by a low one");
          i += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp < 0x80) {
          out += char(cp);
        } else if (cp < 0x800) {
          out += char(0xC0 | (cp >> 6));
          out += char(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          out += char(0xE0 | (cp >> 12));
          out += char(0x80 | ((cp >> 6) & 0x3F));
          out += char(0x80 | (cp & 0x3F));
        } else {
          out += char(0xF0 | (cp >> 18));
          out += char(0x80 | ((cp >> 12) & 0x3F));
          out += char(0x80 | ((cp >> 6) & 0x3F));
          out += char(0x80 | (cp & 0x3F));
        }
        break;
      }
      default: out += e;
      }
    }
    if (i >= s.size())
      error("unterminated string");
    ++i;
    return out;
  }

  const std::string &s;
  std::string what;
  bool uniqueKeys;
  size_t i = 0;
  int depth = 0;
};

} // namespace

Json Json::parse(const std::string &text, const std::string &what, bool uniqueKeys) {
  return Parser(text, what, uniqueKeys).document();
}

std::string jsonQuote(const std::string &text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

} // namespace mlc::rt
