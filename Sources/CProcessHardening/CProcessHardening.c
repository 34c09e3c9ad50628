#include <sys/prctl.h>
#include "CProcessHardening.h"

int protd_set_not_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}
