// ImageStatus: one image, or an empty answer when absent (kubelet asks before every pull).
import { criImage } from '../cri-views.js';
import type { Edge } from '../edge.js';
import { checkImageRuntimeHandler } from '../runtimes.js';
import type { ImageRpc } from '../service.js';

export function ImageStatus(edge: Edge): ImageRpc<'ImageStatus'> {
  return (request) => {
    checkImageRuntimeHandler(edge, request.image);
    const record = edge.images.status(request.image?.image ?? '');
    const info: Record<string, string> = {};
    if (record && request.verbose) info.info = JSON.stringify({ id: record.id, layers: record.layers, config: record.config });
    return { image: record ? criImage(record) : null, info };
  };
}
