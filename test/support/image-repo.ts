// A Map-backed ImageRepository for tests; the daemon persists records in sqlite instead.
import type { ImageRecord, ImageRepository } from '../../oci/image/types.js';

export class MemoryImageRepository implements ImageRepository {
  private readonly records = new Map<string, ImageRecord>();

  get(id: string): ImageRecord | undefined {
    const r = this.records.get(id);
    return r && structuredClone(r);
  }

  list(): ImageRecord[] {
    return [...this.records.values()].map((r) => structuredClone(r));
  }

  put(r: ImageRecord): void {
    this.records.set(r.id, structuredClone(r));
  }

  delete(id: string): void {
    this.records.delete(id);
  }
}
