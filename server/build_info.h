/* What this binary is: version, git revision, build flags and, in a CUDA build, the toolkit it
 * was compiled with and the runtime and driver it finds. One record for `crunchd --version` and
 * GET /v1/info, so the two cannot disagree. */
#ifndef CRUNCHD_BUILD_INFO_H
#define CRUNCHD_BUILD_INFO_H

#include <stdbool.h>
#include <stdio.h>

typedef struct {
    const char *version;       /* VERSION */
    const char *git_revision;  /* git describe --always --dirty at build time, or "unknown" */
    const char *build_flags;   /* compiler, flags, sanitizers, nvcc and its arch */
    bool cuda;                 /* built with the CUDA backend */
    const char *cuda_toolkit;  /* the nvcc release it was built with; "none" */
    char cuda_runtime[16];     /* the libcudart it runs with, "12.8"; "none" */
    char cuda_driver[16];      /* the highest CUDA version the driver supports; "none" when no driver */
} cr_build_info;

void cr_build_info_get(cr_build_info *out);
/* The --version text: one "name: value" line each. -1 when out could not be written. */
int cr_build_info_print(FILE *out);

#endif
