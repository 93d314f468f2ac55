#ifndef CHRONICLE_CSPAWN_SHIM_H
#define CHRONICLE_CSPAWN_SHIM_H
// glibc's posix_spawn (libc6-dev), for ChronicleTesting.ChildProcess.
#include <spawn.h>

// glibc 2.34+: the child closes every descriptor from `from` up before it runs the program.
// Declared behind _GNU_SOURCE in <spawn.h>, which the Swift Glibc module is built without.
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
// A pipe whose ends are close-on-exec from the start (<unistd.h>, also behind _GNU_SOURCE).
extern int pipe2(int pipefd[2], int flags);
#endif
