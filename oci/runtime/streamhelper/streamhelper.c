/*
 * minicri-streamhelper: the few streaming steps Node.js cannot do itself, each a byte pump between
 * this process's stdio and something Node has no API for.
 *
 *   pty <console-socket> <pid-file> <runtime> <args...>
 *       Listen on <console-socket>, run the runtime (runc exec -d --tty --console-socket ... --pid-file),
 *       receive the PTY master it sends (SCM_RIGHTS), then copy stdin -> master and master -> stdout.
 *       Lines "<rows> <cols>\n" on fd 3 resize the terminal. Exits with the exec'd process's status
 *       (or the runtime's, when it failed).
 *   attach <socket>
 *       Connect to conmon's SOCK_SEQPACKET attach socket. stdin -> container stdin; packets tagged
 *       stdout go to fd 1, stderr to fd 3. stdin EOF half-closes the socket (conmon then closes the
 *       container's stdin if it was created stdin_once).
 *   connect <netns-path> <port>
 *       Join the network namespace and connect to localhost:<port>; copy stdin -> socket (EOF:
 *       half-close) and socket -> stdout. A failed connect prints why on stderr and exits 2.
 *
 * Errors of the helper itself go to stderr, exit status 125 (so they differ from a command's own).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define HELPER_FAIL 125
#define BUF 8192
/* conmon's attach packets: one tag byte, then up to its 8192-byte buffer. */
#define ATTACH_STDOUT 2
#define ATTACH_STDERR 3

static void die(const char *what) {
  fprintf(stderr, "minicri-streamhelper: %s: %s\n", what, strerror(errno));
  exit(HELPER_FAIL);
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* A unix socket address; long paths go through /proc/self/fd of their directory (sun_path is 108 bytes). */
static socklen_t unix_addr(const char *path, struct sockaddr_un *sa, int *dirfd) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  *dirfd = -1;
  if (strlen(path) < sizeof(sa->sun_path)) {
    strcpy(sa->sun_path, path);
  } else {
    char *d = strdup(path), *b = strdup(path);
    if (!d || !b) die("out of memory");
    *dirfd = open(dirname(d), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*dirfd < 0) die("open socket directory");
    snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", *dirfd, basename(b));
    free(d);
    free(b);
  }
  return sizeof(*sa);
}

/* A unix socket of `type` that `attach` (bind or connect) has tied to `path`; dies saying what failed. */
static int unix_socket(const char *path, int type, int (*attach)(int, const struct sockaddr *, socklen_t), const char *what) {
  struct sockaddr_un sa;
  int dirfd;
  socklen_t sl = unix_addr(path, &sa, &dirfd);
  int s = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (s < 0) die("socket");
  if (attach(s, (struct sockaddr *)&sa, sl) < 0) die(what);
  if (dirfd >= 0) close(dirfd);
  return s;
}

/* ---- pty ---- */

static int receive_fd(int conn) {
  char name[512];
  struct iovec iov = { .iov_base = name, .iov_len = sizeof(name) };
  union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } u;
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
  if (recvmsg(conn, &msg, MSG_CMSG_CLOEXEC) < 0) die("receive the terminal from the runtime");
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  /* Exactly one fd in an SCM_RIGHTS message: anything else (another level, a truncated or longer
   * control message) would make CMSG_DATA point at something that is not our terminal. */
  if (!c || (msg.msg_flags & MSG_CTRUNC) || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS
      || c->cmsg_len != CMSG_LEN(sizeof(int))) {
    fprintf(stderr, "minicri-streamhelper: the runtime sent no terminal fd\n");
    exit(HELPER_FAIL);
  }
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof(fd));
  return fd;
}

static int exit_status(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return HELPER_FAIL;
}

/* Applies every complete "<rows> <cols>" line in buf; keeps a partial line. */
static void apply_resizes(int master, char *buf, size_t *len) {
  char *start = buf, *nl;
  while ((nl = memchr(start, '\n', *len - (size_t)(start - buf))) != NULL) {
    *nl = '\0';
    unsigned rows, cols;
    if (sscanf(start, "%u %u", &rows, &cols) == 2) {
      struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
      ioctl(master, TIOCSWINSZ, &ws);
    }
    start = nl + 1;
  }
  size_t rest = *len - (size_t)(start - buf);
  memmove(buf, start, rest);
  *len = rest;
  if (*len >= 128) *len = 0; /* garbage without newlines: drop it */
}

static int read_pid(const char *path) {
  char buf[32] = { 0 };
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("open the exec pid file");
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  int pid = n > 0 ? atoi(buf) : 0;
  if (pid <= 0) {
    fprintf(stderr, "minicri-streamhelper: no pid in %s\n", path);
    exit(HELPER_FAIL);
  }
  return pid;
}

/* Reaps exited children without blocking; records the status of `pid` when it is among them. */
static void reap(pid_t pid, int *status, int *done) {
  int st;
  pid_t w;
  while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
    if (w == pid) {
      *status = st;
      *done = 1;
    }
  }
}

static int run_pty(const char *sock_path, const char *pid_file, char **argv) {
  /* runc hands out the console only when it detaches (exec -d); as a subreaper we inherit the
     exec'd process once runc has exited, and can wait for its status. */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) die("become a subreaper");
  int lfd = unix_socket(sock_path, SOCK_STREAM, bind, "bind the console socket");
  if (listen(lfd, 1) < 0) die("listen");

  pid_t runtime = fork();
  if (runtime < 0) die("fork");
  if (runtime == 0) {
    /* The runtime's own messages go to our stderr; fd 3 (resize) is not its business. */
    int nul = open("/dev/null", O_RDWR);
    dup2(nul, 0);
    dup2(2, 1);
    close(3);
    execvp(argv[0], argv);
    fprintf(stderr, "minicri-streamhelper: run %s: %s\n", argv[0], strerror(errno));
    _exit(HELPER_FAIL);
  }

  /* The terminal arrives, then the runtime exits once the process runs; or it fails. */
  int status, master = -1, runtime_done = 0;
  while (!runtime_done || master < 0) {
    struct pollfd p = { .fd = master < 0 ? lfd : -1, .events = POLLIN };
    int r = poll(&p, 1, 100);
    if (r > 0) {
      int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
      if (conn < 0) die("accept");
      master = receive_fd(conn);
      close(conn);
    }
    if (!runtime_done && waitpid(runtime, &status, WNOHANG) == runtime) {
      runtime_done = 1;
      if (exit_status(status) != 0) break;
    }
  }
  close(lfd);
  unlink(sock_path);
  if (exit_status(status) != 0) return exit_status(status);

  pid_t pid = read_pid(pid_file);
  char buf[BUF], ctl[256];
  size_t ctl_len = 0;
  int in_open = 1, ctl_open = fcntl(3, F_GETFD) >= 0, done = 0;
  for (;;) {
    struct pollfd p[3] = {
      { .fd = master, .events = POLLIN },
      { .fd = in_open ? 0 : -1, .events = POLLIN },
      { .fd = ctl_open ? 3 : -1, .events = POLLIN },
    };
    /* Once the process has exited, drain what the terminal still holds and stop. */
    int r = poll(p, 3, done ? 50 : 200);
    if (r < 0 && errno != EINTR) die("poll");
    if (r == 0 && done) break;
    if (r > 0 && p[0].revents) {
      ssize_t n = read(master, buf, sizeof(buf));
      if (n <= 0) break; /* EIO: every slave end is closed */
      if (write_all(1, buf, (size_t)n) < 0) break;
    }
    if (r > 0 && p[1].revents) {
      ssize_t n = read(0, buf, sizeof(buf));
      if (n <= 0) in_open = 0;
      else write_all(master, buf, (size_t)n);
    }
    if (r > 0 && p[2].revents) {
      ssize_t n = read(3, ctl + ctl_len, sizeof(ctl) - ctl_len);
      if (n <= 0) ctl_open = 0;
      else {
        ctl_len += (size_t)n;
        apply_resizes(master, ctl, &ctl_len);
      }
    }
    if (!done) reap(pid, &status, &done);
  }
  close(master);
  while (!done) {
    int st;
    pid_t w = waitpid(-1, &st, 0);
    if (w < 0) die("wait for the exec process");
    if (w == pid) {
      status = st;
      done = 1;
    }
  }
  return exit_status(status);
}

/* ---- relay: attach and port-forward ---- */

/*
 * Copies stdin to the socket `s` and `s` to stdout until the socket side is done (for attach: conmon closed,
 * the container has exited; for a port: the server is done, and what the client still sends has nowhere to go)
 * or the client is gone. The end of stdin half-closes `s`. `framed` is conmon's attach socket: each message it
 * sends starts with the stream it belongs to (stderr goes to `err_fd`), and each one we send is one message.
 */
static void relay(int s, int framed, int err_fd) {
  char buf[BUF + 1];
  int in_open = 1;
  for (;;) {
    struct pollfd p[2] = { { .fd = s, .events = POLLIN }, { .fd = in_open ? 0 : -1, .events = POLLIN } };
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      die("poll");
    }
    if (p[0].revents) {
      ssize_t n = recv(s, buf, framed ? sizeof(buf) : BUF, 0);
      if (n <= 0) break;
      if (framed) {
        int fd = buf[0] == ATTACH_STDERR ? err_fd : buf[0] == ATTACH_STDOUT ? 1 : -1;
        if (fd >= 0 && n > 1 && write_all(fd, buf + 1, (size_t)n - 1) < 0) break;
      } else if (write_all(1, buf, (size_t)n) < 0) {
        break;
      }
    }
    if (p[1].revents) {
      ssize_t n = read(0, buf, BUF);
      if (n <= 0) {
        in_open = 0;
        shutdown(s, SHUT_WR);
      } else if (framed ? send(s, buf, (size_t)n, MSG_NOSIGNAL) < 0 : write_all(s, buf, (size_t)n) < 0) {
        break;
      }
    }
  }
}

/* ---- attach ---- */

static int run_attach(const char *path) {
  relay(unix_socket(path, SOCK_SEQPACKET, connect, "connect to the attach socket"), 1, fcntl(3, F_GETFD) >= 0 ? 3 : 1);
  return 0;
}

/* ---- connect ---- */

static int run_connect(const char *netns, const char *port_s) {
  char *end;
  long port = strtol(port_s, &end, 10);
  if (*end || port < 1 || port > 65535) {
    fprintf(stderr, "invalid port %s\n", port_s);
    return 2;
  }
  int ns = open(netns, O_RDONLY | O_CLOEXEC);
  if (ns < 0) die("open the network namespace");
  if (setns(ns, CLONE_NEWNET) < 0) die("join the network namespace");
  close(ns);
  /* localhost as IPv4, then IPv6, like kubelet's runtimes do. */
  struct sockaddr_in v4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  struct sockaddr_in6 v6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = IN6ADDR_LOOPBACK_INIT };
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&v4, sizeof(v4)) < 0) {
    int e4 = errno;
    if (s >= 0) close(s);
    s = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&v6, sizeof(v6)) < 0) {
      fprintf(stderr, "cannot connect to localhost:%ld in the pod: %s\n", port, strerror(e4));
      return 2;
    }
  }
  relay(s, 0, 1);
  return 0;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc >= 5 && strcmp(argv[1], "pty") == 0) return run_pty(argv[2], argv[3], argv + 4);
  if (argc == 3 && strcmp(argv[1], "attach") == 0) return run_attach(argv[2]);
  if (argc == 4 && strcmp(argv[1], "connect") == 0) return run_connect(argv[2], argv[3]);
  fprintf(stderr, "usage: minicri-streamhelper pty SOCKET PIDFILE RUNTIME ARGS... | attach SOCKET | connect NETNS PORT\n");
  return HELPER_FAIL;
}
