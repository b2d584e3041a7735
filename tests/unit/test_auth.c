/* Unit tests for server/auth.c: token loading, exemptions, the header check, the comparison. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/http/auth.h"
#include "tests/unit/check.h"

static void write_file(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(text, 1, n, f) != n) {
        perror(path);
        exit(2);
    }
    fclose(f);
}

static void test_equal(void)
{
    CHECK(cr_auth_equal("abc", 3, "abc", 3));
    CHECK(!cr_auth_equal("abc", 3, "abd", 3));
    CHECK(!cr_auth_equal("abc", 3, "ab", 2));
    CHECK(!cr_auth_equal("ab", 2, "abc", 3));
    CHECK(!cr_auth_equal("", 0, "a", 1));
    CHECK(cr_auth_equal("", 0, "", 0));
    CHECK(!cr_auth_equal("abc\0", 4, "abc", 3)); /* a trailing NUL is not "the same" */
}

static void test_load_and_check(const char *dir)
{
    char path[512];
    char err[256];
    cr_auth a;
    snprintf(path, sizeof path, "%s/token", dir);

    write_file(path, "s3cret\r\n", 8);
    CHECK(cr_auth_load(&a, path, false, err, sizeof err) == 0);
    CHECK(a.enabled && a.len == 6 && strcmp(a.token, "s3cret") == 0);
    CHECK(cr_auth_check(&a, "Bearer s3cret"));
    CHECK(cr_auth_check(&a, "bearer s3cret"));
    CHECK(!cr_auth_check(&a, NULL));
    CHECK(!cr_auth_check(&a, "Bearer s3cre"));
    CHECK(!cr_auth_check(&a, "Bearer s3cret "));
    CHECK(!cr_auth_check(&a, "Basic s3cret"));
    CHECK(!cr_auth_check(&a, "s3cret"));
    CHECK(cr_auth_exempt(&a, "/healthz") && cr_auth_exempt(&a, "/readyz"));
    CHECK(cr_auth_exempt(&a, "/metrics"));
    CHECK(!cr_auth_exempt(&a, "/v1/gemm") && !cr_auth_exempt(&a, "/healthz/x"));
    cr_auth_clear(&a);
    CHECK(!a.enabled && a.token[0] == '\0');

    CHECK(cr_auth_load(&a, path, true, err, sizeof err) == 0);
    CHECK(!cr_auth_exempt(&a, "/metrics"));
    cr_auth_clear(&a);

    write_file(path, "\n", 1);
    CHECK(cr_auth_load(&a, path, false, err, sizeof err) == -1 && strstr(err, "empty"));
    write_file(path, "ab\0cd", 5);
    CHECK(cr_auth_load(&a, path, false, err, sizeof err) == -1 && strstr(err, "NUL"));
    char *big = malloc(CR_AUTH_TOKEN_MAX + 10);
    if (!big)
        exit(2);
    memset(big, 'x', CR_AUTH_TOKEN_MAX + 10);
    write_file(path, big, CR_AUTH_TOKEN_MAX + 10);
    free(big);
    CHECK(cr_auth_load(&a, path, false, err, sizeof err) == -1 && strstr(err, "longer"));
    unlink(path);
    CHECK(cr_auth_load(&a, path, false, err, sizeof err) == -1 && strstr(err, "--auth-token-file"));
    CHECK(!a.enabled);

    CHECK(cr_auth_load(&a, "", false, err, sizeof err) == 0 && !a.enabled);
    CHECK(cr_auth_check(&a, NULL) && cr_auth_exempt(&a, "/v1/gemm"));
}

int main(void)
{
    char dir[] = "/tmp/crunchd-auth-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    test_equal();
    test_load_and_check(dir);
    rmdir(dir);
    return check_summary("test_auth");
}
