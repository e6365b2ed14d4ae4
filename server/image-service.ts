// ImageService: RPC name → handler.
import type { ImageServiceHandlers } from '../gen/runtime/v1/ImageService.js';
import type { Deps } from '../pod/context.js';
import { imagePullHandlers } from './image-pull.js';
import { imageStatusHandlers } from './image-status.js';
import type { HandlerMap } from './service.js';

export type ImageHandlers = HandlerMap<ImageServiceHandlers>;

export function imageService(deps: Deps): ImageHandlers {
  return {
    ...imagePullHandlers(deps),
    ...imageStatusHandlers(deps),
  };
}
