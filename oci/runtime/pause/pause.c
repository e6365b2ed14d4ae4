/*
 * minicri pause: the first process of every pod sandbox.
 *
 * It holds the pod's namespaces open and, being PID 1 of the pod's PID
 * namespace when that namespace is shared, adopts and reaps orphaned
 * processes so they never linger as zombies. It exits 0 on SIGINT or
 * SIGTERM so a sandbox stop is quick and clean.
 *
 * Signals are taken synchronously with sigwaitinfo(): no handlers, no
 * races between a signal arriving and the process going back to sleep.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void reap_all(void)
{
	/* One SIGCHLD may stand for many exited children. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
		puts("minicri-pause 1");
		return 0;
	}
	if (getpid() != 1)
		fprintf(stderr, "pause: warning: not PID 1, orphans will not be reparented here\n");

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGCHLD);
	/* Blocked signals stay pending until sigwaitinfo() collects them. */
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) {
		perror("pause: sigprocmask");
		return 1;
	}

	for (;;) {
		siginfo_t info;
		int sig = sigwaitinfo(&set, &info);
		if (sig < 0) {
			if (errno == EINTR)
				continue;
			perror("pause: sigwaitinfo");
			return 1;
		}
		if (sig == SIGCHLD) {
			reap_all();
			continue;
		}
		/* SIGINT or SIGTERM: the sandbox is being stopped. */
		reap_all();
		return 0;
	}
}
