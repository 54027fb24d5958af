/* What nnlm's C needs beyond C99, with a fallback for each compiler: GCC and Clang
 * (Linux, macOS) have the builtins, MSVC (Windows) has its own or goes without.
 * A hint only: without it the code is the same, a little slower. */
#ifndef NNLM_PORTABLE_H
#define NNLM_PORTABLE_H

/* NNLM_PREFETCH: a read soon, kept in every cache level; NNLM_PREFETCH_ONCE: a read
 * soon, not kept (a scan that will not come back) */
#if defined(__GNUC__) || defined(__clang__)
#define NNLM_PREFETCH(p) __builtin_prefetch((const void *)(p))
#define NNLM_PREFETCH_ONCE(p) __builtin_prefetch((const void *)(p), 0, 0)
#define NNLM_ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#include <xmmintrin.h>
#define NNLM_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define NNLM_PREFETCH_ONCE(p) _mm_prefetch((const char *)(p), _MM_HINT_NTA)
#define NNLM_ALWAYS_INLINE __forceinline
#else
#define NNLM_PREFETCH(p) ((void)(p))
#define NNLM_PREFETCH_ONCE(p) ((void)(p))
#define NNLM_ALWAYS_INLINE inline
#endif

#endif
