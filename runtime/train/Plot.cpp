//===- Plot.cpp - training curves as a PNG ----------------------------------===//

#include "runtime/train/Plot.h"
#include "runtime/core/Error.h"
#include "runtime/core/Json.h"
#include "runtime/core/TensorIO.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <fstream>
#include <vector>
#ifdef MLC_HAVE_ZLIB
#include <zlib.h>
#endif

namespace mlc::rt {

namespace {

struct Rgb {
  uint8_t r, g, b;
};
constexpr Rgb kWhite{255, 255, 255}, kAxis{40, 40, 40}, kGrid{225, 225, 225},
    kTrain{31, 119, 180}, kValidation{255, 127, 14}, kSpeed{44, 160, 44};

class Image {
public:
  Image(int w, int h) : w(w), h(h), px(size_t(w) * h, kWhite) {}
  void set(int x, int y, Rgb c) {
    if (x >= 0 && y >= 0 && x < w && y < h)
      px[size_t(y) * w + x] = c;
  }
  /// A line of thickness 2 (Bresenham, doubled).
  void line(int x0, int y0, int x1, int y1, Rgb c) {
    int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1,
        sy = y0 < y1 ? 1 : -1, err = dx + dy;
    while (true) {
      set(x0, y0, c);
      set(x0 + 1, y0, c);
      set(x0, y0 + 1, c);
      if (x0 == x1 && y0 == y1)
        break;
      int e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  }
  void rect(int x0, int y0, int x1, int y1, Rgb c) {
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x)
        set(x, y, c);
  }
  /// Digits, '.', '-', 'e', 'k' and 'M' in a 5x7 font, scaled by 2.
  void text(int x, int y, const std::string &s, Rgb c) {
    static const std::array<std::pair<char, std::array<uint8_t, 7>>, 15> font = {{
        {'0', {14, 17, 19, 21, 25, 17, 14}}, {'1', {4, 12, 4, 4, 4, 4, 14}},
        {'2', {14, 17, 1, 2, 4, 8, 31}},     {'3', {30, 1, 1, 14, 1, 1, 30}},
        {'4', {2, 6, 10, 18, 31, 2, 2}},     {'5', {31, 16, 30, 1, 1, 17, 14}},
        {'6', {6, 8, 16, 30, 17, 17, 14}},   {'7', {31, 1, 2, 4, 8, 8, 8}},
        {'8', {14, 17, 17, 14, 17, 17, 14}}, {'9', {14, 17, 17, 15, 1, 2, 12}},
        {'.', {0, 0, 0, 0, 0, 12, 12}},      {'-', {0, 0, 0, 31, 0, 0, 0}},
        {'e', {0, 0, 14, 17, 31, 16, 14}},   {'k', {16, 16, 18, 20, 24, 20, 18}},
        {'M', {17, 27, 21, 21, 17, 17, 17}},
    }};
    for (char ch : s) {
      for (auto &[g, rows] : font)
        if (g == ch)
          for (int r = 0; r < 7; ++r)
            for (int b = 0; b < 5; ++b)
              if (rows[r] & (16 >> b))
                rect(x + 2 * b, y + 2 * r, x + 2 * b + 1, y + 2 * r + 1, c);
      x += 12;
    }
  }

  /// PNG: 8-bit RGB, no filter, the image data in stored deflate blocks.
  std::string png() const {
    std::string raw;
    raw.reserve(size_t(h) * (1 + 3 * w));
    for (int y = 0; y < h; ++y) {
      raw += char(0); // filter: none
      for (int x = 0; x < w; ++x) {
        const Rgb &c = px[size_t(y) * w + x];
        raw += char(c.r);
        raw += char(c.g);
        raw += char(c.b);
      }
    }
#ifdef MLC_HAVE_ZLIB
    uLongf size = compressBound(uLong(raw.size()));
    std::string z(size, '\0');
    if (compress2(reinterpret_cast<Bytef *>(&z[0]), &size,
                  reinterpret_cast<const Bytef *>(raw.data()), uLong(raw.size()), 9) != Z_OK)
      fail("cannot compress the plot");
    z.resize(size);
#else
    // Without zlib: stored (uncompressed) deflate blocks, valid but large.
    std::string z = "\x78\x01"; // zlib header: deflate, no dictionary
    for (size_t at = 0; at < raw.size() || at == 0; at += 65535) {
      size_t n = std::min<size_t>(65535, raw.size() - at);
      bool last = at + n >= raw.size();
      z += char(last ? 1 : 0);
      z += char(n & 0xFF);
      z += char(n >> 8);
      z += char(~n & 0xFF);
      z += char((~n >> 8) & 0xFF);
      z.append(raw, at, n);
      if (last)
        break;
    }
    uint32_t a = 1, b = 0;
    for (unsigned char c : raw) {
      a = (a + c) % 65521;
      b = (b + a) % 65521;
    }
    append32(z, (b << 16) | a);
#endif
    std::string out = "\x89PNG\r\n\x1a\n";
    std::string ihdr;
    append32(ihdr, uint32_t(w));
    append32(ihdr, uint32_t(h));
    ihdr += std::string("\x08\x02\x00\x00\x00", 5); // 8 bits, RGB, deflate, no filter, no interlace
    chunk(out, "IHDR", ihdr);
    chunk(out, "IDAT", z);
    chunk(out, "IEND", "");
    return out;
  }

private:
  static void append32(std::string &s, uint32_t v) {
    for (int i = 3; i >= 0; --i)
      s += char((v >> (8 * i)) & 0xFF);
  }
  static uint32_t crc32(const std::string &s) {
    static std::array<uint32_t, 256> table = [] {
      std::array<uint32_t, 256> t{};
      for (uint32_t n = 0; n < 256; ++n) {
        uint32_t c = n;
        for (int k = 0; k < 8; ++k)
          c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[n] = c;
      }
      return t;
    }();
    uint32_t c = 0xFFFFFFFFu;
    for (unsigned char ch : s)
      c = table[(c ^ ch) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
  }
  static void chunk(std::string &out, const char *type, const std::string &data) {
    append32(out, uint32_t(data.size()));
    std::string body = std::string(type, 4) + data;
    out += body;
    append32(out, crc32(body));
  }

  int w, h;
  std::vector<Rgb> px;
};

std::string number(double x) {
  char buf[32];
  if (std::fabs(x) >= 1e6)
    std::snprintf(buf, sizeof buf, "%.1fM", x / 1e6);
  else if (std::fabs(x) >= 1e4)
    std::snprintf(buf, sizeof buf, "%.0fk", x / 1e3);
  else if (std::fabs(x) >= 100 || x == std::floor(x))
    std::snprintf(buf, sizeof buf, "%.0f", x);
  else
    std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

using Series = std::vector<std::pair<double, double>>;

/// One panel: the frame, grid lines, the ranges at the axes' ends, and the
/// series in their colours.
void panel(Image &img, int x0, int y0, int x1, int y1, double xmin, double xmax,
           const std::vector<std::pair<const Series *, Rgb>> &series) {
  double ymin = INFINITY, ymax = -INFINITY;
  for (auto &[s, _] : series)
    for (auto &[x, y] : *s) {
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  if (!std::isfinite(ymin))
    ymin = 0, ymax = 1;
  if (ymax - ymin < 1e-12) {
    ymin -= 0.5;
    ymax += 0.5;
  }
  double pad = 0.05 * (ymax - ymin);
  ymin -= pad;
  ymax += pad;
  if (xmax - xmin < 1e-12)
    xmax = xmin + 1;
  for (int k = 1; k < 4; ++k) {
    int y = y0 + (y1 - y0) * k / 4;
    img.rect(x0, y, x1, y, kGrid);
  }
  img.line(x0, y0, x0, y1, kAxis);
  img.line(x0, y1, x1, y1, kAxis);
  img.text(8, y0, number(ymax), kAxis);
  img.text(8, y1 - 14, number(ymin), kAxis);
  img.text(x0, y1 + 6, number(xmin), kAxis);
  std::string right = number(xmax);
  img.text(x1 - 12 * int(right.size()), y1 + 6, right, kAxis);
  auto X = [&](double x) { return x0 + int(std::lround((x - xmin) / (xmax - xmin) * (x1 - x0))); };
  auto Y = [&](double y) { return y1 - int(std::lround((y - ymin) / (ymax - ymin) * (y1 - y0))); };
  for (auto &[s, colour] : series) {
    for (size_t i = 0; i < s->size(); ++i) {
      int x = X((*s)[i].first), y = Y((*s)[i].second);
      if (i > 0)
        img.line(X((*s)[i - 1].first), Y((*s)[i - 1].second), x, y, colour);
      if (s->size() < 40)
        img.rect(x - 2, y - 2, x + 2, y + 2, colour);
    }
  }
}

} // namespace

std::string plotLog(const std::string &logPath, const std::string &pngPath, int width,
                    int height) {
  if (width < 200 || height < 200 || width > 8000 || height > 8000)
    fail("plot size must be between 200 and 8000 pixels");
  std::ifstream in(logPath);
  if (!in)
    fail(logPath + ": cannot open");
  Series train, validation, speed;
  std::string line;
  int64_t lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    Json row = Json::parse(line, logPath + ":" + std::to_string(lineNo));
    const Json *step = row.find("step");
    if (!step || step->kind != Json::Number)
      fail(logPath + ":" + std::to_string(lineNo) + ": a log line without a step");
    auto take = [&](const char *key, Series &s) {
      if (const Json *v = row.find(key); v && v->kind == Json::Number && std::isfinite(v->number))
        s.push_back({step->number, v->number});
    };
    if (!row.find("skipped")) {
      take("loss", train);
      take("tokens_per_s", speed);
    }
    take("val_loss", validation);
  }
  if (train.empty())
    fail(logPath + ": no training steps to plot (is it an mlc --log-json file?)");
  double xmin = train.front().first, xmax = train.back().first;
  for (auto *s : {&train, &validation, &speed})
    for (auto &[x, _] : *s) {
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
    }
  Image img(width, height);
  int left = 110, right = width - 20, split = height * 2 / 3;
  panel(img, left, 20, right, split - 40, xmin, xmax, {{&train, kTrain}, {&validation, kValidation}});
  panel(img, left, split, right, height - 40, xmin, xmax, {{&speed, kSpeed}});
  writeFileAtomically(pngPath, img.png());
  char summary[256];
  std::snprintf(summary, sizeof summary,
                "%s: %zu training steps (loss %.4g -> %.4g), %zu validation points; wrote %s "
                "(%dx%d)",
                logPath.c_str(), train.size(), train.front().second, train.back().second,
                validation.size(), pngPath.c_str(), width, height);
  return summary;
}

} // namespace mlc::rt
