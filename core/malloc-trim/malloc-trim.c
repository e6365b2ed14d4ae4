/*
 * malloc_trim(3) for the daemon's own process, as a Node-API addon (see core/malloc-trim.ts for why), and the
 * two calls that keep an unpack worker's malloc arena out of the daemon's forks (core/thread-arena.ts).
 * Built by scripts/build-native.sh against the headers of the Node that builds it; Node-API keeps it loadable
 * by later Nodes too.
 */
#include <malloc.h>
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* glibc's HEAP_MAX_SIZE on 64-bit: each heap of a thread's arena is a mapping of this size, aligned to it. */
#define ARENA_HEAP_BYTES (64UL << 20)

/* mallocTrim(): whether glibc gave any memory back to the system. */
static napi_value trim(napi_env env, napi_callback_info info) {
    (void)info;
    napi_value released;
    if (napi_get_boolean(env, malloc_trim(0) == 1, &released) != napi_ok) return NULL;
    return released;
}

/*
 * threadArenaHeap(): where the heap holding the calling thread's latest allocation starts, by glibc's alignment
 * of its thread heaps; 0 when that allocation lies below the program break (the main arena). The caller checks
 * the process's mappings before trusting it.
 */
static napi_value arena_heap(napi_env env, napi_callback_info info) {
    (void)info;
    void *p = malloc(64);
    uintptr_t at = (uintptr_t)p;
    free(p);
    uintptr_t heap = (p == NULL || at < (uintptr_t)sbrk(0)) ? 0 : at & ~(ARENA_HEAP_BYTES - 1);
    napi_value out;
    if (napi_create_double(env, (double)heap, &out) != napi_ok) return NULL;
    return out;
}

/* keepFromForks(start, length): madvise(MADV_DONTFORK) on the range; whether the kernel took it. */
static napi_value keep_from_forks(napi_env env, napi_callback_info info) {
    size_t argc = 2;
    napi_value argv[2];
    double start, length;
    if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2) return NULL;
    if (napi_get_value_double(env, argv[0], &start) != napi_ok || napi_get_value_double(env, argv[1], &length) != napi_ok) return NULL;
    napi_value out;
    int ok = madvise((void *)(uintptr_t)start, (size_t)length, MADV_DONTFORK) == 0;
    if (napi_get_boolean(env, ok, &out) != napi_ok) return NULL;
    return out;
}

static int export_fn(napi_env env, napi_value exports, const char *name, napi_callback cb) {
    napi_value fn;
    return napi_create_function(env, name, NAPI_AUTO_LENGTH, cb, NULL, &fn) == napi_ok
        && napi_set_named_property(env, exports, name, fn) == napi_ok;
}

NAPI_MODULE_INIT(/* env, exports */) {
    if (!export_fn(env, exports, "mallocTrim", trim)) return NULL;
    if (!export_fn(env, exports, "threadArenaHeap", arena_heap)) return NULL;
    if (!export_fn(env, exports, "keepFromForks", keep_from_forks)) return NULL;
    return exports;
}
