// ImageService: RPC name → handler. Each handler is the file in handlers/ named after its RPC.
import type { Edge } from './edge.js';
import { ImageFsInfo } from './handlers/image-fs-info.js';
import { ImageStatus } from './handlers/image-status.js';
import { ListImages } from './handlers/list-images.js';
import { PullImage } from './handlers/pull-image.js';
import { RemoveImage } from './handlers/remove-image.js';
import { StreamImages } from './handlers/stream-images.js';
import type { ImageHandlers } from './service.js';

export function imageService(edge: Edge): ImageHandlers {
  return {
    ImageFsInfo: ImageFsInfo(edge),
    ImageStatus: ImageStatus(edge),
    ListImages: ListImages(edge),
    PullImage: PullImage(edge),
    RemoveImage: RemoveImage(edge),
    StreamImages: StreamImages(edge),
  };
}
