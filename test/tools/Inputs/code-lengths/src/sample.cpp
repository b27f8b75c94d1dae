// A sample for scripts/code_lengths.py (test/tools/code-lengths.test): its
// functions' lengths are known. Braces in comments do not count: { { {
#include <string>
#define OPEN_BRACE {

namespace sample {

/// Seven lines: over a limit of 6.
int seven(int x) {
  x += 1;
  x += 2;
  x += 3;
  x += 4;
  return x;
}

/// Six lines: at the limit.
int six(int x) {
  x += 1;
  x += 2;
  x += 3;
  return x;
}

/* Braces in literals are text: } } } */
std::string text() {
  return "}}}" + std::string(1, '}') + R"x(}
})x";
}

int
signature(int a,
          int b) {
  return a + b;
}

class Holder {
public:
  Holder() : a(1), b{2} {
    a += b;
  }
  /// A method with a lambda inside: one function of eight lines.
  int method() const {
    auto f = [](int v) {
      return v + 1;
    };
    int s = f(a);
    s += f(b);
    return s;
  }

private:
  int a, b;
};

struct Table {
  int x;
} table = {1};

} // namespace sample

#define TEST(suite, name) void suite##name()
TEST(Suite, LongCase) {
  int x = 0;
  x += 1;
  x += 2;
  x += 3;
  x += 4;
}
