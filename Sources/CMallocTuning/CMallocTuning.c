/* Any C library header defines __GLIBC__ on glibc; it must come first. */
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include "CMallocTuning.h"

int protd_limit_malloc_arenas(int arenas) {
#ifdef __GLIBC__
    return mallopt(M_ARENA_MAX, arenas) == 1 ? 0 : -1;
#else
    (void)arenas;
    return 0;
#endif
}
