// The C interface of xllm's CPU kernels (xllm/csrc/cpu/xllm_cpu.cpp), called from Python through ctypes.
// xllm.cpu_kernels derives every ctypes signature from the declarations below (pointers as void*, scalars by type), and
// refuses a library whose xk_abi_version() is not its ABI_VERSION: change a declaration, bump the version on both sides.
#ifndef XLLM_CPU_H
#define XLLM_CPU_H
#include <stdint.h>
#define XLLM_CPU_ABI_VERSION 11
#ifdef __cplusplus
extern "C" {
#endif
int xk_abi_version(void);
int xk_has_avx2(void);
int xk_isa(void);
int xk_amx(int enable);
int xk_bf16_dot(int enable);
int64_t xk_amx_min_rows(void);
int xk_max_threads(void);
void xk_linear(int kind, int64_t N, int64_t K, int64_t G, const void* w, const void* s, const void* m, const float* b, int a8, const float* x, int64_t T, float* y, int nt, int method);
int64_t xk_gemm_min_rows(void);
int64_t xk_qgemm_min_rows(void);
void xk_linear_multi(int nl, int a8, const int* kinds, const int64_t* Ns, int64_t K, const int64_t* Gs, void* const* ws, void* const* ss, void* const* ms, void* const* bs, const float* x, int64_t T, float* const* ys, int nt);
void xk_gemv_variant(const float* w, const float* x, float* y, int64_t N, int64_t K, int variant, int nt);
void xk_rmsnorm(const float* x, const float* w, float eps, int64_t rows, int64_t n, float* out);
void xk_rope(float* x, const float* cs, const float* sn, int64_t T, int64_t heads, int64_t d);
void xk_silu_mul(const float* g, const float* u, float* out, int64_t n);
void xk_attention(const float* q, const float* kc, const float* vc, int64_t H, int64_t kvh, int64_t len, int64_t d, float* out);
void xk_paged_attention(const float* q, const float* kp, const float* vp, const int64_t* slots, const int64_t* lens, int64_t B, int64_t Lmax, int64_t H, int64_t kvh, int64_t d, float* out, int nt);
void* xk_plan_new(int64_t L, int64_t H, int64_t nh, int64_t nkv, int64_t hd, int64_t I, int64_t V, double eps);
void xk_plan_free(void* p);
int xk_plan_add_linear(void* p, int kind, int64_t N, int64_t K, int64_t G, const void* w, const void* s, const void* m, const float* b, int a8);
void xk_plan_set_layer(void* p, int64_t l, const float* an, int q, int k, int v, int o, const float* fn, int g, int u, int d);
void xk_plan_set_final(void* p, const float* emb, const float* nw, int head);
void xk_plan_set_embed_q8(void* p, int kind, int64_t G, const int8_t* q, const void* s);
void xk_plan_set_tp(void* p, int64_t emb_start, int64_t emb_n, void* reduce);
void xk_plan_profile(void* p, int enable, double* out);
void xk_plan_set_lora(void* p, int lin, int64_t S, int64_t R, const float* A, const float* Bt);
void xk_plan_lora_rows(void* p, int64_t n, const int64_t* slots, int64_t S, const int* ranks, const float* scales);
void xk_lora(int64_t T, int64_t K, int64_t N, int64_t S, int64_t R, const float* A, const float* Bt, const int64_t* slots, const int* ranks, const float* scales, const float* x, float* y, int nt);
int xk_check_batch(int64_t N, const int64_t* ids, const int64_t* pos, const int64_t* wslot, int64_t nkeys, const int64_t* keys, const int64_t* koff, int64_t M, const int64_t* out_rows, int64_t Mh, const int64_t* hid_rows, int64_t vocab, int64_t rows, int64_t* npos);
void xk_plan_forward(void* p, int64_t N, const int64_t* ids, const int64_t* pos, const int64_t* wslot, void* const* kb, void* const* vb, int kv16, const int64_t* keys, const int64_t* koff, const float* cs, const float* sn, int64_t M, const int64_t* out_rows, float* logits, int64_t Mh, const int64_t* hid_rows, float* hidden, int nt);
#ifdef __cplusplus
}
#endif
#endif
