// Who uses an image, as RemoveImage's refusal names it: a container by name, id and pod, one still being
// cleaned up, or a sandbox's pause.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { silentLogger } from '../../../core/log.js';
import { createContainer } from '../../../pod/container-create.js';
import { removeContainer } from '../../../pod/container-remove.js';
import { imageUsedBy } from '../../../pod/image-users.js';
import { runSandbox } from '../../../pod/sandbox-run.js';
import { fakePods, type FakePods } from '../../support/fake-pods.js';
import { containerConfig, sandboxConfig } from '../spec/fixtures.js';

describe('the user of an image', () => {
  let f: FakePods;
  let sandboxId: string;
  beforeEach(async () => {
    f = fakePods();
    sandboxId = await runSandbox(f.ctx, sandboxConfig({ log_directory: join(f.dir, 'logs') }), '', silentLogger);
  });
  afterEach(() => f.close());

  it('is the container by name, id and pod; one still cleaned up; the pause; none for an unused image', async () => {
    assert.equal(imageUsedBy(f.ctx.tables, 'sha256:1111'), undefined);
    assert.match(imageUsedBy(f.ctx.tables, 'sha256:pause')!, new RegExp(`^the pause of sandbox default/web \\(${sandboxId}\\): remove the sandbox first$`));

    const image = { image: 'example.test/app:1', annotations: {}, user_specified_image: '', runtime_handler: '', image_ref: '' };
    const id = await createContainer(f.ctx, sandboxId, containerConfig({ image }), null, silentLogger);
    assert.equal(imageUsedBy(f.ctx.tables, 'sha256:1111'), `container "app" (${id}) of pod default/web: remove the container first`);

    // The cleanup after RemoveContainer fails for a while: the layers stay mounted, the image stays in use.
    const removeOf = f.ctx.images.removeRootfs.bind(f.ctx.images);
    f.ctx.images.removeRootfs = async () => { throw new Error('umount: target is busy'); };
    await removeContainer(f.ctx, id, silentLogger);
    await f.ctx.background.drain();
    assert.equal(imageUsedBy(f.ctx.tables, 'sha256:1111'),
      `container "app" (${id}), removed but still being cleaned up: retry once its cleanup is done`);
    f.ctx.images.removeRootfs = removeOf;
  });
});
