#ifndef PROTD_PROCESS_HARDENING_H
#define PROTD_PROCESS_HARDENING_H
/*
 * prctl(2) is variadic, which Swift cannot call; this wraps the one use.
 */

/* prctl(PR_SET_DUMPABLE, 0): no core dump, no ptrace or /proc/PID/mem
 * access by other processes of the same user. 0 on success, else -1 and errno. */
int protd_set_not_dumpable(void);

#endif
