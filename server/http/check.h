/* crunchd --check URL: a tiny HTTP GET client for container health checks, so the image needs
 * no curl or wget. Plain http:// only; host:port/path; 2 s for the whole exchange. */
#ifndef CRUNCHD_CHECK_H
#define CRUNCHD_CHECK_H

/* Returns the process exit status: 0 when the answer's status is 2xx, 1 otherwise (bad URL,
 * no connection, timeout, non-2xx). One line on stderr says why when it is not 0. */
int cr_check_url(const char *url);

/* Splits "http://host[:port][/path]" (host may be a [v6] literal). Port defaults to 80, path to
 * "/". Returns 0, or -1 with a reason in err. Exposed for the unit tests. */
int cr_check_parse(const char *url, char *host, unsigned host_len, char *port, unsigned port_len,
                   const char **path, const char **err);

#endif
