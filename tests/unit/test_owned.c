/* Unit tests of the owned-object lists (server/engine/owned.c): caps in all and per owner, holds
 * that defer a removed object's free, idle expiry, snapshots. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "server/engine/owned.h"

typedef struct {
    cr_owned node;
    char name[16];
} obj;

static int freed;

static void free_obj(cr_owned *o)
{
    freed++;
    free(o);
}

static cr_owned_list list = CR_OWNED_LIST(free_obj);

static obj *add(const char *name, const char *owner, uint64_t bytes, double now, cr_error *e)
{
    pthread_mutex_lock(&list.mu);
    obj *o = NULL;
    if (cr_owned_admit_locked(&list, owner, bytes, "x", e) == 0 && (o = calloc(1, sizeof *o))) {
        snprintf(o->name, sizeof o->name, "%s", name);
        snprintf(o->node.owner, sizeof o->node.owner, "%s", owner);
        o->node.name = o->name;
        o->node.byte_size = bytes;
        o->node.last_used = now;
        cr_owned_append_locked(&list, &o->node);
    }
    pthread_mutex_unlock(&list.mu);
    return o;
}

static void copy_name(const cr_owned *o, void *dst) { snprintf(dst, 16, "%s", o->name); }

int main(void)
{
    cr_owned_caps caps = {.max_bytes = 100, .owner_max_bytes = 60, .max_count = 3, .idle_s = 10,
                          .what = "tensor", .code = "tensor_limit", .max_flag = "--tensor-max-mb",
                          .owner_flag = "--tensor-client-max-mb"};
    cr_owned_set_caps(&list, &caps);
    cr_error e;
    CHECK(add("a", "ip:1", 50, 0, &e) && add("b", "ip:2", 20, 0, &e));
    CHECK(!add("c", "ip:1", 20, 0, &e) && e.http == 507 && !strcmp(e.code, "tensor_limit") &&
          strstr(e.message, "--tensor-client-max-mb"));
    CHECK(!add("c", "ip:3", 40, 0, &e) && e.http == 507 && strstr(e.message, "--tensor-max-mb"));
    CHECK(!add("c", "ip:3", 101, 0, &e) && e.http == 413);
    CHECK(add("c", "ip:3", 10, 5, &e) && !add("d", "ip:4", 0, 0, &e) && e.http == 507); /* count */
    /* removed while held: out of the list at once, freed at the last release */
    pthread_mutex_lock(&list.mu);
    cr_owned *a = cr_owned_find_locked(&list, "a"), *now = NULL;
    cr_owned_hold_locked(a);
    cr_owned_remove_locked(&list, a, &now);
    pthread_mutex_unlock(&list.mu);
    CHECK(now == NULL && !cr_owned_exists(&list, "a") && freed == 0);
    uint64_t n, bytes;
    cr_owned_usage(&list, &n, &bytes);
    CHECK(n == 2 && bytes == 30);
    cr_owned_release(&list, a, 1);
    CHECK(freed == 1);
    /* a held object is not unregistered; idle ones expire, used ones do not */
    pthread_mutex_lock(&list.mu);
    cr_owned_hold_locked(cr_owned_find_locked(&list, "b"));
    pthread_mutex_unlock(&list.mu);
    CHECK(cr_owned_unregister(&list, "b") == 1);
    CHECK(cr_owned_sweep(&list, NULL, 12) == 0);  /* b held; c last used at 5 */
    CHECK(cr_owned_sweep(&list, NULL, 15) == 1 && freed == 2 && !cr_owned_exists(&list, "c"));
    char *names;
    size_t k;
    CHECK(cr_owned_snapshot(&list, NULL, 16, copy_name, (void **)&names, &k) == 0 && k == 1 && !strcmp(names, "b"));
    free(names);
    uint64_t created, expired;
    cr_owned_counters(&list, &created, &expired);
    CHECK(created == 3 && expired == 1);
    cr_owned_clear(&list);
    CHECK(freed == 3);
    return check_summary("owned");
}
