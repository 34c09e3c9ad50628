#include "CFileSystemType.h"

#include <sys/vfs.h>

int protd_file_system_type(int fd, unsigned long *type) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return -1;
    *type = (unsigned long)info.f_type;
    return 0;
}
