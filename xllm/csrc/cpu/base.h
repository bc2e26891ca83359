// ---------------------------------------------------------------- half to float, horizontal sums, padded loads

// std::vector storage on 64-byte boundaries (malloc gives 16): a 64-byte row segment is then one cache line, not parts of
// two; the threads' tasks of 16 output columns share no line; a tile row loads from one line.
template <class T> struct Aligned64 {
    using value_type = T;
    Aligned64() = default;
    template <class U> Aligned64(const Aligned64<U>&) {}
    T* allocate(size_t n) { void* p = aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64); if (!p) throw std::bad_alloc(); return (T*)p; }
    void deallocate(T* p, size_t) { free(p); }
    template <class U> bool operator==(const Aligned64<U>&) const { return true; }
    template <class U> bool operator!=(const Aligned64<U>&) const { return false; }
};
template <class T> using avec = std::vector<T, Aligned64<T>>;
using fvec = avec<float>;

static inline float h2f(uint16_t h) {          // IEEE half -> float, portable
#if XK_AVX2
    return _cvtsh_ss(h);
#else
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    if (e == 0) {
        if (m == 0) bits = s;
        else { int k = -1; do { k++; m <<= 1; } while (!(m & 0x400)); bits = s | ((uint32_t)(127 - 15 - k) << 23) | ((m & 0x3ff) << 13); }
    } else if (e == 31) bits = s | 0x7f800000 | (m << 13);
    else bits = s | ((e + 112) << 23) | (m << 13);
    float f; std::memcpy(&f, &bits, 4); return f;
#endif
}

// float -> IEEE half, rounded to nearest even (as F16C's vcvtps2ph and torch's .to(float16)): overflow to infinity, NaN kept
static inline uint16_t f2h(float f) {
#if XK_AVX2
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
    uint32_t u; std::memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000); u &= 0x7fffffffu;
    if (u >= 0x47800000u) return sign | (u > 0x7f800000u ? 0x7e00 : 0x7c00);          // >= 65536, infinity or NaN
    if (u < 0x38800000u) {                   // below 2^-14: a subnormal half. Adding 0.5 makes the float unit 2^-24, so the
        float a; std::memcpy(&a, &u, 4); a += 0.5f;     // FPU's own rounding (to nearest even) rounds to the half's last bit
        uint32_t b; std::memcpy(&b, &a, 4); return sign | (uint16_t)(b - 0x3f000000u);
    }
    u += ((uint32_t)(15 - 127) << 23) + 0xfff + ((u >> 13) & 1);   // rebias, then round the 13 dropped bits to nearest even
    return sign | (uint16_t)(u >> 13);                              // a carry out of the mantissa lands in the exponent (65520+: inf)
#endif
}

#if XK_AVX2
static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
// 8 float16 (or float32) values from h as floats; fewer than 8 left: zero-padded
static inline __m256 load8h(const uint16_t* h, int64_t left) {
    if (left >= 8) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)h));
    uint16_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0}; for (int64_t i = 0; i < left; i++) t[i] = h[i];
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)t));
}
static inline __m256 load8f(const float* f, int64_t left) {
    if (left >= 8) return _mm256_loadu_ps(f);
    float t[8] = {0, 0, 0, 0, 0, 0, 0, 0}; for (int64_t i = 0; i < left; i++) t[i] = f[i];
    return _mm256_loadu_ps(t);
}
#endif
