/* Unit tests of the .npy header parser and writer (server/npy.c). */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "server/codec/copy_streaming.h"
#include "server/codec/npy.h"

/* A whole header of the given version around dict (padded like numpy: 64-byte aligned). */
static size_t make_header(uint8_t *out, int major, const char *dict)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t total = (pre + dl + 1 + 63) / 64 * 64;
    size_t hlen = total - pre;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (uint8_t)major;
    out[7] = 0;
    if (major == 1) {
        out[8] = (uint8_t)hlen;
        out[9] = (uint8_t)(hlen >> 8);
    } else {
        for (int i = 0; i < 4; i++)
            out[8 + i] = (uint8_t)(hlen >> (8 * i));
    }
    memcpy(out + pre, dict, dl);
    memset(out + pre + dl, ' ', hlen - dl - 1);
    out[total - 1] = '\n';
    return total;
}

static int parse(const char *dict, int major, cr_npy_header *h, cr_error *e)
{
    uint8_t buf[1024];
    size_t n = make_header(buf, major, dict), need = 0;
    cr_npy_status st = cr_npy_parse_header(buf, n, "a", h, &need, e);
    return st == CR_NPY_OK ? 0 : -1;
}

static void test_good(void)
{
    cr_npy_header h;
    cr_error e;
    for (int v = 1; v <= 3; v++) {
        CHECK(parse("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", v, &h, &e) == 0);
        CHECK(h.major == v && h.dtype == CR_DT_F32 && h.ndim == 2 && h.shape[0] == 3 &&
              h.shape[1] == 4 && h.count == 12 && h.data_bytes == 48 && !h.fortran_order);
        CHECK(h.header_bytes % 64 == 0);
    }
    CHECK(parse("{\"shape\":(5,),\"fortran_order\":True,\"descr\":\"<f8\"}", 1, &h, &e) == 0);
    CHECK(h.dtype == CR_DT_F64 && h.ndim == 1 && h.count == 5 && h.fortran_order);
    CHECK(parse("{'descr': '|u1', 'fortran_order': False, 'shape': ()}", 1, &h, &e) == 0);
    CHECK(h.ndim == 0 && h.count == 1);
    CHECK(parse("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 0, 3)}", 1, &h, &e) == 0);
    CHECK(h.dtype == CR_DT_I64 && h.count == 0 && h.data_bytes == 0);
    const char *dts[] = {"|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "=i4", "=f4", ">u1"};
    cr_dtype want[] = {CR_DT_I8, CR_DT_U16, CR_DT_I16, CR_DT_U32, CR_DT_I32, CR_DT_U64,
                       CR_DT_I32, CR_DT_F32, CR_DT_U8};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        char d[128];
        snprintf(d, sizeof d, "{'descr': '%s', 'fortran_order': False, 'shape': (7,), }", dts[i]);
        CHECK(parse(d, 1, &h, &e) == 0 && h.dtype == want[i]);
    }
}

static void test_bad(void)
{
    static const char *const dicts[] = {
        "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<f16', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': 'f4', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '|f4', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (03,), }",
        "{'descr': '<f4', 'fortran_order': false, 'shape': (3,), }",
        "{'descr': '<f4', 'fortran_order': False, }",
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } x",
        "{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3L,)}",
        "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (3,)}",
        "['descr', '<f4']",
        "",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
    };
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        cr_npy_header h;
        cr_error e = {0};
        int rc = parse(dicts[i], 1, &h, &e);
        CHECK(rc != 0);
        if (rc == 0)
            fprintf(stderr, "accepted: %s\n", dicts[i]);
        CHECK(strcmp(e.field, "a") == 0 && (e.http == 400 || e.http == 413));
    }
}

static void test_preamble(void)
{
    uint8_t buf[1024];
    cr_npy_header h;
    cr_error e = {0};
    size_t need = 0;
    size_t n = make_header(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
    CHECK(cr_npy_parse_header(buf, 3, "a", &h, &need, &e) == CR_NPY_MORE && need == 8);
    CHECK(cr_npy_parse_header(buf, 9, "a", &h, &need, &e) == CR_NPY_MORE && need == 10);
    CHECK(cr_npy_parse_header(buf, 20, "a", &h, &need, &e) == CR_NPY_MORE && need == n);
    CHECK(cr_npy_parse_header(buf, n, "a", &h, &need, &e) == CR_NPY_OK);
    buf[0] = 'x';
    CHECK(cr_npy_parse_header(buf, n, "a", &h, &need, &e) == CR_NPY_BAD && e.http == 400);
    buf[0] = 0x93;
    buf[6] = 4;
    CHECK(cr_npy_parse_header(buf, n, "a", &h, &need, &e) == CR_NPY_BAD && e.http == 400);
    buf[6] = 2; /* 4-byte length: 0x10000 + ... is over the limit */
    buf[8] = 0;
    buf[9] = 0;
    buf[10] = 2;
    buf[11] = 0;
    CHECK(cr_npy_parse_header(buf, n, "b", &h, &need, &e) == CR_NPY_BAD && e.http == 413 &&
          strcmp(e.field, "b") == 0);
}

static void test_writer(void)
{
    for (int dt = 0; dt < CR_DT_COUNT; dt++)
        for (int nd = 0; nd <= 3; nd++) {
            int64_t shape[3] = {7, 1, 123456789};
            char out[CR_NPY_WRITE_MAX];
            size_t n = cr_npy_write_header(out, sizeof out, (cr_dtype)dt, nd, shape);
            CHECK(n > 0 && n % 64 == 0 && out[n - 1] == '\n');
            cr_npy_header h;
            cr_error e;
            size_t need;
            CHECK(cr_npy_parse_header((const uint8_t *)out, n, "r", &h, &need, &e) == CR_NPY_OK);
            /* bfloat16 answers are written as their bits: numpy has no bfloat16 */
            cr_dtype back = dt == CR_DT_BF16 ? CR_DT_U16 : (cr_dtype)dt;
            CHECK(h.dtype == back && h.ndim == nd && !h.fortran_order && h.header_bytes == n);
            for (int i = 0; i < nd; i++)
                CHECK(h.shape[i] == shape[i]);
        }
    char small[32];
    int64_t s = 3;
    CHECK(cr_npy_write_header(small, sizeof small, CR_DT_F32, 1, &s) == 0);
}

/* The streaming copy (binary uploads into pinned staging) at every alignment of either side
 * and lengths around its 16-byte head and 64-byte body: each byte lands, none beyond. */
static void test_copy_streaming(void)
{
    static unsigned char src[512], dst[512 + 64];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 7 + 1);
    int bad = 0;
    for (size_t so = 0; so < 16; so++)
        for (size_t d_off = 0; d_off < 16; d_off++)
            for (size_t n = 0; n + so <= 300; n += n < 140 ? 1 : 37) {
                memset(dst, 0xEE, sizeof dst);
                cr_copy_streaming(dst + d_off, src + so, n);
                bad += memcmp(dst + d_off, src + so, n) != 0;
                for (size_t i = 0; i < sizeof dst; i++)
                    bad += (i < d_off || i >= d_off + n) && dst[i] != 0xEE;
            }
    CHECK_MSG(bad == 0, "streaming copy: %d wrong copies or bytes written outside", bad);
}

int main(void)
{
    test_good();
    test_bad();
    test_preamble();
    test_writer();
    test_copy_streaming();
    return check_summary("test_npy");
}
