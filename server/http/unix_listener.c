/* The Unix socket of --unix-socket; see unix_listener.h. */
#include "server/http/unix_listener.h"

#include <errno.h>
#include <grp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int fail(char *err, size_t errlen, const char *fmt, const char *path, int e)
{
    snprintf(err, errlen, fmt, path, strerror(e));
    return -1;
}

static int make_addr(const char *path, struct sockaddr_un *sa, char *err, size_t errlen)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (!path[0] || strlen(path) >= sizeof sa->sun_path) {
        snprintf(err, errlen, "--unix-socket: a path of 1 to %zu bytes, got %zu", sizeof sa->sun_path - 1,
                 strlen(path));
        return -1;
    }
    memcpy(sa->sun_path, path, strlen(path) + 1);
    return 0;
}

/* Whether a daemon answers on the socket file at sa: refused means its owner is gone. */
static int probe_live(const struct sockaddr_un *sa, bool *live, char *err, size_t errlen)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail(err, errlen, "--unix-socket %s: socket(): %s", sa->sun_path, errno);
    int rc = connect(fd, (const struct sockaddr *)sa, sizeof *sa);
    int e = errno;
    close(fd);
    *live = rc == 0;
    if (rc == 0 || e == ECONNREFUSED)
        return 0;
    return fail(err, errlen, "--unix-socket %s: cannot tell whether a daemon listens on it: %s", sa->sun_path, e);
}

/* A leftover file of a daemon that died without unlinking it goes; anything else stays. */
static int clear_stale(const struct sockaddr_un *sa, char *err, size_t errlen)
{
    struct stat st;
    const char *path = sa->sun_path;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : fail(err, errlen, "--unix-socket %s: %s", path, errno);
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "--unix-socket %s: the path exists and is not a socket; not replacing it", path);
        return -1;
    }
    bool live = false;
    if (probe_live(sa, &live, err, errlen) < 0)
        return -1;
    if (live) {
        snprintf(err, errlen, "--unix-socket %s: another daemon is listening on it (stop it, or pick another path)",
                 path);
        return -1;
    }
    if (unlink(path) != 0 && errno != ENOENT)
        return fail(err, errlen, "--unix-socket %s: cannot remove the stale socket: %s", path, errno);
    return 0;
}

/* A group name or a numeric gid. */
static int parse_group(const char *group, gid_t *gid, char *err, size_t errlen)
{
    char *end = NULL;
    unsigned long v = strtoul(group, &end, 10);
    if (end != group && !*end) {
        *gid = (gid_t)v;
        return 0;
    }
    struct group gr, *found = NULL;
    char buf[4096];
    int rc = getgrnam_r(group, &gr, buf, sizeof buf, &found);
    if (rc != 0 || !found) {
        snprintf(err, errlen, "--unix-socket-group: no group '%s'%s%s", group, rc ? ": " : "", rc ? strerror(rc) : "");
        return -1;
    }
    *gid = found->gr_gid;
    return 0;
}

/* Mode and group are set before listen(): until then a connect() is refused, so no client can
 * slip in while the file still has the umask's permissions. */
static int set_access(const char *path, unsigned mode, const char *group, char *err, size_t errlen)
{
    if (chmod(path, (mode_t)mode) != 0)
        return fail(err, errlen, "--unix-socket-mode on %s: %s", path, errno);
    if (!group[0])
        return 0;
    gid_t gid;
    if (parse_group(group, &gid, err, errlen) < 0)
        return -1;
    if (chown(path, (uid_t)-1, gid) != 0) {
        int e = errno;
        snprintf(err, errlen, "--unix-socket-group %s on %s: %s (the daemon must belong to the group)", group,
                 path, strerror(e));
        return -1;
    }
    return 0;
}

int cr_unix_listen(cr_unix_socket *s, const char *path, unsigned mode, const char *group, int backlog,
                   char *err, size_t errlen)
{
    struct sockaddr_un sa;
    struct stat st;
    memset(s, 0, sizeof *s);
    s->fd = -1;
    if (make_addr(path, &sa, err, errlen) < 0 || clear_stale(&sa, err, errlen) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail(err, errlen, "--unix-socket %s: socket(): %s", path, errno);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fail(err, errlen, "--unix-socket %s: cannot bind: %s", path, errno);
        goto fail_fd;
    }
    snprintf(s->path, sizeof s->path, "%s", path);
    if (stat(path, &st) != 0) {
        fail(err, errlen, "--unix-socket %s: %s", path, errno);
        goto fail_file;
    }
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    if (set_access(path, mode, group, err, errlen) < 0)
        goto fail_file;
    if (listen(fd, backlog) != 0) {
        fail(err, errlen, "--unix-socket %s: listen(): %s", path, errno);
        goto fail_file;
    }
    s->fd = fd;
    return 0;
fail_file:
    cr_unix_remove(s);
fail_fd:
    close(fd);
    return -1;
}

void cr_unix_remove(cr_unix_socket *s)
{
    struct stat st;
    if (!s->path[0])
        return;
    if (stat(s->path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino)
        unlink(s->path);
    s->path[0] = '\0';
}
