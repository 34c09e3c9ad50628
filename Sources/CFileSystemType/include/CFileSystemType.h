#ifndef PROTD_FILE_SYSTEM_TYPE_H
#define PROTD_FILE_SYSTEM_TYPE_H
/*
 * Swift's Glibc module leaves out <sys/vfs.h>, so fstatfs(2) is wrapped here.
 */

/* The type (f_type, a magic number from linux/magic.h) of the file system
 * holding the open file `fd`. 0 on success, else -1 and errno. */
int protd_file_system_type(int fd, unsigned long *type);

#endif
