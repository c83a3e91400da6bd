/* ropelab's fused CPU kernel: out = x*cos + rot(x)*sin in one pass (09_performance).
 *
 * Compiled on first use by ropelab/kernels/cpu.py and called through ctypes; when
 * no C compiler is found ropelab falls back to its torch path, so nothing here
 * is required. One call rotates the rows of a problem of up to MAXD leading
 * axes, split between threads with OpenMP when the compiler has it.
 *
 * Each output is the plain formula term by term, with no fused multiply-add
 * (the build passes -ffp-contract=off):
 *   half_split  out[j]   = x[j]*c[j]     - x[j+h]*s[j]
 *               out[j+h] = x[j+h]*c[j+h] + x[j]*s[j+h]
 *   interleaved out[2j]  = x[2j]*c[2j]   - x[2j+1]*s[2j]
 *               out[2j+1]= x[2j+1]*c[2j+1] + x[2j]*s[2j+1]
 * so float32 and float64 results are bit-identical to torch's
 * x*cos + rotate_half(x)*sin. bfloat16 and float16 are widened to float32
 * (exactly), put through the same float32 formula, and its result rounded to
 * the 16-bit type (to nearest even): one 16-bit rounding per output where the
 * plain formula in bfloat16 makes three.
 */
#include <stdint.h>
#include <string.h>
#if defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

#define MAXD 4

enum { F32 = 0, F64 = 1, BF16 = 2, F16 = 3 };

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

#define ROW_KERNEL(NAME, T, W, LOAD, STORE)                                                        \
    static void NAME(const T *restrict x, T *restrict o, const T *restrict c, const T *restrict s, \
                     int64_t h, int interleaved) {                                                 \
        if (interleaved) {                                                                         \
            for (int64_t j = 0; j < h; ++j) {                                                      \
                W a = LOAD(x[2 * j]), b = LOAD(x[2 * j + 1]);                                      \
                W p = a * LOAD(c[2 * j]), q = b * LOAD(s[2 * j]);                                  \
                W u = b * LOAD(c[2 * j + 1]), v = a * LOAD(s[2 * j + 1]);                          \
                o[2 * j] = STORE(p - q);                                                           \
                o[2 * j + 1] = STORE(u + v);                                                       \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t j = 0; j < h; ++j) {                                                      \
                W a = LOAD(x[j]), b = LOAD(x[j + h]);                                              \
                W p = a * LOAD(c[j]), q = b * LOAD(s[j]);                                          \
                W u = b * LOAD(c[j + h]), v = a * LOAD(s[j + h]);                                  \
                o[j] = STORE(p - q);                                                               \
                o[j + h] = STORE(u + v);                                                           \
            }                                                                                      \
        }                                                                                          \
    }

#define ID(v) (v)
#define F16_LOAD(v) ((float)(v))
#define F16_STORE(v) ((_Float16)(v))

ROW_KERNEL(row_f32, float, float, ID, ID)
ROW_KERNEL(row_f64, double, double, ID, ID)
ROW_KERNEL(row_bf16_direct, uint16_t, float, bf16_to_f32, f32_to_bf16)
#ifdef ROPELAB_HAVE_FLOAT16
ROW_KERNEL(row_f16_direct, _Float16, float, F16_LOAD, F16_STORE)
#endif

/* Widening and rounding loops for the 16-bit types; with AVX2 (and F16C for
 * float16) eight at a time, the same conversions as the scalar helpers. */
static void widen_bf16(const uint16_t *in, float *out, int64_t n) {
    int64_t j = 0;
#ifdef __AVX2__
    for (; j + 8 <= n; j += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(in + j)));
        _mm256_storeu_ps(out + j, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
#endif
    for (; j < n; ++j) out[j] = bf16_to_f32(in[j]);
}

static void narrow_bf16(const float *in, uint16_t *out, int64_t n) {
    int64_t j = 0;
#ifdef __AVX2__
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
    for (; j + 8 <= n; j += 8) {
        __m256 f = _mm256_loadu_ps(in + j);
        __m256i u = _mm256_castps_si256(f), hi = _mm256_srli_epi32(u, 16);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(hi, one))), 16);
        r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8); /* 8 x u32 -> 8 x u16 */
        _mm_storeu_si128((__m128i *)(out + j), _mm256_castsi256_si128(packed));
    }
#endif
    for (; j < n; ++j) out[j] = f32_to_bf16(in[j]);
}

#ifdef ROPELAB_HAVE_FLOAT16
static void widen_f16(const _Float16 *in, float *out, int64_t n) {
    int64_t j = 0;
#ifdef __F16C__
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(out + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + j))));
#endif
    for (; j < n; ++j) out[j] = (float)in[j];
}

static void narrow_f16(const float *in, _Float16 *out, int64_t n) {
    int64_t j = 0;
#ifdef __F16C__
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i *)(out + j),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; j < n; ++j) out[j] = (_Float16)in[j];
}
#endif

/* 16-bit rows: widen the row into a float32 buffer, rotate it with row_f32
 * against table rows already widened (rotate_rows widens a table row only
 * when it differs from the previous row's, so a decoding step widens its one
 * row once), and round back: one 16-bit rounding per output. Rows wider than the
 * buffers take the direct loop, which computes the same. */
#define ROW_BUF 1024
#define ROW_WIDE(NAME, T, WIDEN, NARROW)                                                            \
    static void NAME(const T *restrict x, T *restrict o, const float *restrict cf,                  \
                     const float *restrict sf, int64_t h, int interleaved) {                        \
        float xf[ROW_BUF], of[ROW_BUF];                                                             \
        WIDEN(x, xf, 2 * h);                                                                        \
        row_f32(xf, of, cf, sf, h, interleaved);                                                    \
        NARROW(of, o, 2 * h);                                                                       \
    }

ROW_WIDE(row_bf16, uint16_t, widen_bf16, narrow_bf16)
#ifdef ROPELAB_HAVE_FLOAT16
ROW_WIDE(row_f16, _Float16, widen_f16, narrow_f16)
#endif

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

/* One row of x in a 16-bit type T, inside rotate_rows: its table rows are
 * widened only when they differ from the previous row's. */
#define ROW16(T, WIDEN, ROW, DIRECT)                                                                 \
    do {                                                                                             \
        const T *xr = (const T *)x + xo, *cr = (const T *)cos + co, *sr = (const T *)sin + so;     \
        T *orow = (T *)out + oo;                                                                     \
        if (2 * h > ROW_BUF) {                                                                       \
            DIRECT(xr, orow, cr, sr, h, interleaved);                                                \
            break;                                                                                   \
        }                                                                                            \
        if (co != last_co) WIDEN(cr, cf, 2 * h);                                                     \
        if (so != last_so) WIDEN(sr, sf, 2 * h);                                                     \
        last_co = co, last_so = so;                                                                  \
        ROW(xr, orow, cf, sf, h, interleaved);                                                       \
    } while (0)

static int rotate_rows(int dtype, int interleaved, int ndim, const int64_t *size, const void *x, const int64_t *xs,
                       void *out, const int64_t *os, const void *cos, const int64_t *cs, const void *sin,
                       const int64_t *ss, int64_t h, int64_t row_begin, int64_t row_end) {
    int64_t idx[MAXD];
    int64_t rem = row_begin;
    float cf[ROW_BUF], sf[ROW_BUF];   /* the current table rows, widened (16-bit dtypes) */
    int64_t last_co = -1, last_so = -1; /* offsets are never negative: no row widened yet */
    for (int d = ndim - 1; d >= 0; --d) {
        idx[d] = rem % size[d];
        rem /= size[d];
    }
    for (int64_t r = row_begin; r < row_end; ++r) {
        int64_t xo = 0, oo = 0, co = 0, so = 0;
        for (int d = 0; d < ndim; ++d) {
            xo += idx[d] * xs[d];
            oo += idx[d] * os[d];
            co += idx[d] * cs[d];
            so += idx[d] * ss[d];
        }
        switch (dtype) {
        case F32:
            row_f32((const float *)x + xo, (float *)out + oo, (const float *)cos + co, (const float *)sin + so, h,
                    interleaved);
            break;
        case F64:
            row_f64((const double *)x + xo, (double *)out + oo, (const double *)cos + co, (const double *)sin + so,
                    h, interleaved);
            break;
        case BF16:
            ROW16(uint16_t, widen_bf16, row_bf16, row_bf16_direct);
            break;
#ifdef ROPELAB_HAVE_FLOAT16
        case F16:
            ROW16(_Float16, widen_f16, row_f16, row_f16_direct);
            break;
#endif
        default:
            return -1;
        }
        for (int d = ndim - 1; d >= 0; --d) { /* next row: increment the mixed-radix index */
            if (++idx[d] < size[d]) break;
            idx[d] = 0;
        }
    }
    return 0;
}

/* Rotate the rows [row_begin, row_end) of a problem whose leading axes have
 * sizes size[0..ndim), all positive (row index = mixed radix over them, last
 * fastest). Strides are in elements, ndim per tensor; within a row every
 * tensor is contiguous. h is half the number of rotated channels. With
 * OpenMP and nthreads > 1 the rows are split between nthreads threads of the
 * process's OpenMP runtime (torch's own, where torch has loaded libgomp).
 * Returns 0, or -1 for an unsupported dtype or ndim. */
int ropelab_rotate(int dtype, int interleaved, int ndim, const int64_t *size, const void *x, const int64_t *xs,
                   void *out, const int64_t *os, const void *cos, const int64_t *cs, const void *sin,
                   const int64_t *ss, int64_t h, int64_t row_begin, int64_t row_end, int nthreads) {
    if (ndim < 0 || ndim > MAXD || dtype < 0 || dtype > 7 || !(ropelab_features() & (1 << dtype))) return -1;
#ifdef _OPENMP
    if (nthreads > 1 && row_end - row_begin >= nthreads) {
        int64_t n = row_end - row_begin;
#pragma omp parallel for num_threads(nthreads) schedule(static)
        for (int t = 0; t < nthreads; ++t)
            rotate_rows(dtype, interleaved, ndim, size, x, xs, out, os, cos, cs, sin, ss, h, row_begin + n * t / nthreads,
                        row_begin + n * (t + 1) / nthreads);
        return 0;
    }
#endif
    (void)nthreads;
    return rotate_rows(dtype, interleaved, ndim, size, x, xs, out, os, cos, cs, sin, ss, h, row_begin, row_end);
}
