//===- Plot.cpp - training curves as a PNG ----------------------------------===//

#include "runtime/train/Plot.h"
#include "runtime/core/Hash.h"
#include "runtime/train/PlotFont.h"
#include "support/Error.h"
#include "support/Json.h"
#include "support/TensorIO.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
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
  void frame(int x0, int y0, int x1, int y1, Rgb c) {
    rect(x0, y0, x1, y0, c);
    rect(x0, y1, x1, y1, c);
    rect(x0, y0, x0, y1, c);
    rect(x1, y0, x1, y1, c);
  }
  void rect(int x0, int y0, int x1, int y1, Rgb c) {
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x)
        set(x, y, c);
  }
  /// `s` in the plot font, scaled by 2, its top-left corner at (x, y);
  /// `upward` turns it a quarter left, to read from (x, y) upwards.
  void text(int x, int y, const std::string &s, Rgb c, bool upward = false) {
    for (char ch : s) {
      const plotfont::Glyph &g = plotfont::glyph(ch);
      for (int r = 0; r < plotfont::kRows; ++r)
        for (int b = 0; b < plotfont::kWidth; ++b)
          if (g[r] & (16 >> b)) {
            int px = upward ? x + 2 * r : x + 2 * b, py = upward ? y - 2 * b : y + 2 * r;
            rect(px, py, px + 1, py + 1, c);
          }
      if (upward)
        y -= kAdvance;
      else
        x += kAdvance;
    }
  }
  static constexpr int kAdvance = 12, kHeight = 14; // a character's pixels at scale 2
  static int textWidth(const std::string &s) { return kAdvance * int(s.size()) - 2; }

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
  static void chunk(std::string &out, const char *type, const std::string &data) {
    append32(out, uint32_t(data.size()));
    std::string body = std::string(type, 4) + data;
    out += body;
    append32(out, crc32<kCrc32>(body));
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

struct Curve {
  const Series *points;
  Rgb colour;
  const char *name; // in the legend
};

/// The box in the panel's upper right corner that names each curve with
/// points, over a short line in its colour.
void legend(Image &img, int x1, int y0, const std::vector<Curve> &curves) {
  std::vector<const Curve *> shown;
  size_t longest = 0;
  for (const Curve &c : curves)
    if (!c.points->empty()) {
      shown.push_back(&c);
      longest = std::max(longest, std::string(c.name).size());
    }
  if (shown.empty())
    return;
  int line = Image::kHeight + 8, w = 44 + Image::textWidth(std::string(longest, 'x')) + 8;
  int bx0 = x1 - 8 - w, by0 = y0 + 8, by1 = by0 + 6 + line * int(shown.size());
  img.rect(bx0, by0, x1 - 8, by1, kWhite);
  img.frame(bx0, by0, x1 - 8, by1, kGrid);
  for (size_t i = 0; i < shown.size(); ++i) {
    int y = by0 + 8 + line * int(i);
    img.rect(bx0 + 8, y + 6, bx0 + 34, y + 8, shown[i]->colour);
    img.text(bx0 + 44, y, shown[i]->name, kAxis);
  }
}

/// One panel: the frame, grid lines, the ranges at the axes' ends, the axis
/// labels, the curves in their colours and, for more than one, a legend.
void panel(Image &img, int x0, int y0, int x1, int y1, double xmin, double xmax,
           const std::string &yLabel, const std::vector<Curve> &curves) {
  double ymin = INFINITY, ymax = -INFINITY;
  for (const Curve &c : curves)
    for (auto &[x, y] : *c.points) {
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
  ymin = ymin >= 0 ? std::max(0.0, ymin - pad) : ymin - pad; // no negative tokens/s
  ymax += pad;
  if (xmax - xmin < 1e-12)
    xmax = xmin + 1;
  for (int k = 1; k < 4; ++k) {
    int y = y0 + (y1 - y0) * k / 4;
    img.rect(x0, y, x1, y, kGrid);
  }
  img.line(x0, y0, x0, y1, kAxis);
  img.line(x0, y1, x1, y1, kAxis);
  img.text(x0 - 8 - Image::textWidth(number(ymax)), y0, number(ymax), kAxis);
  img.text(x0 - 8 - Image::textWidth(number(ymin)), y1 - Image::kHeight, number(ymin), kAxis);
  img.text(x0, y1 + 6, number(xmin), kAxis);
  std::string right = number(xmax);
  img.text(x1 - Image::textWidth(right), y1 + 6, right, kAxis);
  img.text((x0 + x1 - Image::textWidth("step")) / 2, y1 + 6, "step", kAxis);
  img.text(6, (y0 + y1 + Image::textWidth(yLabel)) / 2, yLabel, kAxis, /*upward=*/true);
  auto X = [&](double x) { return x0 + int(std::lround((x - xmin) / (xmax - xmin) * (x1 - x0))); };
  auto Y = [&](double y) { return y1 - int(std::lround((y - ymin) / (ymax - ymin) * (y1 - y0))); };
  for (const Curve &c : curves) {
    const Series &s = *c.points;
    for (size_t i = 0; i < s.size(); ++i) {
      int x = X(s[i].first), y = Y(s[i].second);
      if (i > 0)
        img.line(X(s[i - 1].first), Y(s[i - 1].second), x, y, c.colour);
      if (s.size() < 40)
        img.rect(x - 2, y - 2, x + 2, y + 2, c.colour);
    }
  }
  if (curves.size() > 1) // one curve is named by the axis label
    legend(img, x1, y0, curves);
}

struct Log {
  Series train, validation, speed;
  bool tornLastLine = false;
};

/// The series of a `--log-json` file. A last line without its newline that
/// does not parse is a line the trainer is still writing: it is left out.
Log readLog(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail(path + ": is a directory, not a --log-json file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(path + ": cannot open");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Log log;
  int64_t lineNo = 0;
  for (size_t at = 0; at < all.size();) {
    size_t end = std::min(all.find('\n', at), all.size());
    std::string line = all.substr(at, end - at), where = path + ":" + std::to_string(++lineNo);
    bool last = end == all.size();
    at = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    Json row;
    try {
      row = Json::parse(line, where);
    } catch (const Error &) {
      if (!last)
        throw;
      log.tornLastLine = true;
      break;
    }
    const Json *step = row.find("step");
    if (!step || step->kind != Json::Number || !std::isfinite(step->number))
      fail(where + ": a log line without a step");
    auto take = [&](const char *key, Series &s) {
      const Json *v = row.find(key);
      if (v && v->kind != Json::Number && v->kind != Json::Null)
        fail(where + ": \"" + key + "\" is not a number");
      if (v && v->kind == Json::Number && std::isfinite(v->number))
        s.push_back({step->number, v->number}); // null: a step that was not finite
    };
    if (!row.find("skipped")) {
      take("loss", log.train);
      take("tokens_per_s", log.speed);
    }
    take("val_loss", log.validation);
  }
  return log;
}

} // namespace

std::string plotLog(const std::string &logPath, const std::string &pngPath, int width,
                    int height) {
  if (width < 200 || height < 200 || width > 8000 || height > 8000)
    fail("--width and --height must be between 200 and 8000 pixels, got " +
         std::to_string(width) + "x" + std::to_string(height));
  checkWritableFile(pngPath, "-o");
  refuseOutputsOverInputs({{"the log", logPath}}, {{"-o", pngPath}});
  Log log = readLog(logPath);
  if (log.train.empty())
    fail(logPath + ": no training steps to plot (is it an mlc --log-json file?)");
  double xmin = log.train.front().first, xmax = log.train.back().first;
  for (auto *s : {&log.train, &log.validation, &log.speed})
    for (auto &[x, _] : *s) {
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
    }
  Image img(width, height);
  std::string name = std::filesystem::path(logPath).filename().string();
  std::string title = "Training loss and throughput: " + name;
  if (Image::textWidth(title) > width - 20)
    title = "Training: " + name;
  img.text(std::max(10, (width - Image::textWidth(title)) / 2), 12, title, kAxis);
  int left = 110, right = width - 20, split = height * 2 / 3;
  panel(img, left, 44, right, split - 40, xmin, xmax, "loss",
        {{&log.train, kTrain, "training loss"}, {&log.validation, kValidation, "validation loss"}});
  panel(img, left, split, right, height - 40, xmin, xmax, "tokens/s",
        {{&log.speed, kSpeed, "tokens/s"}});
  writeFileAtomically(pngPath, img.png());
  char summary[512];
  std::snprintf(summary, sizeof summary,
                "%s: %zu training steps (loss %.4g -> %.4g), %zu validation points%s; wrote %s "
                "(%dx%d)",
                logPath.c_str(), log.train.size(), log.train.front().second,
                log.train.back().second, log.validation.size(),
                log.tornLastLine ? " (its last line, unfinished, left out)" : "", pngPath.c_str(),
                width, height);
  return summary;
}

} // namespace mlc::rt
