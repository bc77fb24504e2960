// malloc and calloc on 64 bytes, for a program run with LD_PRELOAD: the allocation experiment of
// benchmarks/accuracy/README.md ("Aligned buffers"). Build: gcc -O2 -shared -fPIC align64_preload.c -o align64_preload.so
#define _GNU_SOURCE
#include <stddef.h>
#include <string.h>
extern void* __libc_memalign(size_t, size_t);
void* malloc(size_t n) { return __libc_memalign(64, n ? n : 1); }
void* calloc(size_t a, size_t b) { size_t n = a * b; void* p = __libc_memalign(64, n ? n : 1); if (p) memset(p, 0, n); return p; }
