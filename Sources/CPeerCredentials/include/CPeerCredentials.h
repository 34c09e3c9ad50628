#ifndef PROTD_PEER_CREDENTIALS_H
#define PROTD_PEER_CREDENTIALS_H
/*
 * glibc hides `struct ucred` unless _GNU_SOURCE is defined, so protd
 * declares the same layout here for getsockopt(SOL_SOCKET, SO_PEERCRED).
 */
#include <stdint.h>

typedef struct {
    int32_t pid;
    uint32_t uid;
    uint32_t gid;
} protd_ucred;

/* SO_PEERGROUPS fills this with the peer's supplementary groups, sorted ascending. */
#define PROTD_MAX_PEER_GROUPS 256
typedef struct {
    uint32_t gids[PROTD_MAX_PEER_GROUPS];
} protd_peer_groups;

static const int protd_so_peercred = 17;   /* SO_PEERCRED on Linux */
static const int protd_so_peergroups = 59; /* SO_PEERGROUPS on Linux */
static const int protd_so_cookie = 57;     /* SO_COOKIE on Linux: a socket's unique 64-bit id */

#endif
