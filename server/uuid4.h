/* Random (version 4) UUIDs for job and request ids, in libuuid's text form. libuuid's
 * uuid_generate_random makes six system calls per id (getpid, getppid, gettid, getuid and
 * getrandom, to reseed its fallback generator every time): two ids a request made those half of a
 * small request's system calls. Here each thread draws the kernel's random bytes 4 KiB at a time
 * (getrandom, 256 ids) and libuuid formats them. */
#ifndef CRUNCHD_UUID4_H
#define CRUNCHD_UUID4_H

/* 36 characters and a NUL, lower-case hex. */
void cr_uuid4(char out[37]);

#endif
