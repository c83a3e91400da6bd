/* ropelab's fused CPU kernel: out = x*cos + rot(x)*sin in one pass (09_performance).
 *
 * Compiled on first use by ropelab/kernels/cpu.py and called through ctypes;
 * when no C compiler is found ropelab falls back to its torch path, so nothing
 * here is required. One call rotates every row (the last axis, d channels) of
 * a problem of up to MAXD leading axes, split between threads with OpenMP when
 * the compiler has it.
 *
 * Each output is the plain formula term by term, with no fused multiply-add
 * (the build passes -ffp-contract=off, and the vector loops use separate
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
 * bfloat16 makes three.
 *
 * Memory traffic is what this kernel is about (RoPE does 3 flops per 2s bytes
 * moved), so the loop order follows memory, not the caller's axis order:
 *   1. The axes are visited in the order of x's strides, largest outermost:
 *      a (batch, seq, heads, dim) tensor passed as a transposed
 *      (batch, heads, seq, dim) view is read in storage order.
 *   2. When an axis the tables broadcast over (heads) is outside the axis
 *      they vary along (positions), the positions are cut into blocks of
 *      about TABLE_BLOCK bytes of cos and sin, and every head of a block is
 *      rotated before the next block: the table rows are read from memory
 *      once, and from cache for the other heads, instead of once per head.
 *   3. Threads take contiguous ranges of positions (with blocks) or of rows.
 */
#include <stdint.h>
#include <string.h>
#if defined(__AVX__) || defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

#define MAXD 4
#define TABLE_BLOCK (64 * 1024) /* bytes of cos and sin per block of positions (fits in L2) */

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

#define ID(v) (v)
#define F16_LOAD(v) ((float)(v))
#define F16_STORE(v) ((_Float16)(v))

/* The formula on channels [j0, h) (half-split pairs) or pairs [j0, h) (interleaved), one at a time:
 * the whole row without vector units, and the tail after the vector loop. */
#define ROW_SCALAR(NAME, T, W, LOAD, STORE)                                                        \
    static inline void NAME(const T *restrict x, T *restrict o, const T *restrict c,               \
                            const T *restrict s, int64_t h, int interleaved, int64_t j0) {         \
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

/* Eight lanes at a time. LOAD8 widens eight elements to float32, STORE8 rounds eight back; the
 * arithmetic is the scalar formula lane by lane (addsub: even lanes subtract, odd lanes add). */
#ifdef __AVX__
#define F32_LOAD8(p) _mm256_loadu_ps(p)
#define F32_STORE8(p, v) _mm256_storeu_ps((p), (v))
#endif

#ifdef __AVX2__
static inline __m256 bf16_load8(const uint16_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

static inline void bf16_store8(uint16_t *p, __m256 f) {
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
    __m256i u = _mm256_castps_si256(f), hi = _mm256_srli_epi32(u, 16);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(hi, one))), 16);
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8); /* 8 x u32 -> 8 x u16 */
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}
#define BF16_LOAD8(p) bf16_load8(p)
#define BF16_STORE8(p, v) bf16_store8((p), (v))
#endif

#if defined(__F16C__) && defined(__AVX__) && defined(ROPELAB_HAVE_FLOAT16)
#define F16_LOAD8(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define F16_STORE8(p, v) \
    _mm_storeu_si128((__m128i *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define HAVE_F16_VEC 1
#endif

#define ROW_VEC(NAME, T, LOAD8, STORE8, SCALAR)                                                     \
    static inline void NAME(const T *restrict x, T *restrict o, const T *restrict c,                \
                            const T *restrict s, int64_t h, int interleaved) {                      \
        int64_t j = 0;                                                                              \
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
        SCALAR(x, o, c, s, h, interleaved, j);                                                      \
    }

#ifdef __AVX__
ROW_VEC(row_f32, float, F32_LOAD8, F32_STORE8, scalar_f32)
#else
static inline void row_f32(const float *x, float *o, const float *c, const float *s, int64_t h, int il) {
    scalar_f32(x, o, c, s, h, il, 0);
}
#endif

/* 16-bit rows against table rows already widened to float32 (see table_row). A 16-bit row is
 * widened as it is loaded, put through the float32 formula, and rounded once as it is stored. */
#define ROW_WIDE_SCALAR(NAME, T, LOAD, STORE)                                                       \
    static inline void NAME(const T *restrict x, T *restrict o, const float *restrict c,            \
                            const float *restrict s, int64_t h, int interleaved, int64_t j0) {      \
        if (interleaved) {                                                                          \
            for (int64_t j = j0; j < h; ++j) {                                                      \
                float a = LOAD(x[2 * j]), b = LOAD(x[2 * j + 1]);                                   \
                float p = a * c[2 * j], q = b * s[2 * j], u = b * c[2 * j + 1], v = a * s[2 * j + 1]; \
                o[2 * j] = STORE(p - q);                                                            \
                o[2 * j + 1] = STORE(u + v);                                                        \
            }                                                                                       \
        } else {                                                                                    \
            for (int64_t j = j0; j < h; ++j) {                                                      \
                float a = LOAD(x[j]), b = LOAD(x[j + h]);                                           \
                float p = a * c[j], q = b * s[j], u = b * c[j + h], v = a * s[j + h];               \
                o[j] = STORE(p - q);                                                                \
                o[j + h] = STORE(u + v);                                                            \
            }                                                                                       \
        }                                                                                           \
    }

ROW_WIDE_SCALAR(wide_scalar_bf16, uint16_t, bf16_to_f32, f32_to_bf16)
#ifdef ROPELAB_HAVE_FLOAT16
ROW_WIDE_SCALAR(wide_scalar_f16, _Float16, F16_LOAD, F16_STORE)
#endif

/* Sixteen channels at a time, bfloat16: widening by interleaving zeros below each element
 * (unpacklo/hi) puts channels 0-3, 8-11 in one register and 4-7, 12-15 in the other; the widened
 * table rows are stored in that same order, and packing the two rounded halves (packus) restores
 * the channel order. So each lane computes the formula for one channel, as the scalar loop does. */
#define VEC16 16
#ifdef __AVX2__
static inline __m256i bf16_round(__m256 f) { /* float32 -> bfloat16 bits in the low half of each lane */
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
    __m256i u = _mm256_castps_si256(f), hi = _mm256_srli_epi32(u, 16);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(hi, one))), 16);
    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
}

static inline void bf16_load16(const uint16_t *p, __m256 *lo, __m256 *hi) {
    __m256i v = _mm256_loadu_si256((const __m256i *)p), z = _mm256_setzero_si256();
    *lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, v));
    *hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, v));
}

static inline void bf16_store16(uint16_t *p, __m256 lo, __m256 hi) {
    _mm256_storeu_si256((__m256i *)p, _mm256_packus_epi32(bf16_round(lo), bf16_round(hi)));
}

static void row_bf16(const uint16_t *restrict x, uint16_t *restrict o, const float *restrict c,
                     const float *restrict s, int64_t h, int interleaved) {
    int64_t j = 0;
    if (interleaved) {
        for (; 2 * j + VEC16 <= 2 * h; j += VEC16 / 2) {
            __m256 a0, a1;
            bf16_load16(x + 2 * j, &a0, &a1);
            const float *cj = c + 2 * j, *sj = s + 2 * j;
            __m256 r0 = _mm256_addsub_ps(_mm256_mul_ps(a0, _mm256_loadu_ps(cj)),
                                         _mm256_mul_ps(_mm256_permute_ps(a0, 0xB1), _mm256_loadu_ps(sj)));
            __m256 r1 = _mm256_addsub_ps(_mm256_mul_ps(a1, _mm256_loadu_ps(cj + 8)),
                                         _mm256_mul_ps(_mm256_permute_ps(a1, 0xB1), _mm256_loadu_ps(sj + 8)));
            bf16_store16(o + 2 * j, r0, r1);
        }
    } else {
        for (; j + VEC16 <= h; j += VEC16) {
            __m256 a0, a1, b0, b1;
            bf16_load16(x + j, &a0, &a1);
            bf16_load16(x + j + h, &b0, &b1);
            __m256 p0 = _mm256_mul_ps(a0, _mm256_loadu_ps(c + j)), q0 = _mm256_mul_ps(b0, _mm256_loadu_ps(s + j));
            __m256 p1 = _mm256_mul_ps(a1, _mm256_loadu_ps(c + j + 8)), q1 = _mm256_mul_ps(b1, _mm256_loadu_ps(s + j + 8));
            bf16_store16(o + j, _mm256_sub_ps(p0, q0), _mm256_sub_ps(p1, q1));
            __m256 u0 = _mm256_mul_ps(b0, _mm256_loadu_ps(c + j + h)), v0 = _mm256_mul_ps(a0, _mm256_loadu_ps(s + j + h));
            __m256 u1 = _mm256_mul_ps(b1, _mm256_loadu_ps(c + j + h + 8));
            __m256 v1 = _mm256_mul_ps(a1, _mm256_loadu_ps(s + j + h + 8));
            bf16_store16(o + j + h, _mm256_add_ps(u0, v0), _mm256_add_ps(u1, v1));
        }
    }
    wide_scalar_bf16(x, o, c, s, h, interleaved, j);
}

/* Widen n table entries; the first whole groups of sixteen in the lane order row_bf16 reads. */
static void widen_bf16_table(const uint16_t *in, float *out, int64_t n) {
    int64_t j = 0;
    for (; j + VEC16 <= n; j += VEC16) {
        __m256 lo, hi;
        bf16_load16(in + j, &lo, &hi);
        _mm256_storeu_ps(out + j, lo);
        _mm256_storeu_ps(out + j + 8, hi);
    }
    for (; j < n; ++j) out[j] = bf16_to_f32(in[j]);
}
#else
static void row_bf16(const uint16_t *x, uint16_t *o, const float *c, const float *s, int64_t h, int il) {
    wide_scalar_bf16(x, o, c, s, h, il, 0);
}
static void widen_bf16_table(const uint16_t *in, float *out, int64_t n) {
    for (int64_t j = 0; j < n; ++j) out[j] = bf16_to_f32(in[j]);
}
#endif

#ifdef ROPELAB_HAVE_FLOAT16
#ifdef HAVE_F16_VEC
static void row_f16(const _Float16 *restrict x, _Float16 *restrict o, const float *restrict c,
                    const float *restrict s, int64_t h, int interleaved) {
    int64_t j = 0;
    if (interleaved) {
        for (; 2 * j + 8 <= 2 * h; j += 4) {
            __m256 xv = F16_LOAD8(x + 2 * j), sw = _mm256_permute_ps(xv, 0xB1);
            __m256 xc = _mm256_mul_ps(xv, _mm256_loadu_ps(c + 2 * j));
            F16_STORE8(o + 2 * j, _mm256_addsub_ps(xc, _mm256_mul_ps(sw, _mm256_loadu_ps(s + 2 * j))));
        }
    } else {
        for (; j + 8 <= h; j += 8) {
            __m256 a = F16_LOAD8(x + j), b = F16_LOAD8(x + j + h);
            __m256 p = _mm256_mul_ps(a, _mm256_loadu_ps(c + j)), q = _mm256_mul_ps(b, _mm256_loadu_ps(s + j));
            __m256 u = _mm256_mul_ps(b, _mm256_loadu_ps(c + j + h)), v = _mm256_mul_ps(a, _mm256_loadu_ps(s + j + h));
            F16_STORE8(o + j, _mm256_sub_ps(p, q));
            F16_STORE8(o + j + h, _mm256_add_ps(u, v));
        }
    }
    wide_scalar_f16(x, o, c, s, h, interleaved, j);
}
#else
static void row_f16(const _Float16 *x, _Float16 *o, const float *c, const float *s, int64_t h, int il) {
    wide_scalar_f16(x, o, c, s, h, il, 0);
}
#endif
static void widen_f16_table(const _Float16 *in, float *out, int64_t n) {
    for (int64_t j = 0; j < n; ++j) out[j] = (float)in[j];
}
#endif

/* Widen a half-split table row half by half (each half in row_bf16's lane order), an interleaved
 * one whole. */
static void widen_table(int dtype, const void *in, float *out, int64_t h, int interleaved) {
    int64_t parts = interleaved ? 1 : 2, n = interleaved ? 2 * h : h;
    for (int64_t k = 0; k < parts; ++k) {
        if (dtype == BF16) widen_bf16_table((const uint16_t *)in + k * n, out + k * n, n);
#ifdef ROPELAB_HAVE_FLOAT16
        else widen_f16_table((const _Float16 *)in + k * n, out + k * n, n);
#endif
    }
}

/* Which dtypes this build supports, as a bit mask over the enum above, plus
 * bit 8 when it was built with OpenMP. */
int ropelab_features(void) {
    int mask = (1 << F32) | (1 << F64) | (1 << BF16);
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
    int dtype, interleaved, ndim;
    int64_t h;
    int64_t size[MAXD];
    int64_t st[4][MAXD];
    const char *base[4];
    int64_t esize;
} problem;

/* 16-bit tables: each thread keeps the last NSLOT table rows it widened to float32, slot chosen by
 * row, so that the rows of a block of positions are widened once and reused by every head. */
#define NSLOT 64
#define WIDE_MAX 32768 /* floats of widened cos and sin a thread keeps at most (128 KiB) */
typedef struct {
    float *rows; /* NSLOT x (cos, sin) x 2h */
    int64_t tag[NSLOT][2];
} table_cache;

static int widened_tables(const problem *p) {
    return (p->dtype == BF16 || p->dtype == F16) && NSLOT * 4 * p->h <= WIDE_MAX;
}

/* Rotate rows [row_begin, row_end) of the box `size` (mixed radix, last axis
 * fastest) whose first row sits at element offsets off[0..3]. */
static void rotate_box(const problem *p, table_cache *tc, const int64_t *size, const int64_t *off,
                       int64_t row_begin, int64_t row_end) {
    int64_t idx[MAXD], rem = row_begin;
    int n = p->ndim;
    for (int d = n - 1; d >= 0; --d) {
        idx[d] = rem % size[d];
        rem /= size[d];
    }
    const int64_t w = 2 * p->h;
    for (int64_t r = row_begin; r < row_end; ++r) {
        int64_t e[4];
        const char *ptr[4];
        for (int t = 0; t < 4; ++t) {
            e[t] = off[t];
            for (int d = 0; d < n; ++d) e[t] += idx[d] * p->st[t][d];
            ptr[t] = p->base[t] + e[t] * p->esize;
        }
        if (tc) { /* a 16-bit row against widened table rows */
            int slot = (int)((uint64_t)(e[2] / w) % NSLOT);
            float *cw = tc->rows + (int64_t)slot * 2 * w, *sw = cw + w;
            if (tc->tag[slot][0] != e[2] || tc->tag[slot][1] != e[3]) {
                widen_table(p->dtype, ptr[2], cw, p->h, p->interleaved);
                widen_table(p->dtype, ptr[3], sw, p->h, p->interleaved);
                tc->tag[slot][0] = e[2], tc->tag[slot][1] = e[3];
            }
            if (p->dtype == BF16)
                row_bf16((const uint16_t *)ptr[0], (uint16_t *)ptr[1], cw, sw, p->h, p->interleaved);
#ifdef ROPELAB_HAVE_FLOAT16
            else
                row_f16((const _Float16 *)ptr[0], (_Float16 *)ptr[1], cw, sw, p->h, p->interleaved);
#endif
        } else {
            switch (p->dtype) {
            case F32:
                row_f32((const float *)ptr[0], (float *)ptr[1], (const float *)ptr[2], (const float *)ptr[3], p->h,
                        p->interleaved);
                break;
            case F64:
                scalar_f64((const double *)ptr[0], (double *)ptr[1], (const double *)ptr[2],
                           (const double *)ptr[3], p->h, p->interleaved, 0);
                break;
            case BF16: /* rows too wide to keep widened: convert as they are read */
                scalar_bf16((const uint16_t *)ptr[0], (uint16_t *)ptr[1], (const uint16_t *)ptr[2],
                            (const uint16_t *)ptr[3], p->h, p->interleaved, 0);
                break;
#ifdef ROPELAB_HAVE_FLOAT16
            case F16:
                scalar_f16((const _Float16 *)ptr[0], (_Float16 *)ptr[1], (const _Float16 *)ptr[2],
                           (const _Float16 *)ptr[3], p->h, p->interleaved, 0);
                break;
#endif
            default:
                break;
            }
        }
        for (int d = n - 1; d >= 0; --d) { /* next row: increment the mixed-radix index */
            if (++idx[d] < size[d]) break;
            idx[d] = 0;
        }
    }
}

/* One thread's share: positions [pos_begin, pos_end) of axis `ax` in blocks of `block`, every other
 * axis whole (ax >= 0), or rows [pos_begin, pos_end) (ax < 0). */
static void rotate_share(const problem *p, int ax, int64_t block, int64_t pos_begin, int64_t pos_end) {
    table_cache tc, *tcp = NULL;
    float rows[widened_tables(p) ? NSLOT * 4 * p->h : 1]; /* at most WIDE_MAX floats */
    if (widened_tables(p)) {
        tc.rows = rows;
        for (int k = 0; k < NSLOT; ++k) tc.tag[k][0] = tc.tag[k][1] = -1; /* offsets are never negative */
        tcp = &tc;
    }
    const int64_t zero[4] = {0, 0, 0, 0};
    if (ax < 0) {
        rotate_box(p, tcp, p->size, zero, pos_begin, pos_end);
        return;
    }
    int64_t size[MAXD], off[4];
    memcpy(size, p->size, sizeof size);
    int64_t rows_per_pos = 1;
    for (int d = 0; d < p->ndim; ++d)
        if (d != ax) rows_per_pos *= p->size[d];
    for (int64_t b = pos_begin; b < pos_end; b += block) {
        size[ax] = pos_end - b < block ? pos_end - b : block;
        for (int t = 0; t < 4; ++t) off[t] = b * p->st[t][ax];
        rotate_box(p, tcp, size, off, 0, rows_per_pos * size[ax]);
    }
}

static const int64_t ESIZE[4] = {4, 8, 2, 2};

/* Rotate the rows [row_begin, row_end) of a problem whose leading axes have
 * sizes size[0..ndim), all positive. Strides are in elements, ndim per tensor;
 * within a row every tensor is contiguous. h is half the number of rotated
 * channels. The kernel visits the axes in its own order (see the top of the
 * file): rows are numbered in that order, so [0, rows) is the whole problem,
 * which is what ropelab passes. With OpenMP and nthreads > 1 the work is
 * split between nthreads threads of the process's OpenMP runtime (torch's
 * own, where torch has loaded libgomp). Returns 0, or -1 for an unsupported
 * dtype or ndim. */
int ropelab_rotate(int dtype, int interleaved, int ndim, const int64_t *size, const void *x, const int64_t *xs,
                   void *out, const int64_t *os, const void *cos, const int64_t *cs, const void *sin,
                   const int64_t *ss, int64_t h, int64_t row_begin, int64_t row_end, int nthreads) {
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
    int64_t block = TABLE_BLOCK / (2 * 2 * h * p.esize);
    if (widened_tables(&p)) block = NSLOT; /* a block's widened rows fill the slots exactly */
    if (block < 1) block = 1;
    int64_t begin = ax >= 0 ? 0 : row_begin, end = ax >= 0 ? p.size[ax] : row_end, n = end - begin;
#ifdef _OPENMP
    if (nthreads > 1 && n >= nthreads) {
#pragma omp parallel for num_threads(nthreads) schedule(static)
        for (int t = 0; t < nthreads; ++t)
            rotate_share(&p, ax, block, begin + n * t / nthreads, begin + n * (t + 1) / nthreads);
        return 0;
    }
#endif
    rotate_share(&p, ax, block, begin, end);
    return 0;
}
