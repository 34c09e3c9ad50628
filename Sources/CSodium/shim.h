#ifndef PROTD_CSODIUM_SHIM_H
#define PROTD_CSODIUM_SHIM_H
/* The one place protd includes libsodium; Swift code sees it only as CSodium. */
#include <sodium.h>
#endif
