
// splitmix64's finalizer: a bijection on 64-bit words.
MLC_FN uint64_t mlc_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Dropout's key for (seed, step); element i draws mlc_uniform(key, i).
MLC_FN uint64_t mlc_key(uint64_t seed, uint64_t step) {
  return mlc_mix(step + 0x9E3779B97F4A7C15ull * (mlc_mix(seed) | 1));
}

// Uniform in [0, 1) from 53 bits of mix(i + key).
MLC_FN double mlc_uniform(uint64_t key, uint64_t i) {
  return (double)(mlc_mix(i + key) >> 11) * 0x1.0p-53;
}

// bf16 storage (--dtype bf16: the matrix products' operands and results):
// the upper half of an f32; from f32 by rounding to nearest even (a NaN
// stays a NaN), to f32 exactly.
struct mlc_bf16 {
  uint16_t bits;
  mlc_bf16() = default;
  MLC_MEMBER mlc_bf16(float f) {
    const uint32_t u = mlc_float_bits(f);
    bits = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u)
                                           : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  MLC_MEMBER operator float() const { return mlc_bits_float((uint32_t)bits << 16); }
};
