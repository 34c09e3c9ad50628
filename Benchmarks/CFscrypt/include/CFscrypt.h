#ifndef CFSCRYPT_H
#define CFSCRYPT_H

#include <stdint.h>

/// Adds a 64-byte fscrypt master key to the file system holding `mountfd`
/// (FS_IOC_ADD_ENCRYPTION_KEY); writes its 16-byte identifier. 0, or -1 with errno.
int protd_fscrypt_add_key(int mountfd, const uint8_t raw[64], uint8_t identifier[16]);

/// Gives the empty directory `dirfd` a v2 policy under the key `identifier`:
/// AES-256-XTS contents, AES-256-CTS names (FS_IOC_SET_ENCRYPTION_POLICY). 0, or -1 with errno.
int protd_fscrypt_set_policy(int dirfd, const uint8_t identifier[16]);

/// Moves the calling thread into a mount namespace of its own whose mounts
/// do not propagate back (unshare(CLONE_NEWNS), then / made
/// MS_REC|MS_PRIVATE); mount from that thread and the processes it starts.
/// 0, or -1 with errno.
int protd_unshare_mounts(void);

#endif
