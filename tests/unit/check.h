/* A minimal test harness: CHECK counts, prints failures with their line, and check_summary
 * prints "NAME: N passed, M failed" and gives the exit code. */
#ifndef CRUNCHD_CHECK_H
#define CRUNCHD_CHECK_H

#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (cond)                                                                    \
            check_passed++;                                                          \
        else {                                                                       \
            check_failed++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

/* CHECK with a printf-style message saying what was expected and what came instead. */
#define CHECK_MSG(cond, ...)                                                         \
    do {                                                                             \
        if (cond)                                                                    \
            check_passed++;                                                          \
        else {                                                                       \
            check_failed++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: ", __FILE__, __LINE__);            \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

static inline int check_summary(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
