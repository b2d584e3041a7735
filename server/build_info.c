/* The binary's identity; see build_info.h. The Makefile passes the revision and the flags to
 * this file alone, so a new commit rebuilds one object, not the daemon. */
#include "server/build_info.h"

#include <stdio.h>
#include <string.h>

#include "kernels/backend.h"

#ifndef CRUNCHD_GIT_REV
#define CRUNCHD_GIT_REV "unknown"
#endif
#ifndef CRUNCHD_BUILD_FLAGS
#define CRUNCHD_BUILD_FLAGS "unknown"
#endif

/* CUDA encodes versions as 1000 * major + 10 * minor; 0 means none was found. */
static void cuda_version_text(int v, char *out, size_t n)
{
    if (v <= 0)
        snprintf(out, n, "none");
    else
        snprintf(out, n, "%d.%d", v / 1000, v % 1000 / 10);
}

void cr_build_info_get(cr_build_info *out)
{
    memset(out, 0, sizeof *out);
    out->version = CRUNCHD_VERSION;
    out->git_revision = CRUNCHD_GIT_REV;
    out->build_flags = CRUNCHD_BUILD_FLAGS;
    int runtime = 0, driver = 0;
#ifdef CRUNCHD_HAVE_CUDA
    out->cuda = true;
    out->cuda_toolkit = CRUNCHD_CUDA_VERSION;
    cr_backend_cuda.versions(&runtime, &driver);
#else
    out->cuda_toolkit = "none";
#endif
    cuda_version_text(runtime, out->cuda_runtime, sizeof out->cuda_runtime);
    cuda_version_text(driver, out->cuda_driver, sizeof out->cuda_driver);
}

int cr_build_info_print(FILE *out)
{
    cr_build_info b;
    cr_build_info_get(&b);
    fprintf(out, "crunchd %s\ngit revision: %s\nbuild flags: %s\n", b.version, b.git_revision,
            b.build_flags);
    if (b.cuda)
        fprintf(out, "cuda toolkit: %s\ncuda runtime: %s\ncuda driver: %s\n", b.cuda_toolkit,
                b.cuda_runtime, b.cuda_driver);
    else
        fprintf(out, "cuda: none (built without nvcc: cpu backend only)\n");
    return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}
