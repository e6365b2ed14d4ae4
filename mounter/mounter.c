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
 *   idmap  <source> <target> <uidmap> <gidmap> <flags>
 *       An id-mapped bind mount of source on target (which must exist, a directory or a file): a clone
 *       of source's mount tree (with flags 1, its submounts too) made with open_tree(2), id-mapped
 *       with mount_setattr(2) through a throwaway user namespace holding uidmap and gidmap (text as in
 *       /proc/<pid>/uid_map), then attached with move_mount(2). Files owned by id N on disk appear
 *       owned by the id N maps to.
 *   probe  <dir>
 *       Whether mount_setattr(2) exists and an id-mapped clone of dir can be made (nothing is
 *       attached). The failed step names what is missing: mount_setattr, userns, open_tree, idmap.
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
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HELPER_FAIL 125
/* Far above one request: an overlay's mount data is capped at a page. */
#define BUF_MAX (64 * 1024)
#define MAX_ARGS 6

/* The new mount API (Linux 5.2 and 5.12), spelled out: musl's headers lack it. Its syscall numbers
 * are the same on every architecture. */
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#define OPEN_TREE_CLONE_ 1
#define OPEN_TREE_CLOEXEC_ O_CLOEXEC
#define MOVE_MOUNT_F_EMPTY_PATH_ 0x00000004
#define MOUNT_ATTR_IDMAP_ 0x00100000
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
struct mount_attr_ {
  unsigned long long attr_set;
  unsigned long long attr_clr;
  unsigned long long propagation;
  unsigned long long userns_fd;
};
#define IDMAP_RECURSIVE 1

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

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t len = (ssize_t)strlen(text);
  ssize_t n = write(fd, text, (size_t)len);
  int saved = errno;
  close(fd);
  errno = saved;
  return n == len ? 0 : -1;
}

/*
 * A user namespace holding these maps, as an fd: a grandchild unshares it, we write its maps and
 * keep the namespace open; the grandchild then exits (the namespace lives on while the fd does).
 */
static int userns_fd(const char *uidmap, const char *gidmap) {
  int ready[2], done[2];
  if (pipe2(ready, O_CLOEXEC) < 0) return -1;
  if (pipe2(done, O_CLOEXEC) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    /* Its copy of done's write end would keep the read below from ever seeing EOF. */
    close(ready[0]);
    close(done[1]);
    char c = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    /* Waits until the maps are written and the namespace is held (EOF on done). */
    if (read(done[0], &c, 1) < 0) _exit(1);
    _exit(0);
  }
  close(ready[1]);
  close(done[0]);
  char c = 'n';
  int fd = -1;
  if (read(ready[0], &c, 1) == 1 && c == 'y') {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
    if (write_file(path, uidmap) == 0) {
      snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
      if (write_file(path, gidmap) == 0) {
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
      }
    }
  } else {
    errno = EPERM;
  }
  int saved = errno;
  close(ready[0]);
  close(done[1]);
  /* Gone before we answer (SIGCHLD is ignored, so this waits for its end and then fails with ECHILD). */
  waitpid(pid, NULL, 0);
  errno = saved;
  return fd;
}

/* A detached clone of source's mount tree, id-mapped with these maps; -1 with failed_step set. */
static int idmapped_clone(const char *source, const char *uidmap, const char *gidmap, int recursive) {
  int ns = userns_fd(uidmap, gidmap);
  if (ns < 0) {
    failed_step = "userns";
    return -1;
  }
  int fd = (int)syscall(SYS_open_tree, AT_FDCWD, source, OPEN_TREE_CLONE_ | OPEN_TREE_CLOEXEC_ | (recursive ? AT_RECURSIVE : 0));
  if (fd < 0) {
    failed_step = "open_tree";
    return -1;
  }
  struct mount_attr_ attr = {0};
  attr.attr_set = MOUNT_ATTR_IDMAP_;
  attr.userns_fd = (unsigned long long)ns;
  if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr, sizeof(attr)) < 0) {
    failed_step = "idmap";
    return -1;
  }
  return fd;
}

static int do_idmap(char **a, unsigned long flags) {
  int fd = idmapped_clone(a[0], a[2], a[3], (flags & IDMAP_RECURSIVE) != 0);
  if (fd < 0) return -1;
  if (syscall(SYS_move_mount, fd, "", AT_FDCWD, a[1], MOVE_MOUNT_F_EMPTY_PATH_) < 0) {
    failed_step = "move_mount";
    return -1;
  }
  return 0;
}

static int do_probe(char **a, unsigned long flags) {
  (void)flags;
  struct mount_attr_ attr = {0};
  if (syscall(SYS_mount_setattr, -1, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 && errno == ENOSYS) {
    failed_step = "mount_setattr";
    return -1;
  }
  return idmapped_clone(a[0], "0 1000000 65536", "0 1000000 65536", 0) < 0 ? -1 : 0;
}

static const struct op OPS[] = {
  {"mount", 6, 3, do_mount},
  {"umount", 2, 1, do_umount},
  {"netns", 2, -1, do_netns},
  {"idmap", 5, 4, do_idmap},
  {"probe", 1, -1, do_probe},
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
