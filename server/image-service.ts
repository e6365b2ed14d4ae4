// ImageService: RPC name → handler.
import type { ImageServiceHandlers } from '../gen/runtime/v1/ImageService.js';
import type { Deps } from './deps.js';
import type { HandlerMap } from './service.js';

export type ImageHandlers = HandlerMap<ImageServiceHandlers>;

export function imageService(_deps: Deps): ImageHandlers {
  return {};
}
