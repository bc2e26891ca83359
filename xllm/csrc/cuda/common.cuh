// xllm CUDA kernels: what both generations share. No system #include: xllm.core.read_source inlines this file into each
// .cu that includes it, and the one text compiles with nvcc and with NVRTC alike (and with g++ under xllm.cuda_emu).
// Which kernels one compile instantiates (xllm.cuda_kernels.module_source): XLLM_PART 0, all of them; 1, all but
// paged_attention_v2's; 2, only paged_attention_v2's for head dim XLLM_PA2_D and group XLLM_PA2_GM (float and int8 caches).
#ifndef XLLM_PART
#define XLLM_PART 0
#endif
struct half_t { unsigned short bits; };   // IEEE fp16, carried as bits
struct bf16_t { unsigned short bits; };   // bfloat16, carried as bits

__device__ __forceinline__ float to_f(float x) { return x; }
#ifdef XLLM_EMULATOR   // xllm.cuda_emu compiles this source as C++ for the CPU: no PTX there
__device__ __forceinline__ float to_f(half_t x) { return emu::h2f(x.bits); }
#else
__device__ __forceinline__ float to_f(half_t x) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits)); return f; }
#endif
__device__ __forceinline__ float to_f(bf16_t x) { return __uint_as_float(((unsigned int)x.bits) << 16); }

template <typename T> __device__ __forceinline__ T from_f(float f);
template <> __device__ __forceinline__ float from_f<float>(float f) { return f; }
template <> __device__ __forceinline__ half_t from_f<half_t>(float f) {
#ifdef XLLM_EMULATOR
    half_t h; h.bits = emu::f2h(f); return h;
#else
    half_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f)); return h;   // round to nearest even
#endif
}
template <> __device__ __forceinline__ bf16_t from_f<bf16_t>(float f) {
    unsigned int u = __float_as_uint(f);
    bf16_t b;
    if ((u & 0x7fffffffu) > 0x7f800000u) { b.bits = 0x7fc0; return b; }           // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                              // round to nearest even
    b.bits = (unsigned short)(u >> 16);
    return b;
}

#define NEG_INF (__int_as_float(0xff800000))

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block (blockDim.x a multiple of 32); every thread gets the result.
__device__ float block_sum(float v) {
    __shared__ float part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = lane < nw ? part[lane] : 0.f;
    return warp_sum(v);
}

// Online-softmax state (m = running max, d = sum of exp(x - m)); merge (m2, d2) into (m, d).
__device__ __forceinline__ void md_merge(float& m, float& d, float m2, float d2) {
    const float mn = fmaxf(m, m2);
    if (mn == NEG_INF) return;                  // both empty
    d = d * expf(m - mn) + d2 * expf(m2 - mn);  // exp(-inf) = 0 drops an empty side
    m = mn;
}
