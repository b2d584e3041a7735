/* Daemon configuration: flags, each with a CRUNCHD_* environment variable. */
#ifndef CRUNCHD_CONFIG_H
#define CRUNCHD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    int port;
    char bind[64];            /* an address, or "none": no TCP listener (--unix-socket only) */
    char port_file[256];
    int grpc_port;            /* KServe v2 gRPC; 0: off; -1: any free port (--grpc-port-file says which) */
    char grpc_bind[64];       /* "": --bind's address */
    char grpc_port_file[256];
    char grpc_unix_socket[108]; /* gRPC on this Unix socket too (sun_path's size); "": no */
    int grpc_threads;         /* the gRPC listener's event loops; 0: as many as the HTTP threads */
    bool reuse_port;          /* SO_REUSEPORT: only when asked, so a busy port fails start-up */
    char backend[8];          /* cpu | cuda | auto */
    int workers;              /* per device; 0: sized from the machine (server/machine.c) */
    int queue_depth;          /* 0: sized from the workers */
    int http_threads;         /* 0: sized from the machine */
    int batch_max;            /* jobs one launch may serve; 0: no batching; -1: sized */
    int batch_delay_us;       /* how long a batchable job may wait for partners */
    char batch_preferred[64]; /* "8,16,32": batch sizes to prefer (Triton's preferred_batch_size) */
    int64_t host_max_flops;   /* auto jobs of at most this work run on the HTTP thread; 0: none */
    int64_t host_max_values;  /* histograms of at most this many values plus bins likewise */
    int max_connections;
    int max_connections_per_ip; /* 0: no limit; -1 until loaded: half of max_connections */
    int conn_memory_kb;
    int conn_timeout_s;
    int read_timeout_s;       /* headers due within this of a connection's start or last answer */
    int min_body_rate_kbs;    /* then the body at no less than this */
    int64_t max_body_mb;
    int64_t max_json_mb;
    int64_t max_elements;
    int max_bins;
    int64_t max_stack;
    int64_t job_timeout_ms;
    int result_ttl_s;
    int64_t result_cap_mb;    /* finished async results kept, in bytes of result data */
    int64_t max_memory_mb;    /* the memory budget (server/memory.h); 0: sized from the machine */
    bool max_memory_auto;     /* set by sizing: the budget follows the machine's memory as it grows */
    int64_t shm_max_mb;       /* shared memory registered at once, charged to the budget;
                                 0: half the memory budget */
    int64_t shm_client_max_mb;/* of which one client (token, IP address or uid); 0: a quarter */
    int shm_idle_s;           /* regions unused this long are unregistered; 0: never */
    int64_t tensor_max_mb;    /* resident tensors per device; 0: half a GPU's memory, cpu: 1/4 budget */
    int64_t tensor_client_max_mb; /* of which one client's; 0: half of tensor_max_mb */
    int tensor_idle_s;        /* tensors unused this long are freed; 0: never */
    int stream_idle_s;        /* an open stream with no part this long fails stream_idle; 0: never */
    int64_t stream_max_mb;    /* accumulators of open streams; 0: a quarter of the memory budget */
    int stream_max;           /* open streams at once */
    char instance_name[128];  /* this replica, in answers; "" until start: the host name */
    int drain_timeout_s;
    char log_format[8];       /* text | json */
    char access_log[8];       /* all | errors | off */
    char gpu_wait[8];         /* yield | spin | block: how a worker waits for its GPU */
    int gzip_level;           /* zlib level of compressed answers; 0: never compress */
    char cors_origin[1024];   /* allowed browser origins, comma-separated; empty: CORS off */
    char auth_token_file[256];
    bool metrics_auth;
    bool no_ui;               /* no page at GET / (server/http/ui.c) */
    char tls_cert[256], tls_key[256];
    char unix_socket[108];    /* also serve on this Unix socket (sun_path's size); "": no */
    char unix_socket_mode[8]; /* octal text, as given */
    char unix_socket_group[64]; /* a group name or gid; "": the daemon's */
    unsigned unix_mode;       /* unix_socket_mode parsed */
    int direct_min_kb;        /* binary uploads this big skip libmicrohttpd (unix, TCP without TLS); 0: never */
    char auto_cache[256];      /* keep the auto table in this file between starts; "": measure each start */
    char tls_priorities[256];  /* GnuTLS priority string; "": server/http/tls.h's default */
    bool test_hooks;
    uint64_t given;           /* a bit per option set by a flag or its variable (config.c) */
} cr_config;

/* Whether a TCP listener was asked for (--bind none: only --unix-socket). */
bool cr_config_tcp(const cr_config *c);


/* Defaults, then environment, then flags, then the defaults that follow other limits. Returns 0
 * to run, 1 when --help was printed, 2 when --version was asked for, -1 on a bad flag or value
 * (message written to `err`). */
int cr_config_load(cr_config *c, int argc, char **argv, FILE *err);
void cr_config_usage(FILE *out);
/* Whether the option (its flag's name, "max-body-mb") was set by a flag or its variable. */
bool cr_config_given(const cr_config *c, const char *flag);
/* --batch-preferred as numbers (up to max of them into sizes, which may be NULL): how many there
 * are, -1 when malformed. */
int cr_config_preferred(const cr_config *c, int *sizes, int max);

#endif
