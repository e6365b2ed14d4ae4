// ListImages: the image store as kubelet's image manager sees it.
import { criImage } from '../cri-views.js';
import type { Edge } from '../edge.js';
import { checkImageRuntimeHandler } from '../runtimes.js';
import type { ImageRpc } from '../service.js';

export function ListImages(edge: Edge): ImageRpc<'ListImages'> {
  return (request) => {
    checkImageRuntimeHandler(edge, request.filter?.image);
    return { images: edge.images.list({ image: request.filter?.image?.image || undefined }).map(criImage) };
  };
}
