/* Log lines with strings a client chose: escaped for each format (server/obs/log.c), so a JSON
 * line stays one object with our keys and a text line stays one printable line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "server/obs/log.h"

/* What cr_log_req (or cr_log, when r is NULL) writes for r, in the given format. */
static void capture(bool json, const cr_log_request *r, const char *msg, char *out, size_t n)
{
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);
    fflush(stderr);
    dup2(fileno(tmp), STDERR_FILENO);
    cr_log_init(json, CR_ACCESS_LOG_ALL);
    if (r)
        cr_log_req(r);
    else
        cr_log("info", "region '%s'", msg);
    cr_log_flush(); /* access lines are gathered per thread */
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t k = fread(out, 1, n - 1, tmp);
    out[k] = '\0';
    fclose(tmp);
}

static int count(const char *s, char c)
{
    int n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

static bool printable_line(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + 1 < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return n > 0 && s[n - 1] == '\n';
}

static void test_request_line(void)
{
    char out[8192];
    cr_log_request r = {.method = "G\"E\\T", .path = "/x\n2026 info forged\",\"status\":200,\"a\":\"\x1b[31m\xff",
                        .status = 404, .ms = 1.0, .error_code = "not_found"};
    capture(true, &r, NULL, out, sizeof out);
    CHECK_MSG(printable_line(out), "json line: %s", out);
    CHECK(strstr(out, "\"method\":\"G\\\"E\\\\T\"") != NULL);
    CHECK(strstr(out, "/x\\u000a2026 info forged\\\",\\\"status\\\":200,\\\"a\\\":\\\"\\u001b[31m\\u00ff\"") != NULL);
    CHECK_MSG(strstr(out, "\"status\":404") != NULL && count(out, '\n') == 1, "%s", out);
    capture(false, &r, NULL, out, sizeof out);
    CHECK_MSG(printable_line(out) && count(out, '\n') == 1, "text line: %s", out);
    CHECK_MSG(strstr(out, " G\"E\\\\T /x\\x0a2026\\x20info\\x20forged\",\"status\":200,\"a\":\"\\x1b[31m\\xff 404 ") != NULL,
              "%s", out);
}

static void test_message(void)
{
    char out[8192];
    capture(false, NULL, "a\nb\x07 c", out, sizeof out);
    CHECK_MSG(printable_line(out) && strstr(out, "region 'a\\x0ab\\x07 c'") != NULL, "%s", out);
    capture(true, NULL, "a\"b", out, sizeof out);
    CHECK_MSG(strstr(out, "\"msg\":\"region 'a\\\"b'\"}") != NULL, "%s", out);
}

int main(void)
{
    test_request_line();
    test_message();
    return check_summary("test_log");
}
