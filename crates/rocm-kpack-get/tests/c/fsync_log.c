/* Preloaded into kpack-get by the durability tests: logs every fsync and
 * fdatasync as "fsync PATH" (the file's name at the moment of the call) to
 * the file named by KPACK_TEST_FSYNC_LOG, then does the real call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void log_sync(int fd) {
    const char *log = getenv("KPACK_TEST_FSYNC_LOG");
    if (log == NULL) {
        return;
    }
    char link[64];
    char path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, path, sizeof path - 1);
    if (length < 0) {
        return;
    }
    path[length] = '\0';
    char line[4200];
    int size = snprintf(line, sizeof line, "fsync %s\n", path);
    int out = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (out < 0) {
        return;
    }
    if (write(out, line, (size_t)size) < 0) {
        /* The log is best effort; the test sees what is missing. */
    }
    close(out);
}

int fsync(int fd) {
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    log_sync(fd);
    return real(fd);
}

int fdatasync(int fd) {
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    log_sync(fd);
    return real(fd);
}
