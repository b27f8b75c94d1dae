// The kernels of kernels.cpp that write a buffer from no input, pasted
// after prelude/cpu.h: a fill, a constant table, zero bytes, and the
// rotary embedding's cos / sin table. A plan kernel of these is one call:
// sizes are template arguments, values the call's.

#include <type_traits>

// p[i] = value for the N elements. Memory: N elements written.
template <typename T, int64_t N>
static void mlc_fill(T *p, T value) {
  for (int64_t i = 0; i < N; ++i)
    p[i] = value;
}

// p = data, the plan's N constants (a static table in the kernel).
// Memory: N elements read and written.
template <typename T, int64_t N>
static void mlc_constant(T *p, const T *data) {
  std::memcpy(p, data, N * sizeof(T));
}

// BYTES zero bytes at p (a copy's destination cleared before its nests).
template <int64_t BYTES>
static void mlc_zero(void *p) {
  std::memset(p, 0, BYTES);
}

// Rotary embeddings' cos (sin) table over POSITIONS x D, D = 2 HALF: row p,
// column j holds cos(p inv[i]) (MLC_ROTARY_SIN: sin, negated in the first
// half, as rotate_half pairs it), i = j mod HALF, inv the HALF inverse
// frequencies (in double). The angle is p inv[i] rounded to f32 where T is
// float, as an f32 model computes it; in double otherwise. Memory: the
// table written once.
enum { MLC_ROTARY_SIN = 1 };
template <typename T, int64_t POSITIONS, int64_t HALF, int F>
static void mlc_rotary_table(T *out, const double *inv) {
  const int64_t D = 2 * HALF;
  for (int64_t e = 0; e < POSITIONS * D; ++e) {
    const int64_t p = e / D, j = e % D, i = j % HALF;
    const double a = std::is_same<T, float>::value ? (double)((float)p * (float)inv[i])
                                                   : (double)p * inv[i];
    if (F & MLC_ROTARY_SIN) {
      const T s = (T)std::sin(a);
      out[e] = j < HALF ? -s : s;
    } else {
      out[e] = (T)std::cos(a);
    }
  }
}
