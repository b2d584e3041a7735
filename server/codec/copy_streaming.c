/* See copy_streaming.h. A cached store first reads the line it writes (for ownership): for a
 * destination nothing on this core reads again, streaming stores skip that read and leave the
 * cache to the data that is used. */
#include "server/codec/copy_streaming.h"

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>

void cr_copy_streaming(void *dst_, const void *src_, size_t n)
{
    char *dst = dst_;
    const char *src = src_;
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15; /* streaming stores want 16-byte alignment */
    head = head < n ? head : n;
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src), b = _mm_loadu_si128((const __m128i *)(src + 16)),
                c = _mm_loadu_si128((const __m128i *)(src + 32)), d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    memcpy(dst, src, n);
    _mm_sfence(); /* weakly ordered: fenced before the caller hands the bytes on */
}
#else
void cr_copy_streaming(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
}
#endif
