/* Unit tests for the header values the daemon takes from clients: X-Request-Id
 * (server/http/request_id.c) and the --cors-origin list and Origin matching (server/http/cors.c). */
#include <stdio.h>
#include <string.h>

#include "server/http/cors.h"
#include "server/http/request_id.h"
#include "tests/unit/check.h"

static void test_request_id(void)
{
    char long_ok[129], too_long[130];
    memset(long_ok, 'a', 128), long_ok[128] = '\0';
    memset(too_long, 'a', 129), too_long[129] = '\0';
    const char *good[] = {"a", "0f1e", "trace:abc.123_x-y", "6f1c0a3e-1b2c-4d5e-8f90-123456789abc", long_ok, NULL};
    const char *bad[] = {"", " ", "a b", "a\nb", "a\rb", "a\tb", "\x7f", "é", "a/b", "a\"b", "a;b", too_long, NULL};
    for (int i = 0; good[i]; i++)
        CHECK_MSG(cr_request_id_valid(good[i]), "'%s' should be valid", good[i]);
    for (int i = 0; bad[i]; i++)
        CHECK_MSG(!cr_request_id_valid(bad[i]), "'%s' should be invalid", bad[i]);
    CHECK(!cr_request_id_valid(NULL));

    char out[CR_REQUEST_ID_MAX + 1], again[CR_REQUEST_ID_MAX + 1];
    CHECK(cr_request_id_take("client-7", out) == 0 && strcmp(out, "client-7") == 0);
    CHECK(cr_request_id_take(long_ok, out) == 0 && strcmp(out, long_ok) == 0);
    CHECK(cr_request_id_take(NULL, out) == 0 && strlen(out) == 36 && out[14] == '4' && cr_request_id_valid(out));
    CHECK(cr_request_id_take(NULL, again) == 0 && strcmp(out, again) != 0);
    CHECK(cr_request_id_take("bad\x01id", out) == -1 && strlen(out) == 36 && cr_request_id_valid(out));
}

static void test_cors(void)
{
    cr_cors c;
    char err[256] = "";
    CHECK(cr_cors_load(&c, "", err, sizeof err) == 0 && !c.enabled);
    CHECK(!cr_cors_allows(&c, "https://a.example"));
    CHECK(cr_cors_load(&c, NULL, err, sizeof err) == 0 && !c.enabled);

    CHECK(cr_cors_load(&c, "https://app.example, http://localhost:3000/", err, sizeof err) == 0);
    CHECK(c.enabled && !c.any && c.n == 2);
    CHECK(cr_cors_allows(&c, "https://app.example"));
    CHECK(cr_cors_allows(&c, "HTTPS://APP.example"));
    CHECK(cr_cors_allows(&c, "http://localhost:3000"));
    CHECK(!cr_cors_allows(&c, "http://localhost:3001"));
    CHECK(!cr_cors_allows(&c, "http://app.example"));
    CHECK(!cr_cors_allows(&c, "https://app.example.evil"));
    CHECK(!cr_cors_allows(&c, "null"));
    CHECK(!cr_cors_allows(&c, NULL));
    CHECK(!cr_cors_allows(&c, ""));

    CHECK(cr_cors_load(&c, "*", err, sizeof err) == 0 && c.enabled && c.any);
    CHECK(cr_cors_allows(&c, "https://anything.example") && !cr_cors_allows(&c, NULL));

    const char *bad[] = {"app.example", "ftp://x", "https://", "https://a/b", "https://a b", "https://u@a", NULL};
    for (int i = 0; bad[i]; i++) {
        err[0] = '\0';
        CHECK_MSG(cr_cors_load(&c, bad[i], err, sizeof err) < 0 && strstr(err, "--cors-origin"), "'%s' accepted (%s)",
                  bad[i], err);
    }
    char many[1024] = "";
    for (int i = 0; i < CR_CORS_MAX_ORIGINS + 1; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%shttp://h%d", i ? "," : "", i);
    CHECK(cr_cors_load(&c, many, err, sizeof err) < 0 && strstr(err, "more than"));
}

int main(void)
{
    test_request_id();
    test_cors();
    return check_summary("http_headers");
}
