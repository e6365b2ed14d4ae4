import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { InvalidArgument } from '../../../core/errors.js';
import { MAX_SYMLINKS, readRootfsFile, resolveInRoot, ROOTFS_FILE_MAX_BYTES } from '../../../oci/runtime/rootfs-read.js';

const WHERE = 'image test:1';

describe('resolveInRoot', () => {
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'rootfs-read-'));
    await mkdir(join(root, 'etc'));
    await mkdir(join(root, 'usr/lib'), { recursive: true });
    await symlink('/usr', join(root, 'etc/abs'));
    await symlink('../usr', join(root, 'etc/rel'));
    await symlink('../../../../../../host', join(root, 'escape'));
    await symlink('/proc/self/environ', join(root, 'etc/proc-link'));
    await symlink('loop-b', join(root, 'loop-a'));
    await symlink('loop-a', join(root, 'loop-b'));
    // A chain one link longer than the limit, ending in a real directory.
    for (let i = 0; i <= MAX_SYMLINKS; i++) await symlink(i === MAX_SYMLINKS ? 'usr' : `chain${i + 1}`, join(root, `chain${i}`));
  });
  after(() => rm(root, { recursive: true, force: true }));

  it('joins plain paths and stops .. at the root', async () => {
    assert.equal(await resolveInRoot(root, '/etc/passwd', WHERE), join(root, 'etc/passwd'));
    assert.equal(await resolveInRoot(root, '../../../etc/passwd', WHERE), join(root, 'etc/passwd'));
    assert.equal(await resolveInRoot(root, '/usr/../../../etc//./passwd', WHERE), join(root, 'etc/passwd'));
  });

  it('follows absolute and relative links as the root\'s own', async () => {
    assert.equal(await resolveInRoot(root, '/etc/abs/lib', WHERE), join(root, 'usr/lib'));
    assert.equal(await resolveInRoot(root, '/etc/rel/lib', WHERE), join(root, 'usr/lib'));
  });

  it('clamps links that climb out of the root or point at the host\'s /proc', async () => {
    assert.equal(await resolveInRoot(root, '/escape/x', WHERE), join(root, 'host/x'));
    assert.equal(await resolveInRoot(root, '/etc/proc-link', WHERE), join(root, 'proc/self/environ'));
  });

  it('refuses a symlink loop', async () => {
    await assert.rejects(resolveInRoot(root, '/loop-a/x', WHERE),
      (err: Error) => err instanceof InvalidArgument
        && /\/loop-a\/x of image test:1 goes through more than 40 symbolic links/.test(err.message));
  });

  it('refuses more links than the kernel would follow, and takes exactly that many', async () => {
    await assert.rejects(resolveInRoot(root, '/chain0', WHERE), InvalidArgument);
    assert.equal(await resolveInRoot(root, '/chain1/lib', WHERE), join(root, 'usr/lib'));
  });

  it('refuses a path of too many components', async () => {
    await assert.rejects(resolveInRoot(root, 'a/'.repeat(5000), WHERE), /more than 4096 path components/);
  });
});

describe('readRootfsFile', () => {
  let root: string;
  let socketServer: Server;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'rootfs-read-'));
    await mkdir(join(root, 'etc/dir'), { recursive: true });
    await writeFile(join(root, 'etc/passwd'), 'root:x:0:0::/root:/bin/sh\n');
    await writeFile(join(root, 'etc/big'), Buffer.alloc(ROOTFS_FILE_MAX_BYTES + 1, 'a'));
    await symlink('/etc/passwd', join(root, 'etc/link'));
    await symlink('../../../../etc/shadow', join(root, 'etc/out'));
    await execa('mkfifo', [join(root, 'etc/fifo')]);
    socketServer = createServer();
    await new Promise<void>((resolve) => socketServer.listen(join(root, 'etc/sock'), resolve));
  });
  after(async () => {
    await new Promise<void>((resolve) => socketServer.close(() => resolve()));
    await rm(root, { recursive: true, force: true });
  });

  it('reads a regular file, through a link inside the root', async () => {
    assert.equal(await readRootfsFile(root, '/etc/passwd', WHERE), 'root:x:0:0::/root:/bin/sh\n');
    assert.equal(await readRootfsFile(root, '/etc/link', WHERE), 'root:x:0:0::/root:/bin/sh\n');
  });

  it('answers undefined for a file that is absent, under a non-directory, or whose link leads out of the root', async () => {
    assert.equal(await readRootfsFile(root, '/etc/group', WHERE), undefined);
    assert.equal(await readRootfsFile(root, '/etc/passwd/x', WHERE), undefined);
    assert.equal(await readRootfsFile(root, '/etc/out', WHERE), undefined);
  });

  it('refuses a FIFO without waiting for a writer', async () => {
    await assert.rejects(readRootfsFile(root, '/etc/fifo', WHERE),
      (err: Error) => err instanceof InvalidArgument && err.message.startsWith('/etc/fifo of image test:1 is a FIFO, not a regular file'));
  });

  it('refuses a socket and a directory', async () => {
    await assert.rejects(readRootfsFile(root, '/etc/sock', WHERE), /\/etc\/sock of image test:1 is a socket, not a regular file/);
    await assert.rejects(readRootfsFile(root, '/etc/dir', WHERE), /\/etc\/dir of image test:1 is a directory, not a regular file/);
  });

  it('refuses a file over the size cap', async () => {
    await assert.rejects(readRootfsFile(root, '/etc/big', WHERE),
      /\/etc\/big of image test:1 is 4194305 bytes, more than the 4194304 minicri reads/);
    assert.equal((await readRootfsFile(root, '/etc/big', WHERE, ROOTFS_FILE_MAX_BYTES + 1))?.length, ROOTFS_FILE_MAX_BYTES + 1);
  });
});
