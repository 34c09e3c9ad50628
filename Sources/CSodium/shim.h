#ifndef PROTD_CSODIUM_SHIM_H
#define PROTD_CSODIUM_SHIM_H
/* The one place protd includes libsodium; Swift code sees it only as CSodium. */
#include <sodium.h>

/* AEGIS-256 arrived in libsodium 1.0.19 (library version 26.1); Debian 12's
   1.0.18 lacks it. These wrappers let protd build against either: without
   it they fail, and protd_aegis256_compiled_in says so, so no file is ever
   sealed or opened with it there. */
#if SODIUM_LIBRARY_VERSION_MAJOR > 26 || (SODIUM_LIBRARY_VERSION_MAJOR == 26 && SODIUM_LIBRARY_VERSION_MINOR >= 1)
#define PROTD_HAS_AEGIS256 1
#else
#define PROTD_HAS_AEGIS256 0
#endif

/* Whether this libsodium has AEGIS-256. */
static inline int protd_aegis256_compiled_in(void) { return PROTD_HAS_AEGIS256; }

/* Whether libsodium runs AEGIS-256 on AES instructions here (AES-NI on
   x86-64, the crypto extensions on ARMv8) rather than AES in software. */
static inline int protd_aegis256_has_aes_instructions(void) {
#if PROTD_HAS_AEGIS256
    return sodium_runtime_has_aesni() == 1 || sodium_runtime_has_armcrypto() == 1;
#else
    return 0;
#endif
}

/* crypto_aead_aegis256_encrypt (combined mode), or -1 without it. */
static inline int protd_aegis256_encrypt(unsigned char *c, const unsigned char *m, unsigned long long mlen,
                                         const unsigned char *ad, unsigned long long adlen,
                                         const unsigned char *npub, const unsigned char *k) {
#if PROTD_HAS_AEGIS256
    return crypto_aead_aegis256_encrypt(c, NULL, m, mlen, ad, adlen, NULL, npub, k);
#else
    (void)c; (void)m; (void)mlen; (void)ad; (void)adlen; (void)npub; (void)k;
    return -1;
#endif
}

/* crypto_aead_aegis256_decrypt (combined mode), or -1 without it. */
static inline int protd_aegis256_decrypt(unsigned char *m, const unsigned char *c, unsigned long long clen,
                                         const unsigned char *ad, unsigned long long adlen,
                                         const unsigned char *npub, const unsigned char *k) {
#if PROTD_HAS_AEGIS256
    return crypto_aead_aegis256_decrypt(m, NULL, NULL, c, clen, ad, adlen, npub, k);
#else
    (void)m; (void)c; (void)clen; (void)ad; (void)adlen; (void)npub; (void)k;
    return -1;
#endif
}
#endif
