#define _GNU_SOURCE
#include <linux/fscrypt.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <string.h>
#include <sys/ioctl.h>
#include "CFscrypt.h"

int protd_fscrypt_add_key(int mountfd, const uint8_t raw[64], uint8_t identifier[16]) {
    struct fscrypt_add_key_arg *request = calloc(1, sizeof *request + 64);
    if (request == NULL) return -1;
    request->key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
    request->raw_size = 64;
    memcpy(request->raw, raw, 64);
    int result = ioctl(mountfd, FS_IOC_ADD_ENCRYPTION_KEY, request);
    int saved = errno;
    if (result == 0) memcpy(identifier, request->key_spec.u.identifier, 16);
    explicit_bzero(request->raw, 64);
    free(request);
    errno = saved;
    return result;
}

int protd_fscrypt_set_policy(int dirfd, const uint8_t identifier[16]) {
    struct fscrypt_policy_v2 policy;
    memset(&policy, 0, sizeof policy);
    policy.version = FSCRYPT_POLICY_V2;
    policy.contents_encryption_mode = FSCRYPT_MODE_AES_256_XTS;
    policy.filenames_encryption_mode = FSCRYPT_MODE_AES_256_CTS;
    policy.flags = FSCRYPT_POLICY_FLAGS_PAD_32;
    memcpy(policy.master_key_identifier, identifier, 16);
    return ioctl(dirfd, FS_IOC_SET_ENCRYPTION_POLICY, &policy);
}

int protd_unshare_mounts(void) {
    if (unshare(CLONE_NEWNS) != 0) return -1;
    return mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL);
}
