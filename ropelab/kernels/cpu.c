/* ropelab's fused CPU kernel: out = x*cos + rot(x)*sin in one pass (09_performance).
 *
 * Compiled on first use by ropelab/kernels/cpu.py and called through ctypes;
 * when no C compiler is found ropelab falls back to its torch path, so nothing
 * here is required. One call rotates every row (the last axis, d channels) of
 * a problem of up to MAXD leading axes, split between threads with OpenMP when
 * the compiler has it.
 *
 * Each output is the plain formula term by term, with no fused multiply-add
 * (the build passes -ffp-contract=off and -fno-tree-vectorize, and the vector
 * loops, written out with AVX2 or AVX-512 intrinsics, use separate
 * multiplications and additions):
 *   half_split  out[j]   = x[j]*c[j]     - x[j+h]*s[j]
 *               out[j+h] = x[j+h]*c[j+h] + x[j]*s[j+h]
 *   interleaved out[2j]  = x[2j]*c[2j]   - x[2j+1]*s[2j]
 *               out[2j+1]= x[2j+1]*c[2j+1] + x[2j]*s[2j+1]
 * so float32 and float64 results are bit-identical to torch's
 * x*cos + rotate_half(x)*sin. bfloat16 and float16 inputs and tables are
 * widened to float32 (exactly) as they are loaded, put through the same
 * float32 formula, and each result rounded once to the 16-bit type (to
 * nearest even): one 16-bit rounding per output where the plain formula in
 * bfloat16 makes three. Where the CPU has AVX512-BF16, one instruction rounds
 * 32 bfloat16 results, to the same bits as the integer rounding it replaces
 * (subnormal results excepted, which take the integer rounding).
 *
 * Memory traffic is what this kernel is about (RoPE does 3 flops per 2s bytes
 * moved), so the loop order follows memory, not the caller's axis order:
 *   1. The axes are visited in the order of x's strides, largest outermost:
 *      a (batch, seq, heads, dim) tensor passed as a transposed
 *      (batch, heads, seq, dim) view is read in storage order.
 *   2. When an axis the tables broadcast over (heads) is outside the axis
 *      they vary along (positions), the positions are cut into blocks of
 *      cos and sin rows that fill half the L2 cache, and every head of a
 *      block is rotated before the next block: the table rows are read from
 *      memory once, and from cache for the other heads, instead of once per
 *      head. Big blocks also keep each head's stretch of x long, which the
 *      hardware prefetcher needs. Within a block two heads advance side by
 *      side, position by position, and share each table row (one head at a
 *      time measured slower, in bfloat16 most). An out of at most SMALL_OUT
 *      bytes stays in the caches between calls; there blocks of SMALL_BLOCK
 *      positions keep their table rows in L1, and 16-bit heads go one at a
 *      time (both measured faster at that size).
 *   3. Threads take contiguous ranges of positions (with blocks) or of rows.
 *   4. An output too big to stay cached is written with non-temporal stores,
 *      which skip reading its cache lines before overwriting them.
 */
#define _GNU_SOURCE /* sysconf(_SC_LEVEL2_CACHE_SIZE) */
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#if defined(__AVX__) || defined(__AVX2__) || defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#define MAXD 4
#define TABLE_BLOCK (64 * 1024)        /* bytes of cos and sin per block of positions, at least */
#define TABLE_BLOCK_MAX (1024 * 1024) /* and at most */
#ifndef GROUP
#define GROUP 2 /* heads rotated side by side within a block of positions */
#endif
#define STREAM_FROM (16 << 20)        /* bytes of out from which it is written past the caches */
/* When out is at most SMALL_OUT bytes, x and out stay in the caches from one call to the next, and
 * long streams of x, which blocks of half the L2 cache keep for the prefetcher, matter less than
 * table rows that stay in L1: blocks of SMALL_BLOCK positions, and in 16-bit dtypes one head at a
 * time (measured: bfloat16 (1, 32, 256, 128) about 10-20% faster, float32 about 7%). */
#define SMALL_OUT (4 << 20)
#define SMALL_BLOCK 16

enum { F32 = 0, F64 = 1, BF16 = 2, F16 = 3 };

/* Scalar conversions: bfloat16 is the top half of a float32. */
static inline float bf16_to_f32(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

/* Row functions are inlined into the loops that call them, where the compiler can see h (64 for
 * 128-channel heads: see rotate_runs) and drop the remainder loops that have nothing to do. */
#if defined(__GNUC__)
#define ROW_INLINE static inline __attribute__((always_inline))
#else
#define ROW_INLINE static inline
#endif

#define ID(v) (v)
#define F16_LOAD(v) ((float)(v))
#define F16_STORE(v) ((_Float16)(v))

/* The formula on channels [j0, h) (half-split pairs) or pairs [j0, h) (interleaved), one at a time:
 * the whole row without vector units, and the tail after the vector loop. */
#define ROW_SCALAR(NAME, T, W, LOAD, STORE)                                                        \
    ROW_INLINE void NAME(const T *restrict x, T *restrict o, const T *restrict c,                  \
                         const T *restrict s, int64_t h, int interleaved, int64_t j0) {            \
        if (interleaved) {                                                                         \
            for (int64_t j = j0; j < h; ++j) {                                                     \
                W a = LOAD(x[2 * j]), b = LOAD(x[2 * j + 1]);                                      \
                W p = a * LOAD(c[2 * j]), q = b * LOAD(s[2 * j]);                                  \
                W u = b * LOAD(c[2 * j + 1]), v = a * LOAD(s[2 * j + 1]);                          \
                o[2 * j] = STORE(p - q);                                                           \
                o[2 * j + 1] = STORE(u + v);                                                       \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t j = j0; j < h; ++j) {                                                     \
                W a = LOAD(x[j]), b = LOAD(x[j + h]);                                              \
                W p = a * LOAD(c[j]), q = b * LOAD(s[j]);                                          \
                W u = b * LOAD(c[j + h]), v = a * LOAD(s[j + h]);                                  \
                o[j] = STORE(p - q);                                                               \
                o[j + h] = STORE(u + v);                                                           \
            }                                                                                      \
        }                                                                                          \
    }

ROW_SCALAR(scalar_f32, float, float, ID, ID)
ROW_SCALAR(scalar_f64, double, double, ID, ID)
ROW_SCALAR(scalar_bf16, uint16_t, float, bf16_to_f32, f32_to_bf16)
#ifdef ROPELAB_HAVE_FLOAT16
ROW_SCALAR(scalar_f16, _Float16, float, F16_LOAD, F16_STORE)
#endif

/* The vector rows. Each takes the row from channel (half-split) or pair (interleaved) j0 on,
 * does what whole vectors it can, and leaves the rest to the next narrower row (AVX-512, then
 * AVX2, then scalar). Each lane computes the scalar formula for one channel: separate
 * multiplications, then a subtraction in the first channel of a pair and an addition in the
 * second (addsub in AVX: even lanes subtract, odd lanes add; a masked subtraction in AVX-512).
 * The _stream variants write out with non-temporal stores (addresses aligned: see stream_rows). */
#define ROW_ARGS(T) const T *restrict x, T *restrict o, const T *restrict c, const T *restrict s, \
                    int64_t h, int interleaved, int64_t j0
#define ROW_PASS x, o, c, s, h, interleaved, j0

/* Eight float32 lanes; LOAD8 widens eight elements to float32, STORE8 rounds them back. */
#ifdef __AVX__
#define F32_LOAD8(p) _mm256_loadu_ps(p)
#define F32_STORE8(p, v) _mm256_storeu_ps((p), (v))
#define F32_STREAM8(p, v) _mm256_stream_ps((p), (v))
#endif

#if defined(__F16C__) && defined(__AVX__) && defined(ROPELAB_HAVE_FLOAT16)
#define F16_LOAD8(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define F16_STORE8(p, v) \
    _mm_storeu_si128((__m128i *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define HAVE_F16_VEC 1
#endif

#define ROW_VEC(NAME, T, LOAD8, STORE8, TAIL)                                                       \
    ROW_INLINE void NAME(ROW_ARGS(T)) {                                                             \
        int64_t j = j0;                                                                             \
        if (interleaved) {                                                                          \
            for (; 2 * j + 8 <= 2 * h; j += 4) { /* four pairs: channels 2j .. 2j+7 */             \
                __m256 xv = LOAD8(x + 2 * j), sw = _mm256_permute_ps(xv, 0xB1); /* pairs swapped */ \
                __m256 xc = _mm256_mul_ps(xv, LOAD8(c + 2 * j));                                    \
                STORE8(o + 2 * j, _mm256_addsub_ps(xc, _mm256_mul_ps(sw, LOAD8(s + 2 * j))));       \
            }                                                                                       \
        } else {                                                                                    \
            for (; j + 8 <= h; j += 8) {                                                            \
                __m256 a = LOAD8(x + j), b = LOAD8(x + j + h);                                      \
                __m256 p = _mm256_mul_ps(a, LOAD8(c + j)), q = _mm256_mul_ps(b, LOAD8(s + j));      \
                __m256 u = _mm256_mul_ps(b, LOAD8(c + j + h)), v = _mm256_mul_ps(a, LOAD8(s + j + h)); \
                STORE8(o + j, _mm256_sub_ps(p, q));                                                 \
                STORE8(o + j + h, _mm256_add_ps(u, v));                                             \
            }                                                                                       \
        }                                                                                           \
        TAIL(x, o, c, s, h, interleaved, j);                                                        \
    }

#ifdef __AVX__
ROW_VEC(row_f32, float, F32_LOAD8, F32_STORE8, scalar_f32)
ROW_VEC(row_f32_stream, float, F32_LOAD8, F32_STREAM8, scalar_f32)
#else
#define row_f32 scalar_f32
#endif

#ifdef ROPELAB_HAVE_FLOAT16
#ifdef HAVE_F16_VEC
ROW_VEC(row_f16, _Float16, F16_LOAD8, F16_STORE8, scalar_f16)
#else
#define row_f16 scalar_f16
#endif
#endif

/* bfloat16 without shuffles. A vector register loaded with 2n bfloat16 channels holds them in
 * pairs, one pair per 32-bit lane: the even channel in the low half, the odd one in the high
 * half. Shifting each lane left by 16 widens the even channels to float32, clearing the low half
 * widens the odd ones (bf16_split); the tables are split the same way, so every lane computes the
 * formula for one channel, as the scalar loop does, and an interleaved pair (2j, 2j+1) is the
 * even and the odd half of one 32-bit lane. Rounding leaves each result in the high half of its
 * lane, and the even results shifted down, blended word by word with the odd ones, are the output
 * channels in order (bf16_join): one blend where an unpack takes two shuffles. */
#define ROW_BF16(NAME, V, SPLIT, JOIN, STORE, MUL, ADD, SUB, STEP, TAIL)                                \
    ROW_INLINE void NAME(ROW_ARGS(uint16_t)) {                                                          \
        int64_t j = j0;                                                                                 \
        V ae, ao, be, bo, ce, co, se, so;                                                               \
        if (interleaved) {                                                                              \
            for (; 2 * j + STEP <= 2 * h; j += STEP / 2) { /* pairs (2j, 2j+1): STEP channels */       \
                SPLIT(x + 2 * j, &ae, &ao);                                                             \
                SPLIT(c + 2 * j, &ce, &co);                                                             \
                SPLIT(s + 2 * j, &se, &so);                                                             \
                STORE(o + 2 * j, JOIN(SUB(MUL(ae, ce), MUL(ao, se)), ADD(MUL(ao, co), MUL(ae, so))));   \
            }                                                                                           \
        } else {                                                                                        \
            for (; j + STEP <= h; j += STEP) {                                                          \
                SPLIT(x + j, &ae, &ao);                                                                 \
                SPLIT(x + j + h, &be, &bo);                                                             \
                SPLIT(c + j, &ce, &co);                                                                 \
                SPLIT(s + j, &se, &so);                                                                 \
                STORE(o + j, JOIN(SUB(MUL(ae, ce), MUL(be, se)), SUB(MUL(ao, co), MUL(bo, so))));       \
                SPLIT(c + j + h, &ce, &co);                                                             \
                SPLIT(s + j + h, &se, &so);                                                             \
                STORE(o + j + h, JOIN(ADD(MUL(be, ce), MUL(ae, se)), ADD(MUL(bo, co), MUL(ao, so))));   \
            }                                                                                           \
        }                                                                                               \
        TAIL(x, o, c, s, h, interleaved, j);                                                            \
    }

#ifdef __AVX2__
static inline void bf16_split16(const uint16_t *p, __m256 *even, __m256 *odd) {
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
}

static inline __m256i bf16_round_hi(__m256 f) { /* rounded bfloat16 bits in the high half of each lane */
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x400000);
    __m256i u = _mm256_castps_si256(f);
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
    return _mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
}

static inline __m256i bf16_join16(__m256 even, __m256 odd) { /* odd words from odd, even from even */
    return _mm256_blend_epi16(_mm256_srli_epi32(bf16_round_hi(even), 16), bf16_round_hi(odd), 0xAA);
}

#define BF16_STORE16(p, v) _mm256_storeu_si256((__m256i *)(p), (v))
#define BF16_STREAM16(p, v) _mm256_stream_si256((__m256i *)(p), (v))
ROW_BF16(row_bf16, __m256, bf16_split16, bf16_join16, BF16_STORE16, _mm256_mul_ps, _mm256_add_ps, _mm256_sub_ps,
         16, scalar_bf16)
ROW_BF16(row_bf16_stream, __m256, bf16_split16, bf16_join16, BF16_STREAM16, _mm256_mul_ps, _mm256_add_ps,
         _mm256_sub_ps, 16, scalar_bf16)
#else
#define row_bf16 scalar_bf16
#endif

/* AVX-512: sixteen float32 lanes, or thirty-two bfloat16 channels in two registers. */
#if defined(__AVX512F__) && defined(__AVX512BW__)
#define VEC_BYTES 64
#define ODD_LANES 0xAAAA /* the second channel of each interleaved pair */

#define ROW512_F32(NAME, STORE, TAIL)                                                                   \
    ROW_INLINE void NAME(ROW_ARGS(float)) {                                                             \
        int64_t j = j0;                                                                                 \
        if (interleaved) {                                                                              \
            for (; 2 * j + 16 <= 2 * h; j += 8) {                                                       \
                __m512 xv = _mm512_loadu_ps(x + 2 * j);                                                 \
                __m512 xc = _mm512_mul_ps(xv, _mm512_loadu_ps(c + 2 * j));                              \
                __m512 t = _mm512_mul_ps(_mm512_permute_ps(xv, 0xB1), _mm512_loadu_ps(s + 2 * j));      \
                STORE(o + 2 * j, _mm512_mask_add_ps(_mm512_sub_ps(xc, t), ODD_LANES, xc, t));           \
            }                                                                                           \
        } else {                                                                                        \
            for (; j + 16 <= h; j += 16) {                                                              \
                __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + j + h);                      \
                STORE(o + j, _mm512_sub_ps(_mm512_mul_ps(a, _mm512_loadu_ps(c + j)),                    \
                                           _mm512_mul_ps(b, _mm512_loadu_ps(s + j))));                  \
                STORE(o + j + h, _mm512_add_ps(_mm512_mul_ps(b, _mm512_loadu_ps(c + j + h)),            \
                                               _mm512_mul_ps(a, _mm512_loadu_ps(s + j + h))));          \
            }                                                                                           \
        }                                                                                               \
        TAIL(x, o, c, s, h, interleaved, j);                                                            \
    }

static inline void bf16_split32(const uint16_t *p, __m512 *even, __m512 *odd) {
    __m512i v = _mm512_loadu_si512(p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
}

static inline __m512i bf16_round_hi512(__m512 f) {
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x400000);
    __m512i u = _mm512_castps_si512(f);
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
    return _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), u, quiet);
}

static inline __m512i bf16_join32_soft(__m512 even, __m512 odd) {
    return _mm512_mask_blend_epi16(0xAAAAAAAAu, _mm512_srli_epi32(bf16_round_hi512(even), 16),
                                   bf16_round_hi512(odd));
}

#if defined(__AVX512BF16__)
#define HW_BF16 1
/* AVX512-BF16's vcvtne2ps2bf16 rounds 32 float32 lanes to bfloat16 in one instruction, to
 * nearest even, quieting NaNs as bf16_round_hi512 does, but it takes a subnormal float32 for a
 * zero of its sign: a vector with a subnormal result (a rare one) is rounded in software. The
 * test is on the bits (exponent zero, mantissa not), which the MXCSR's denormals-are-zero mode
 * cannot hide as it hides them from vfpclassps; one test finds the zeros and subnormals, and only
 * when it finds any does a second tell them apart. The instruction packs the even results below
 * the odd ones; one word permutation interleaves them. */
static inline __m512i bf16_join32(__m512 even, __m512 odd) {
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23,
                                           7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i exponent = _mm512_set1_epi32(0x7f800000), mantissa = _mm512_set1_epi32(0x007fffff);
    const __m512i e = _mm512_castps_si512(even), o = _mm512_castps_si512(odd);
    const __mmask16 ze = _mm512_testn_epi32_mask(e, exponent), zo = _mm512_testn_epi32_mask(o, exponent);
    if ((ze | zo) && (_mm512_mask_test_epi32_mask(ze, e, mantissa) | _mm512_mask_test_epi32_mask(zo, o, mantissa)))
        return bf16_join32_soft(even, odd);
    return _mm512_permutexvar_epi16(order, (__m512i)_mm512_cvtne2ps_pbh(odd, even));
}
#else
#define HW_BF16 0
#define bf16_join32 bf16_join32_soft
#endif

#define BF16_STORE32(p, v) _mm512_storeu_si512((p), (v))
#define BF16_STREAM32(p, v) _mm512_stream_si512((__m512i *)(p), (v))

#define F32_STREAM16(p, v) _mm512_stream_ps((p), (v))
ROW512_F32(row512_f32, _mm512_storeu_ps, row_f32)
ROW512_F32(row512_f32_stream, F32_STREAM16, row_f32_stream)
ROW_BF16(row512_bf16, __m512, bf16_split32, bf16_join32, BF16_STORE32, _mm512_mul_ps, _mm512_add_ps,
         _mm512_sub_ps, 32, row_bf16)
ROW_BF16(row512_bf16_stream, __m512, bf16_split32, bf16_join32, BF16_STREAM32, _mm512_mul_ps, _mm512_add_ps,
         _mm512_sub_ps, 32, row_bf16_stream)
#define ROW_F32 row512_f32
#define ROW_F32_STREAM row512_f32_stream
#define ROW_BF16_ row512_bf16
#define ROW_BF16_STREAM row512_bf16_stream
#elif defined(__AVX2__)
#define VEC_BYTES 32
#define HW_BF16 0
#define ROW_F32 row_f32
#define ROW_F32_STREAM row_f32_stream
#define ROW_BF16_ row_bf16
#define ROW_BF16_STREAM row_bf16_stream
#else
#define HW_BF16 0
#define VEC_BYTES 0 /* no streaming stores */
#define ROW_F32 row_f32
#define ROW_BF16_ row_bf16
#endif

/* Which dtypes this build supports, as a bit mask over the enum above, plus
 * bit 8 when it was built with OpenMP, the bytes of its widest vector store
 * (0, 32 or 64) in bits 9 to 15, and bit 16 when it rounds bfloat16 with
 * AVX512-BF16's instruction. */
int ropelab_features(void) {
    int mask = (1 << F32) | (1 << F64) | (1 << BF16) | (VEC_BYTES << 9) | (HW_BF16 << 16);
#ifdef ROPELAB_HAVE_FLOAT16
    mask |= 1 << F16;
#endif
#ifdef _OPENMP
    mask |= 1 << 8;
#endif
    return mask;
}

/* A problem: ndim leading axes (in the kernel's loop order), and for x, out,
 * cos and sin (index 0..3) a base pointer and strides in elements. */
typedef struct {
    int dtype, interleaved, ndim, stream; /* stream: write out with non-temporal stores */
    int group;                            /* heads side by side in a block of positions (<= GROUP) */
    int64_t h;
    int64_t size[MAXD];
    int64_t st[4][MAXD];
    const char *base[4];
    int64_t esize;
} problem;

/* How a row is computed: the dtype, and for float32 and bfloat16 whether out is streamed. */
enum { K_F32, K_F32_STREAM, K_F64, K_BF16, K_BF16_STREAM, K_F16 };

static int row_kind(const problem *p) {
    switch (p->dtype) {
    case F32:
        return p->stream ? K_F32_STREAM : K_F32;
    case BF16:
        return p->stream ? K_BF16_STREAM : K_BF16;
    case F64:
        return K_F64;
    default:
        return K_F16;
    }
}

/* k <= GROUP runs of `count` rows each, side by side: row r of every run, then row r + 1. Run i
 * starts at the byte addresses at[i][0..3] of x, out, cos and sin, and every run advances by
 * step[0..3] bytes from one row to the next. The row function is chosen once, outside the loop. */
static void rotate_runs(const problem *p, int k, char *at[GROUP][4], const int64_t *step, int64_t count) {
    const int64_t h = p->h, sx = step[0], so = step[1], sc = step[2], ss = step[3];
    const int il = p->interleaved;
    /* the addresses are copied into locals: the vector stores may alias anything, at[][] included,
     * and would make the compiler reload them from memory after every store */
#define RUN_ONE(FN, T, H, IL, I)                                                                        \
    const char *x0 = at[I][0], *c0 = at[I][2], *s0 = at[I][3];                                          \
    for (int64_t r = 0; r < count; ++r) {                                                               \
        FN((const T *)x0, (T *)o0, (const T *)c0, (const T *)s0, H, IL, 0);                             \
        x0 += sx, o0 += so, c0 += sc, s0 += ss;                                                         \
    }
#define RUNS_OF(FN, T, H, IL)                                                                           \
    for (int i0 = 0; i0 < k; i0 += 2) {                                                                 \
        if (k - i0 == 1) {                                                                              \
            char *o0 = at[i0][1];                                                                       \
            RUN_ONE(FN, T, H, IL, i0)                                                                   \
            continue;                                                                                   \
        }                                                                                               \
        const char *x0 = at[i0][0], *c0 = at[i0][2], *s0 = at[i0][3];                                   \
        const char *x1 = at[i0 + 1][0], *c1 = at[i0 + 1][2], *s1 = at[i0 + 1][3];                       \
        char *o0 = at[i0][1], *o1 = at[i0 + 1][1];                                                      \
        for (int64_t r = 0; r < count; ++r) {                                                           \
            FN((const T *)x0, (T *)o0, (const T *)c0, (const T *)s0, H, IL, 0);                         \
            FN((const T *)x1, (T *)o1, (const T *)c1, (const T *)s1, H, IL, 0);                         \
            x0 += sx, o0 += so, c0 += sc, s0 += ss, x1 += sx, o1 += so, c1 += sc, s1 += ss;             \
        }                                                                                               \
    }
    /* 128-channel heads, the common size, get loops the compiler unrolls for that size */
#define RUNS(FN, T)                                                                                     \
    if (h == 64 && il)                                                                                  \
        RUNS_OF(FN, T, 64, 1)                                                                           \
    else if (h == 64)                                                                                   \
        RUNS_OF(FN, T, 64, 0)                                                                           \
    else                                                                                                \
        RUNS_OF(FN, T, h, il)
    switch (row_kind(p)) {
    case K_F32:
        RUNS(ROW_F32, float);
        break;
#if VEC_BYTES
    case K_F32_STREAM:
        RUNS(ROW_F32_STREAM, float);
        break;
    case K_BF16_STREAM:
        RUNS(ROW_BF16_STREAM, uint16_t);
        break;
#endif
    case K_F64: /* float64 and float16: no loops of their own for 128 channels (a shorter compile) */
        RUNS_OF(scalar_f64, double, h, il);
        break;
    case K_BF16:
        RUNS(ROW_BF16_, uint16_t);
        break;
#ifdef ROPELAB_HAVE_FLOAT16
    case K_F16:
        RUNS_OF(row_f16, _Float16, h, il);
        break;
#endif
    default:
        break;
    }
#undef RUNS
#undef RUNS_OF
#undef RUN_ONE
}

/* Byte addresses of the row at element offsets e[0..3]. */
static void address(const problem *p, const int64_t *e, char *at[4]) {
    for (int t = 0; t < 4; ++t) at[t] = (char *)p->base[t] + e[t] * p->esize;
}

/* Rotate rows [row_begin, row_end) of the box `size` (mixed radix, last axis fastest) whose first
 * row sits at element offsets off[0..3]: one run per stretch of the last axis. */
static void rotate_box(const problem *p, const int64_t *size, const int64_t *off, int64_t row_begin,
                       int64_t row_end) {
    const int n = p->ndim;
    char *at[GROUP][4];
    int64_t step[4] = {0, 0, 0, 0};
    if (n == 0) { /* a single row */
        address(p, off, at[0]);
        rotate_runs(p, 1, at, step, row_end - row_begin);
        return;
    }
    for (int t = 0; t < 4; ++t) step[t] = p->st[t][n - 1] * p->esize;
    int64_t idx[MAXD], rem = row_begin;
    for (int d = n - 1; d >= 0; --d) {
        idx[d] = rem % size[d];
        rem /= size[d];
    }
    for (int64_t r = row_begin; r < row_end;) {
        int64_t e[4], len = size[n - 1] - idx[n - 1];
        if (len > row_end - r) len = row_end - r;
        for (int t = 0; t < 4; ++t) {
            e[t] = off[t];
            for (int d = 0; d < n; ++d) e[t] += idx[d] * p->st[t][d];
        }
        address(p, e, at[0]);
        rotate_runs(p, 1, at, step, len);
        r += len;
        idx[n - 1] += len;
        for (int d = n - 1; d > 0 && idx[d] == size[d]; --d) { /* carry into the next axis out */
            idx[d] = 0;
            ++idx[d - 1];
        }
    }
}

/* One block of positions [b0, b1) of axis ax, every other axis whole. The axes outside ax (the
 * heads the tables broadcast over) go in groups of p->group; within a group, position by position,
 * the group's rows of one position one after another: the table row is read once and reused from
 * L1, and p->group streams of x and out advance side by side. Then the axes inside ax, if any. */
static void rotate_block(const problem *p, int ax, int64_t b0, int64_t b1) {
    int64_t outer = 1, inner = 1, isize[MAXD], step[4];
    for (int d = 0; d < p->ndim; ++d) {
        if (d < ax) outer *= p->size[d];
        if (d > ax) inner *= p->size[d];
        isize[d] = d > ax ? p->size[d] : 1;
    }
    for (int t = 0; t < 4; ++t) step[t] = p->st[t][ax] * p->esize;
    for (int64_t g = 0; g < outer; g += p->group) {
        const int k = outer - g < p->group ? (int)(outer - g) : p->group;
        int64_t e[GROUP][4];
        for (int i = 0; i < k; ++i) { /* offsets of outer index g + i at position b0 */
            int64_t rem = g + i;
            for (int t = 0; t < 4; ++t) e[i][t] = b0 * p->st[t][ax];
            for (int d = ax - 1; d >= 0; --d) {
                for (int t = 0; t < 4; ++t) e[i][t] += rem % p->size[d] * p->st[t][d];
                rem /= p->size[d];
            }
        }
        if (inner == 1) {
            char *at[GROUP][4];
            for (int i = 0; i < k; ++i) address(p, e[i], at[i]);
            rotate_runs(p, k, at, step, b1 - b0);
            continue;
        }
        for (int64_t pos = b0; pos < b1; ++pos)
            for (int i = 0; i < k; ++i) {
                int64_t ei[4];
                for (int t = 0; t < 4; ++t) ei[t] = e[i][t] + (pos - b0) * p->st[t][ax];
                rotate_box(p, isize, ei, 0, inner);
            }
    }
}

/* One thread's share: positions [pos_begin, pos_end) of axis `ax` in blocks of `block` (ax >= 0),
 * or rows [pos_begin, pos_end) in the loop order (ax < 0). */
static void rotate_share(const problem *p, int ax, int64_t block, int64_t pos_begin, int64_t pos_end) {
    const int64_t zero[4] = {0, 0, 0, 0};
    if (ax < 0) {
        rotate_box(p, p->size, zero, pos_begin, pos_end);
        return;
    }
    for (int64_t b = pos_begin; b < pos_end; b += block)
        rotate_block(p, ax, b, pos_end - b < block ? pos_end : b + block);
}

/* Bytes of cos and sin per block of positions: half the L2 cache as the C library reports it,
 * between 64 KiB and 1 MiB. */
static int64_t table_block_bytes(void) {
    long l2 = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    int64_t b = l2 > 0 ? (int64_t)l2 / 2 : 0;
    return b < TABLE_BLOCK ? TABLE_BLOCK : b > TABLE_BLOCK_MAX ? TABLE_BLOCK_MAX : b;
}

/* Whether to write out with non-temporal stores, which go to memory without first reading the
 * destination's cache lines (a plain store reads each line before it overwrites it): when out
 * takes at least stream_from bytes (STREAM_FROM if 0, never if negative), too many to stay in
 * one core's share of the caches, and every vector store is VEC_BYTES-aligned (the base, each row's
 * stride and, half-split, the second half's offset). */
static int stream_rows(const problem *p, int64_t rows, int64_t stream_from) {
#if VEC_BYTES
    /* elements per vector store; F32 and BF16 have streaming rows where there are vectors */
    int64_t lanes = p->dtype == F32 || p->dtype == BF16 ? VEC_BYTES / p->esize : 0;
    if (!lanes || (uintptr_t)p->base[1] % VEC_BYTES || (!p->interleaved && p->h % lanes) ||
        (2 * p->h) % lanes)
        return 0;
    for (int d = 0; d < p->ndim; ++d)
        if (p->size[d] > 1 && p->st[1][d] % lanes) return 0;
    if (stream_from == 0) stream_from = STREAM_FROM;
    return stream_from > 0 && rows * 2 * p->h * p->esize >= stream_from;
#else
    (void)p, (void)rows, (void)stream_from;
    return 0;
#endif
}

/* Non-temporal stores are weakly ordered: make them visible before the call returns. */
static inline void fence(const problem *p) {
#ifdef __AVX__
    if (p->stream) _mm_sfence();
#else
    (void)p;
#endif
}

static const int64_t ESIZE[4] = {4, 8, 2, 2};

/* Rotate the rows [row_begin, row_end) of a problem whose leading axes have
 * sizes size[0..ndim), all positive. Strides are in elements, ndim per tensor;
 * within a row every tensor is contiguous. h is half the number of rotated
 * channels. The kernel visits the axes in its own order (see the top of the
 * file): rows are numbered in that order, so [0, rows) is the whole problem,
 * which is what ropelab passes. With OpenMP and nthreads > 1 the work is
 * split between nthreads threads of the process's OpenMP runtime (torch's
 * own, where torch has loaded libgomp). block_bytes is the bytes of cos and
 * sin per block of positions, or 0 for half the L2 cache (64 KiB to 1 MiB);
 * stream_from the bytes of out from which non-temporal stores write it (0:
 * 16 MiB, negative: never).
 * Returns -1 for an unsupported dtype or ndim, else what it did: bit 0 set when out
 * was written with non-temporal stores, bit 1 when positions went in blocks. */
int ropelab_rotate(int dtype, int interleaved, int ndim, const int64_t *size, const void *x, const int64_t *xs,
                   void *out, const int64_t *os, const void *cos, const int64_t *cs, const void *sin,
                   const int64_t *ss, int64_t h, int64_t row_begin, int64_t row_end, int nthreads,
                   int64_t block_bytes, int64_t stream_from) {
    if (ndim < 0 || ndim > MAXD || dtype < 0 || dtype > 7 || !(ropelab_features() & (1 << dtype))) return -1;
    problem p;
    p.dtype = dtype, p.interleaved = interleaved, p.ndim = ndim, p.h = h, p.esize = ESIZE[dtype];
    p.base[0] = (const char *)x, p.base[1] = (const char *)out, p.base[2] = (const char *)cos;
    p.base[3] = (const char *)sin;
    /* 1. loop order: x's strides, largest outermost (a stable insertion sort of at most MAXD axes) */
    int order[MAXD];
    for (int d = 0; d < ndim; ++d) {
        int k = d;
        while (k > 0 && xs[order[k - 1]] < xs[d]) {
            order[k] = order[k - 1];
            --k;
        }
        order[k] = d;
    }
    const int64_t *in[4] = {xs, os, cs, ss};
    for (int d = 0; d < ndim; ++d) {
        p.size[d] = size[order[d]];
        for (int t = 0; t < 4; ++t) p.st[t][d] = in[t][order[d]];
    }
    if (nthreads < 1) nthreads = 1;
    /* 2. block the positions: the innermost axis the tables vary along, if the tables broadcast over an
     * axis outside it (only for the whole problem) */
    int ax = -1;
    for (int d = ndim - 1; d >= 0 && ax < 0; --d)
        if (p.size[d] > 1 && (p.st[2][d] || p.st[3][d])) ax = d;
    int outer_broadcast = 0;
    for (int d = 0; d < ax; ++d)
        if (p.size[d] > 1 && !p.st[2][d] && !p.st[3][d]) outer_broadcast = 1;
    int64_t total = 1;
    for (int d = 0; d < ndim; ++d) total *= p.size[d];
    if (!(ax >= 0 && outer_broadcast && row_begin == 0 && row_end == total)) ax = -1;
    if (ax >= 0 && p.size[ax] < nthreads) ax = -1; /* fewer positions than threads: split rows */
    p.stream = stream_rows(&p, row_end - row_begin, stream_from);
    int64_t block = (block_bytes > 0 ? block_bytes : table_block_bytes()) / (2 * 2 * h * p.esize);
    p.group = GROUP;
    if (block_bytes == 0 && (row_end - row_begin) * 2 * h * p.esize <= SMALL_OUT) {
        block = SMALL_BLOCK; /* a problem that stays in the caches: see SMALL_OUT */
        if (p.esize == 2) p.group = 1;
    }
    if (block < 1) block = 1;
    int64_t begin = ax >= 0 ? 0 : row_begin, end = ax >= 0 ? p.size[ax] : row_end, n = end - begin;
    const int did = p.stream | (ax >= 0) << 1; /* what the caller is told */
#ifdef _OPENMP
    if (nthreads > 1 && n >= nthreads) {
#pragma omp parallel for num_threads(nthreads) schedule(static)
        for (int t = 0; t < nthreads; ++t) {
            rotate_share(&p, ax, block, begin + n * t / nthreads, begin + n * (t + 1) / nthreads);
            fence(&p);
        }
        return did;
    }
#endif
    (void)n;
    rotate_share(&p, ax, block, begin, end);
    fence(&p);
    return did;
}

/* ropelab_rotate with its shape arguments packed in one array, which ropelab builds once for each
 * combination of shapes and strides (a call from Python pays for every argument):
 * plan = {dtype, interleaved, ndim, h, rows, size[MAXD], xs[MAXD], os[MAXD], cs[MAXD], ss[MAXD]}. */
int ropelab_run(const int64_t *plan, const void *x, void *out, const void *cos, const void *sin, int nthreads,
                int64_t block_bytes, int64_t stream_from) {
    const int64_t *size = plan + 5, *st = size + MAXD;
    return ropelab_rotate((int)plan[0], (int)plan[1], (int)plan[2], size, x, st, out, st + MAXD, cos,
                          st + 2 * MAXD, sin, st + 3 * MAXD, plan[3], 0, plan[4], nthreads, block_bytes,
                          stream_from);
}
