// PullImage: fetch an image (or find it present) and answer its id.
import type { Deps } from '../pod/context.js';
import { InvalidArgument } from '../core/errors.js';
import type { ImageHandlers } from './image-service.js';

export function imagePullHandlers(deps: Deps): ImageHandlers {
  return {
    PullImage: async (request, ctx) => {
      const reference = request.image?.image ?? '';
      if (!reference) throw new InvalidArgument('PullImage needs an image reference');
      const a = request.auth;
      const auth = a ? {
        username: a.username || undefined, password: a.password || undefined, auth: a.auth || undefined,
        serverAddress: a.server_address || undefined, identityToken: a.identity_token || undefined, registryToken: a.registry_token || undefined,
      } : undefined;
      const image = await deps.images.pull(reference, auth);
      ctx.log.info({ image: reference, id: image.id }, 'image pulled');
      return { image_ref: image.id };
    },
  };
}
