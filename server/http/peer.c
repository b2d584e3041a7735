/* A connection's peer; see peer.h. */
#include "server/http/peer.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static void read_credentials(int fd, cr_peer *out)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    out->uid = (uid_t)-1;
    out->pid = 0;
    if (fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof cred) {
        out->uid = cred.uid;
        out->pid = cred.pid;
    }
}

void cr_peer_from_addr(const struct sockaddr *sa, int fd, cr_peer *out)
{
    memset(out, 0, sizeof *out);
    if (sa && sa->sa_family == AF_UNIX) {
        out->is_unix = true;
        read_credentials(fd, out);
    } else if (sa && sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out->addr, sizeof out->addr);
    } else if (sa && sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out->addr, sizeof out->addr);
    }
}

void cr_peer_read(struct MHD_Connection *conn, cr_peer *out)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    const union MHD_ConnectionInfo *fd = sa && sa->sa_family == AF_UNIX
                                             ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD)
                                             : NULL;
    cr_peer_from_addr(sa, fd ? fd->connect_fd : -1, out);
}

void cr_peer_label(const cr_peer *p, char *out, size_t n)
{
    if (p->is_unix)
        snprintf(out, n, "unix:uid=%lld,pid=%lld", p->uid == (uid_t)-1 ? -1LL : (long long)p->uid,
                 (long long)p->pid);
    else
        snprintf(out, n, "%s", p->addr[0] ? p->addr : "-");
}

void cr_peer_client(const cr_peer *p, bool token, char *out, size_t n)
{
    if (token)
        snprintf(out, n, "token");
    else if (p->is_unix)
        snprintf(out, n, "uid:%lld", p->uid == (uid_t)-1 ? -1LL : (long long)p->uid);
    else
        snprintf(out, n, "ip:%s", p->addr);
}
