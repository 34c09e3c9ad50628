#ifndef PROTD_MALLOC_TUNING_H
#define PROTD_MALLOC_TUNING_H
/*
 * mallopt(3) is declared in <malloc.h>, which Swift's Glibc module does not
 * export; this wraps the one use.
 */

/* mallopt(M_ARENA_MAX, arenas) on glibc: at most `arenas` malloc arenas,
 * shared by all threads. Call before other threads start. 0 on success, -1
 * if glibc refused; 0 without doing anything on other C libraries. */
int protd_limit_malloc_arenas(int arenas);

#endif
