/* Unit tests for server/http/conn_limits.c: the acceptor's --max-connections and
 * --max-connections-per-ip counts (a total, a count per IPv4/IPv6 address, none for Unix peers),
 * released connections making room again, and entries gone once an address has none open. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/un.h>

#include "server/http/conn_limits.h"
#include "tests/unit/check.h"

static struct sockaddr_storage v4(const char *ip, unsigned short port)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    inet_pton(AF_INET, ip, &a->sin_addr);
    return ss;
}

static struct sockaddr_storage v6(const char *ip)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, ip, &a->sin6_addr);
    return ss;
}

#define SA(ss) ((const struct sockaddr *)&(ss))

static void test_per_address_and_total(void)
{
    cr_conn_limits l;
    cr_conn_limits_init(&l, 5, 2);
    struct sockaddr_storage a1 = v4("10.0.0.1", 1000), a1b = v4("10.0.0.1", 2000), b = v4("10.0.0.2", 1000);
    struct sockaddr_storage c = v6("::1"), c2 = v6("::2");
    CHECK(cr_conn_limits_take(&l, SA(a1)) == CR_ADMIT);
    CHECK(cr_conn_limits_take(&l, SA(a1b)) == CR_ADMIT); /* the port is not the address */
    CHECK(cr_conn_limits_take(&l, SA(a1)) == CR_IP_FULL);
    CHECK(cr_conn_limits_take(&l, SA(b)) == CR_ADMIT);
    CHECK(cr_conn_limits_take(&l, SA(c)) == CR_ADMIT);
    CHECK(l.total == 4);
    CHECK(cr_conn_limits_room(&l));
    CHECK(cr_conn_limits_take(&l, SA(c2)) == CR_ADMIT);
    CHECK(!cr_conn_limits_room(&l));
    CHECK(cr_conn_limits_take(&l, SA(b)) == CR_FULL); /* the total first, though b has room */
    cr_conn_limits_release(&l, SA(a1));
    CHECK(cr_conn_limits_room(&l));
    CHECK(cr_conn_limits_take(&l, SA(a1b)) == CR_ADMIT); /* a1's slot again */
    cr_conn_limits_release(&l, SA(c2));
    CHECK(cr_conn_limits_take(&l, SA(c)) == CR_ADMIT);
    CHECK(cr_conn_limits_take(&l, SA(c)) == CR_FULL);
    cr_conn_limits_release(&l, SA(a1));
    CHECK(cr_conn_limits_take(&l, SA(c)) == CR_IP_FULL);
    cr_conn_limits_destroy(&l);
}

static void test_entries_go_and_unix_peers_count_only_in_the_total(void)
{
    cr_conn_limits l;
    cr_conn_limits_init(&l, 1000, 1);
    struct sockaddr_un u = {.sun_family = AF_UNIX};
    for (int i = 0; i < 3; i++)
        CHECK(cr_conn_limits_take(&l, (const struct sockaddr *)&u) == CR_ADMIT);
    char ip[32];
    for (int i = 0; i < 600; i++) { /* more addresses than buckets: chains */
        snprintf(ip, sizeof ip, "192.168.%d.%d", i / 250, i % 250);
        struct sockaddr_storage a = v4(ip, 1);
        CHECK_MSG(cr_conn_limits_take(&l, SA(a)) == CR_ADMIT, "%s", ip);
        CHECK_MSG(cr_conn_limits_take(&l, SA(a)) == CR_IP_FULL, "%s", ip);
    }
    CHECK(l.total == 603);
    for (int i = 0; i < 600; i++) {
        snprintf(ip, sizeof ip, "192.168.%d.%d", i / 250, i % 250);
        struct sockaddr_storage a = v4(ip, 1);
        cr_conn_limits_release(&l, SA(a));
    }
    int entries = 0;
    for (int i = 0; i < CR_CONN_LIMITS_BUCKETS; i++)
        entries += l.bucket[i] != NULL;
    CHECK_MSG(entries == 0, "%d buckets still hold an address with no connection", entries);
    CHECK(l.total == 3);
    for (int i = 0; i < 5; i++) /* more releases than takes (libmicrohttpd's own, before quiesce) */
        cr_conn_limits_release(&l, (const struct sockaddr *)&u);
    CHECK(l.total == 0);
    cr_conn_limits_destroy(&l);
}

static void test_no_per_address_limit(void)
{
    cr_conn_limits l;
    cr_conn_limits_init(&l, 3, 0);
    struct sockaddr_storage a = v4("127.0.0.1", 5);
    for (int i = 0; i < 3; i++)
        CHECK(cr_conn_limits_take(&l, SA(a)) == CR_ADMIT);
    CHECK(cr_conn_limits_take(&l, SA(a)) == CR_FULL);
    cr_conn_limits_destroy(&l);
}

int main(void)
{
    test_per_address_and_total();
    test_entries_go_and_unix_peers_count_only_in_the_total();
    test_no_per_address_limit();
    return check_summary("test_conn_limits");
}
