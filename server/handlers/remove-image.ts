// RemoveImage: an image and the layers only it used.
import type { Edge } from '../edge.js';
import { checkImageRuntimeHandler } from '../runtimes.js';
import type { ImageRpc } from '../service.js';

export function RemoveImage(edge: Edge): ImageRpc<'RemoveImage'> {
  return async (request, call) => {
    checkImageRuntimeHandler(edge, request.image);
    await edge.images.remove(request.image?.image ?? '');
    call.log.info({ image: request.image?.image }, 'image removed');
    return {};
  };
}
