// StreamImages: ListImages' answer in chunks (cri-api 1.35+).
import type { Edge } from '../edge.js';
import { streamedList } from '../list-streams.js';
import type { ImageRpc } from '../service.js';
import { ListImages } from './list-images.js';

export function StreamImages(edge: Edge): ImageRpc<'StreamImages'> {
  const list = ListImages(edge);
  return streamedList('images', async (request, ctx) => (await list(request, ctx)).images ?? []);
}
