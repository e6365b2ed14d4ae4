/*
 * minicri-mounter: the daemon's mount(2) and umount2(2) calls, and the pinning of new network
 * namespaces, without starting a mount(8), umount(8) or ip(8) process for each.
 *
 * The daemon starts it once and keeps it. Requests arrive on stdin as runs of NUL-terminated fields,
 * <id> <op> <args...>, where op fixes the number of args:
 *   mount  <source> <target> <fstype> <flags> <data> <cwd>
 *       mount(2). Empty fstype or data are passed as NULL; relative paths in data (overlay lowerdirs)
 *       resolve against cwd when it is not empty.
 *   umount <target> <flags>
 *       umount2(2), never following a symlink at target (a recycled name must not lead elsewhere).
 *   netns  <dir> <pin>
 *       What `ip netns add` does: make dir a shared mount point (so pins propagate into mount
 *       namespaces made later), create pin (O_EXCL: never reuse a name), and bind-mount a new network
 *       namespace onto it. A failure removes the pin file it created.
 * Flags are decimal. Each request runs in a child forked for it: a slow call (an overlay umount
 * syncs its upper filesystem) holds up no other, and the namespace unshared for a pin is the child's.
 * The child answers with one line on stdout, in a single write (atomic on a pipe, under PIPE_BUF):
 *   <id> <errno> <message>\n         errno 0 means done
 * A request the helper cannot run (bad flags, no fork) is answered the same way by the helper itself.
 * stdin's EOF ends the helper; a child still running finishes on its own. A request that cannot be
 * framed (unknown op, bad id) is a bug in the daemon: the helper says so on stderr and exits 125.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#define HELPER_FAIL 125
/* Far above one request: an overlay's mount data is capped at a page. */
#define BUF_MAX (64 * 1024)
#define MAX_ARGS 6

struct op {
  const char *name;
  int argc;
  /* Which args are mount or umount flags (decimal), checked before the fork. */
  int flags_arg;
  int (*run)(char **args, unsigned long flags);
};

/* The step that failed, when it is not the call the op is named after. */
static const char *failed_step;

static void fail(const char *what) {
  fprintf(stderr, "minicri-mounter: %s\n", what);
  exit(HELPER_FAIL);
}

static int parse_flags(const char *s, unsigned long *out) {
  char *end;
  errno = 0;
  *out = strtoul(s, &end, 10);
  return errno || *s < '0' || *s > '9' || *end != '\0' ? -1 : 0;
}

static const char *or_null(const char *s) { return *s ? s : NULL; }

static int do_mount(char **a, unsigned long flags) {
  if (*a[5] && chdir(a[5]) < 0) {
    failed_step = "chdir";
    return -1;
  }
  return mount(a[0], a[1], or_null(a[2]), flags, or_null(a[4]));
}

static int do_umount(char **a, unsigned long flags) { return umount2(a[0], (int)flags | UMOUNT_NOFOLLOW); }

static int make_shared(const char *dir) {
  if (mount("", dir, "none", MS_SHARED | MS_REC, NULL) == 0) return 0;
  /* EINVAL: dir is not a mount point yet. Make it one by binding it onto itself. */
  if (errno != EINVAL || mount(dir, dir, "none", MS_BIND | MS_REC, NULL) < 0) return -1;
  return mount("", dir, "none", MS_SHARED | MS_REC, NULL);
}

static int do_netns(char **a, unsigned long flags) {
  (void)flags;
  if (make_shared(a[0]) < 0) return -1;
  int fd = open(a[1], O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
  if (fd < 0) return -1;
  close(fd);
  if (unshare(CLONE_NEWNET) < 0 || mount("/proc/self/ns/net", a[1], "none", MS_BIND, NULL) < 0) {
    int saved = errno;
    unlink(a[1]);
    errno = saved;
    return -1;
  }
  return 0;
}

static const struct op OPS[] = {
  {"mount", 6, 3, do_mount},
  {"umount", 2, 1, do_umount},
  {"netns", 2, -1, do_netns},
};

/* One answer line, in one write. */
static void answer(const char *id, int err) {
  char line[512];
  const char *sep = failed_step ? ": " : "";
  int n = snprintf(line, sizeof(line), "%s %d %s%s%s\n", id, err, failed_step ? failed_step : "", sep, err ? strerror(err) : "");
  if (n < 0 || n >= (int)sizeof(line)) n = snprintf(line, sizeof(line), "%s %d\n", id, err);
  if (write(STDOUT_FILENO, line, (size_t)n) != n) { /* the daemon is gone: nobody to tell */ }
}

static void serve(const char *id, const struct op *op, char **args) {
  unsigned long flags = 0;
  if (op->flags_arg >= 0 && parse_flags(args[op->flags_arg], &flags) < 0) {
    failed_step = "flags";
    answer(id, EINVAL);
    failed_step = NULL;
    return;
  }
  pid_t pid = fork();
  if (pid < 0) {
    answer(id, errno);
    return;
  }
  if (pid > 0) return;
  int err = op->run(args, flags) < 0 ? errno : 0;
  answer(id, err);
  _exit(0);
}

static const struct op *find_op(const char *name) {
  for (size_t i = 0; i < sizeof(OPS) / sizeof(OPS[0]); i++)
    if (strcmp(name, OPS[i].name) == 0) {
      if (OPS[i].argc > MAX_ARGS) fail("an op takes more args than MAX_ARGS");
      return &OPS[i];
    }
  fail("unknown request");
  return NULL;
}

/* Serves every complete request at the start of buf; returns the bytes consumed. */
static size_t serve_complete(char *buf, size_t len) {
  size_t done = 0;
  for (;;) {
    char *fields[2 + MAX_ARGS];
    const struct op *op = NULL;
    int have = 0, want = 2;
    size_t at = done;
    while (have < want) {
      char *nul = memchr(buf + at, '\0', len - at);
      if (!nul) return done;
      fields[have++] = buf + at;
      at = (size_t)(nul - buf) + 1;
      if (have == 2) {
        op = find_op(fields[1]);
        want = 2 + op->argc;
      }
    }
    if (strlen(fields[0]) == 0 || strlen(fields[0]) > 20) fail("bad request id");
    serve(fields[0], op, fields + 2);
    done = at;
  }
}

int main(void) {
  /* Children are reaped by the kernel: their answer is on stdout, their status says nothing more. */
  struct sigaction sa = {0};
  sa.sa_handler = SIG_IGN;
  sa.sa_flags = SA_NOCLDWAIT;
  if (sigaction(SIGCHLD, &sa, NULL) < 0) fail("cannot ignore SIGCHLD");
  static char buf[BUF_MAX];
  size_t len = 0;
  for (;;) {
    ssize_t r = read(STDIN_FILENO, buf + len, sizeof(buf) - len);
    if (r == 0) return 0;
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("cannot read stdin");
    }
    len += (size_t)r;
    size_t used = serve_complete(buf, len);
    memmove(buf, buf + used, len - used);
    len -= used;
    if (len == sizeof(buf)) fail("request too large");
  }
}
