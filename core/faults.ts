// Test-only fault injection. MINICRI_TEST_CRASH_AT names a step ("netns-created", "cni-add:bridge",
// "pause-started", ...); the daemon kills itself with SIGKILL right after that step, so tests can
// prove recovery leaves nothing behind whatever instant the daemon dies. Unset in production.
const crashAt = process.env.MINICRI_TEST_CRASH_AT;

export function faultPoint(step: string): void {
  if (crashAt !== undefined && crashAt === step) {
    process.stderr.write(`minicri: MINICRI_TEST_CRASH_AT=${step}: crashing on purpose\n`);
    process.kill(process.pid, 'SIGKILL');
  }
}
