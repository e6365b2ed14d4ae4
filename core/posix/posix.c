/*
 * Process starts and device nodes for the daemon without forking it (see core/spawn.ts for why), as a
 * Node-API addon built by scripts/build-native.sh.
 *
 * exitPipe() -> [readFd, writeFd]: where the threads below report exits (O_CLOEXEC, both ends).
 * spawn(file, argv, envp, cwd, stdio, detached, exitFd, tag) -> [pid, pidfd, ...fds]
 *   glibc's posix_spawn starts the child from a clone that shares the daemon's memory until the exec, so no page
 *   of the daemon becomes copy-on-write. stdio holds, per child fd, -1 (a socket pair, whose other end comes
 *   back in fds, in order), -2 (/dev/null) or -3 (the daemon's own fd of that number). Every other fd is closed
 *   in the child. A thread per child waits for it, then writes { int32 tag, int32 wait status } to exitFd in
 *   one write (atomic in a pipe). It touches nothing of Node's, so it may outlive the daemon's JavaScript.
 *   The pidfd (close-on-exec) names that very process, even once its pid is reaped and reused.
 * signal(pidfd, signo) -> whether it was sent (false once the process has ended).
 * mknod(path, type, mode, major, minor): type is 'c', 'b' or 'p'; the mode is then set exactly, umask aside.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <node_api.h>

#define MAX_STDIO 8
#define ULONG_BITS (8 * sizeof(unsigned long))
#define STDIO_PAIR (-1)
#define STDIO_NULL (-2)
#define STDIO_INHERIT (-3)

#define CHECK(call) do { if ((call) != napi_ok) { throw_failed(env); return NULL; } } while (0)

/* A failed Node-API call (an argument of the wrong type) as an exception, unless one is pending already. */
static void throw_failed(napi_env env) {
    bool pending = false;
    const napi_extended_error_info *info = NULL;
    if (napi_is_exception_pending(env, &pending) != napi_ok || pending) return;
    napi_get_last_error_info(env, &info);
    napi_throw_type_error(env, NULL, info && info->error_message ? info->error_message : "invalid argument");
}

static napi_value throw_errno(napi_env env, int err, const char *syscall, const char *what) {
    char msg[512];
    const char *name = strerrorname_np(err) ? strerrorname_np(err) : "EUNKNOWN";
    snprintf(msg, sizeof msg, "%s %s %s: %s", syscall, what, name, strerror(err));
    napi_value code, message, error;
    if (napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code) != napi_ok
        || napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message) != napi_ok
        || napi_create_error(env, code, message, &error) != napi_ok) {
        throw_failed(env);
        return NULL;
    }
    napi_value errnoValue;
    if (napi_create_int32(env, -err, &errnoValue) == napi_ok) napi_set_named_property(env, error, "errno", errnoValue);
    napi_value sys;
    if (napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &sys) == napi_ok) napi_set_named_property(env, error, "syscall", sys);
    napi_throw(env, error);
    return NULL;
}

/* A JS string as a malloc'd C string, or NULL. */
static char *string_arg(napi_env env, napi_value v) {
    size_t len;
    if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) return NULL;
    char *s = malloc(len + 1);
    if (s && napi_get_value_string_utf8(env, v, s, len + 1, &len) != napi_ok) { free(s); return NULL; }
    return s;
}

static void free_strings(char **list) {
    if (!list) return;
    for (char **p = list; *p; p++) free(*p);
    free(list);
}

/* A JS array of strings as a NULL-terminated malloc'd list, or NULL. */
static char **string_list(napi_env env, napi_value array) {
    uint32_t n;
    if (napi_get_array_length(env, array, &n) != napi_ok) return NULL;
    char **list = calloc((size_t)n + 1, sizeof *list);
    if (!list) return NULL;
    for (uint32_t i = 0; i < n; i++) {
        napi_value item;
        if (napi_get_element(env, array, i, &item) != napi_ok || !(list[i] = string_arg(env, item))) { free_strings(list); return NULL; }
    }
    return list;
}

/* What a waiting thread needs; it frees this itself. */
struct waiter {
    pid_t pid;
    int exitFd;
    int32_t tag;
};

static void *wait_child(void *arg) {
    struct waiter *w = arg;
    int32_t record[2] = { w->tag, 0 };
    pid_t reaped;
    while ((reaped = waitpid(w->pid, &record[1], 0)) < 0 && errno == EINTR) {}
    if (reaped < 0) record[1] = -1; /* reaped by someone else: how it ended is not known */
    while (write(w->exitFd, record, sizeof record) < 0 && errno == EINTR) {}
    free(w);
    return NULL;
}

static napi_value exit_pipe(napi_env env, napi_callback_info info) {
    (void)info;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) return throw_errno(env, errno, "pipe2", "for child exits");
    napi_value result, fd;
    CHECK(napi_create_array(env, &result));
    for (uint32_t i = 0; i < 2; i++) {
        CHECK(napi_create_int32(env, fds[i], &fd));
        CHECK(napi_set_element(env, result, i, fd));
    }
    return result;
}

/* A socket pair whose ends are both above the child's stdio fds, so neither is overwritten by a dup2. */
static int stdio_pair(int fds[2], int above) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0) return -1;
    for (int i = 0; i < 2; i++) {
        if (fds[i] >= above) continue;
        int moved = fcntl(fds[i], F_DUPFD_CLOEXEC, above);
        if (moved < 0) { close(fds[0]); close(fds[1]); return -1; }
        close(fds[i]);
        fds[i] = moved;
    }
    return 0;
}

static napi_value spawn(napi_env env, napi_callback_info info) {
    size_t argc = 8;
    napi_value argv[8];
    CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc < 8) { napi_throw_type_error(env, NULL, "spawn: 8 arguments expected"); return NULL; }

    napi_value result = NULL;
    char *file = string_arg(env, argv[0]);
    char **args = string_list(env, argv[1]);
    char **envp = string_list(env, argv[2]);
    char *cwd = NULL;
    napi_valuetype cwdType;
    bool detached = false;
    uint32_t nstdio = 0;
    int kinds[MAX_STDIO], parentEnds[MAX_STDIO], childEnds[MAX_STDIO];
    for (int i = 0; i < MAX_STDIO; i++) parentEnds[i] = childEnds[i] = -1;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    bool actionsMade = false, attrMade = false;
    struct waiter *w = NULL;

    if (!file || !args || !envp) { napi_throw_type_error(env, NULL, "spawn: file, argv and envp must be strings"); goto out; }
    if (napi_typeof(env, argv[3], &cwdType) != napi_ok) goto out;
    if (cwdType == napi_string && !(cwd = string_arg(env, argv[3]))) goto out;
    if (napi_get_array_length(env, argv[4], &nstdio) != napi_ok || nstdio > MAX_STDIO) {
        napi_throw_range_error(env, NULL, "spawn: stdio must be an array of at most 8 entries");
        goto out;
    }
    for (uint32_t i = 0; i < nstdio; i++) {
        napi_value item;
        if (napi_get_element(env, argv[4], i, &item) != napi_ok || napi_get_value_int32(env, item, &kinds[i]) != napi_ok) goto out;
    }
    if (napi_get_value_bool(env, argv[5], &detached) != napi_ok) goto out;
    int32_t exitFd, tag;
    if (napi_get_value_int32(env, argv[6], &exitFd) != napi_ok || napi_get_value_int32(env, argv[7], &tag) != napi_ok) goto out;

    int err = 0;
    for (uint32_t i = 0; i < nstdio && !err; i++) {
        if (kinds[i] != STDIO_PAIR) continue;
        int pair[2];
        if (stdio_pair(pair, (int)nstdio) < 0) err = errno;
        else { parentEnds[i] = pair[0]; childEnds[i] = pair[1]; }
    }
    if (err) { throw_errno(env, err, "socketpair", file); goto out; }

    actionsMade = posix_spawn_file_actions_init(&actions) == 0;
    attrMade = posix_spawnattr_init(&attr) == 0;
    if (!actionsMade || !attrMade) { throw_errno(env, ENOMEM, "spawn", file); goto out; }
    for (uint32_t i = 0; i < nstdio && !err; i++) {
        if (kinds[i] == STDIO_PAIR) err = posix_spawn_file_actions_adddup2(&actions, childEnds[i], (int)i);
        else if (kinds[i] == STDIO_NULL) err = posix_spawn_file_actions_addopen(&actions, (int)i, "/dev/null", O_RDWR, 0);
    }
    if (!err) err = posix_spawn_file_actions_addclosefrom_np(&actions, (int)nstdio);
    if (!err && cwd) err = posix_spawn_file_actions_addchdir_np(&actions, cwd);
    /* The child starts with every signal at its default and none blocked: the daemon ignores SIGPIPE, for one. */
    sigset_t all, none;
    sigfillset(&all);
    /* glibc leaves its own two (32 and 33) out of a full set, and its spawn then starts the child with them
     * ignored, which the exec keeps: containers would inherit that. Set in the mask by hand. */
    for (int sig = 32; sig <= 33; sig++) all.__val[(sig - 1) / ULONG_BITS] |= 1UL << ((sig - 1) % ULONG_BITS);
    sigemptyset(&none);
    short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | (detached ? POSIX_SPAWN_SETSID : 0);
    if (!err) err = posix_spawnattr_setsigdefault(&attr, &all);
    if (!err) err = posix_spawnattr_setsigmask(&attr, &none);
    if (!err) err = posix_spawnattr_setflags(&attr, flags);
    if (err) { throw_errno(env, err, "spawn", file); goto out; }

    w = calloc(1, sizeof *w);
    if (!w) { throw_errno(env, ENOMEM, "spawn", file); goto out; }
    w->exitFd = exitFd;
    w->tag = tag;

    pid_t pid;
    err = strchr(file, '/') ? posix_spawn(&pid, file, &actions, &attr, args, envp) : posix_spawnp(&pid, file, &actions, &attr, args, envp);
    if (err) { throw_errno(env, err, "spawn", file); goto out; }
    w->pid = pid;
    /* Not reaped before the thread below waits: the pid is still this child's. */
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) err = errno;
    pthread_attr_t threadAttr;
    pthread_t thread;
    pthread_attr_init(&threadAttr);
    pthread_attr_setdetachstate(&threadAttr, PTHREAD_CREATE_DETACHED);
    /* It only waits: the smallest stack the platform allows, at least 64 KiB. */
    pthread_attr_setstacksize(&threadAttr, PTHREAD_STACK_MIN > 65536 ? (size_t)PTHREAD_STACK_MIN : 65536);
    if (!err) err = pthread_create(&thread, &threadAttr, wait_child, w);
    pthread_attr_destroy(&threadAttr);
    if (err) {
        /* Nobody could reap it or signal it safely: end it here rather than leave it. */
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        if (pidfd >= 0) close(pidfd);
        throw_errno(env, err, pidfd < 0 ? "pidfd_open" : "pthread_create", file);
        goto out;
    }

    w = NULL; /* the thread's now */
    napi_value pidValue, pidfdValue, fd;
    if (napi_create_array(env, &result) != napi_ok || napi_create_int32(env, pid, &pidValue) != napi_ok
        || napi_set_element(env, result, 0, pidValue) != napi_ok || napi_create_int32(env, pidfd, &pidfdValue) != napi_ok
        || napi_set_element(env, result, 1, pidfdValue) != napi_ok) result = NULL;
    uint32_t slot = 2;
    for (uint32_t i = 0; i < nstdio && result; i++) {
        if (parentEnds[i] < 0) continue;
        if (napi_create_int32(env, parentEnds[i], &fd) != napi_ok || napi_set_element(env, result, slot++, fd) != napi_ok) result = NULL;
        else parentEnds[i] = -1;
    }

out:
    if (!result) throw_failed(env);
    for (int i = 0; i < MAX_STDIO; i++) {
        if (parentEnds[i] >= 0) close(parentEnds[i]);
        if (childEnds[i] >= 0) close(childEnds[i]);
    }
    if (actionsMade) posix_spawn_file_actions_destroy(&actions);
    if (attrMade) posix_spawnattr_destroy(&attr);
    free(w);
    free(file);
    free(cwd);
    free_strings(args);
    free_strings(envp);
    return result;
}

static napi_value send_signal(napi_env env, napi_callback_info info) {
    size_t argc = 2;
    napi_value argv[2], sent;
    int32_t pidfd, signo;
    CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    CHECK(napi_get_value_int32(env, argv[0], &pidfd));
    CHECK(napi_get_value_int32(env, argv[1], &signo));
    long r = syscall(SYS_pidfd_send_signal, pidfd, signo, NULL, 0);
    if (r < 0 && errno != ESRCH) return throw_errno(env, errno, "kill", "a child");
    CHECK(napi_get_boolean(env, r == 0, &sent));
    return sent;
}

static napi_value make_node(napi_env env, napi_callback_info info) {
    size_t argc = 5;
    napi_value argv[5];
    CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    char type[2] = "";
    size_t len;
    uint32_t mode, major, minor;
    CHECK(napi_get_value_string_utf8(env, argv[1], type, sizeof type, &len));
    CHECK(napi_get_value_uint32(env, argv[2], &mode));
    CHECK(napi_get_value_uint32(env, argv[3], &major));
    CHECK(napi_get_value_uint32(env, argv[4], &minor));
    mode_t kind = type[0] == 'c' ? S_IFCHR : type[0] == 'b' ? S_IFBLK : type[0] == 'p' ? S_IFIFO : 0;
    if (!kind) { napi_throw_type_error(env, NULL, "mknod: type must be 'c', 'b' or 'p'"); return NULL; }
    char *path = string_arg(env, argv[0]);
    if (!path) { throw_failed(env); return NULL; }
    int err = 0;
    if (mknod(path, kind | (mode & 07777), kind == S_IFIFO ? 0 : makedev(major, minor)) < 0 || chmod(path, mode & 07777) < 0) err = errno;
    if (err) throw_errno(env, err, "mknod", path);
    free(path);
    return NULL;
}

NAPI_MODULE_INIT(/* env, exports */) {
    static const struct { const char *name; napi_callback fn; } functions[] = {
        { "exitPipe", exit_pipe }, { "spawn", spawn }, { "signal", send_signal }, { "mknod", make_node },
    };
    for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
        napi_value fn;
        if (napi_create_function(env, functions[i].name, NAPI_AUTO_LENGTH, functions[i].fn, NULL, &fn) != napi_ok) return NULL;
        if (napi_set_named_property(env, exports, functions[i].name, fn) != napi_ok) return NULL;
    }
    return exports;
}
