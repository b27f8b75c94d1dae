// The kernels of kernels.cu that write a buffer from no input, pasted
// after prelude/cuda.cuh: a fill, a constant table, zero bytes, and the
// rotary embedding's cos / sin table. A plan kernel of these is one call:
// sizes are template arguments, values the call's. Each is a grid-stride
// loop, a thread per element.

// p[i] = value for the N elements. Memory: N elements written.
template <typename T, int64_t N>
__device__ void mlc_fill(T *p, T value) {
  for (int64_t i = MLC_TID; i < N; i += MLC_STRIDE)
    p[i] = value;
}

// p = data, the plan's N constants (a static table in the kernel).
// Memory: N elements read and written.
template <typename T, int64_t N>
__device__ void mlc_constant(T *p, const T *data) {
  for (int64_t i = MLC_TID; i < N; i += MLC_STRIDE)
    p[i] = data[i];
}

// BYTES zero bytes at p (a copy's destination cleared before its nests),
// a thread per byte.
template <int64_t BYTES>
__device__ void mlc_zero(void *p) {
  for (int64_t i = MLC_TID; i < BYTES; i += MLC_STRIDE)
    ((char *)p)[i] = 0;
}

// Whether a rotary table's angle is rounded to f32 (T is float).
template <typename T> struct mlc_f32_angle { enum { value = 0 }; };
template <> struct mlc_f32_angle<float> { enum { value = 1 }; };

// Rotary embeddings' cos (sin) table over POSITIONS x D, D = 2 HALF: row p,
// column j holds cos(p inv[i]) (MLC_ROTARY_SIN: sin, negated in the first
// half, as rotate_half pairs it), i = j mod HALF, inv the HALF inverse
// frequencies (in double). The angle is p inv[i] rounded to f32 where T is
// float, as an f32 model computes it; in double otherwise. Memory: the
// table written once.
enum { MLC_ROTARY_SIN = 1 };
template <typename T, int64_t POSITIONS, int64_t HALF, int F>
__device__ void mlc_rotary_table(T *out, const double *inv) {
  const int64_t D = 2 * HALF;
  for (int64_t e = MLC_TID; e < POSITIONS * D; e += MLC_STRIDE) {
    const int64_t p = e / D, j = e % D, i = j % HALF;
    const double a = mlc_f32_angle<T>::value ? (double)((float)p * (float)inv[i])
                                             : (double)p * inv[i];
    if (F & MLC_ROTARY_SIN) {
      const T s = (T)sin(a);
      out[e] = j < HALF ? -s : s;
    } else {
      out[e] = (T)cos(a);
    }
  }
}
