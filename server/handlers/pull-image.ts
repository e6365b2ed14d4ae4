// PullImage: fetch an image (or find it present) and answer its id.
import { InvalidArgument } from '../../core/errors.js';
import type { Edge } from '../edge.js';
import { checkImageRuntimeHandler } from '../runtimes.js';
import type { ImageRpc } from '../service.js';

export function PullImage(edge: Edge): ImageRpc<'PullImage'> {
  return async (request, call) => {
    const reference = request.image?.image ?? '';
    if (!reference) throw new InvalidArgument('PullImage needs an image reference');
    checkImageRuntimeHandler(edge, request.image);
    const a = request.auth;
    const auth = a ? {
      username: a.username || undefined, password: a.password || undefined, auth: a.auth || undefined,
      serverAddress: a.server_address || undefined, identityToken: a.identity_token || undefined,
      registryToken: a.registry_token || undefined,
    } : undefined;
    // A client that gives up (cancel, deadline) stops the pull; another client's pull of the same image goes on.
    const image = await edge.images.pull(reference, auth, { signal: call.signal });
    call.log.info({ image: reference, id: image.id }, 'image pulled');
    return { image_ref: image.id };
  };
}
