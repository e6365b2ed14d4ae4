/*
 * zstd decoding in steps, for a Node without zstd of its own (before 22.15): each call decodes what fits in the
 * caller's output buffer and says how much input it took, so the JS side can stop whenever its reader is full.
 * libzstd keeps its default window limit (128 MiB): a frame asking for more is refused.
 */
#include <node_api.h>
#include <stdlib.h>
#include <zstd.h>

#define CHECK(call) do { if ((call) != napi_ok) { napi_throw_error(env, NULL, "zstd-stream: N-API call failed"); return NULL; } } while (0)

static void release(napi_env env, void *data, void *hint) {
  (void)env; (void)hint;
  ZSTD_freeDStream((ZSTD_DStream *)data);
}

/* open(): a new decoding context, freed when the handle is collected. */
static napi_value open_stream(napi_env env, napi_callback_info info) {
  (void)info;
  ZSTD_DStream *ds = ZSTD_createDStream();
  if (ds == NULL) { napi_throw_error(env, NULL, "zstd: out of memory"); return NULL; }
  napi_value handle;
  CHECK(napi_create_external(env, ds, release, NULL, &handle));
  return handle;
}

/* step(handle, input, offset, output) -> [bytes of input taken, bytes of output made, 0 when a frame just ended] */
static napi_value step(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 4) { napi_throw_type_error(env, NULL, "zstd-stream: step takes 4 arguments"); return NULL; }
  void *ds;
  void *in, *out;
  size_t in_len, out_len;
  uint32_t offset;
  CHECK(napi_get_value_external(env, argv[0], &ds));
  CHECK(napi_get_buffer_info(env, argv[1], &in, &in_len));
  CHECK(napi_get_value_uint32(env, argv[2], &offset));
  CHECK(napi_get_buffer_info(env, argv[3], &out, &out_len));
  if (offset > in_len) { napi_throw_range_error(env, NULL, "zstd-stream: offset past the input"); return NULL; }
  ZSTD_inBuffer src = { (const char *)in + offset, in_len - offset, 0 };
  ZSTD_outBuffer dst = { out, out_len, 0 };
  size_t hint = ZSTD_decompressStream((ZSTD_DStream *)ds, &dst, &src);
  if (ZSTD_isError(hint)) { napi_throw_error(env, NULL, ZSTD_getErrorName(hint)); return NULL; }
  napi_value result, taken, made, left;
  CHECK(napi_create_array_with_length(env, 3, &result));
  CHECK(napi_create_uint32(env, (uint32_t)src.pos, &taken));
  CHECK(napi_create_uint32(env, (uint32_t)dst.pos, &made));
  CHECK(napi_create_double(env, (double)hint, &left));
  CHECK(napi_set_element(env, result, 0, taken));
  CHECK(napi_set_element(env, result, 1, made));
  CHECK(napi_set_element(env, result, 2, left));
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "open", NULL, open_stream, NULL, NULL, NULL, napi_default, NULL },
    { "step", NULL, step, NULL, NULL, NULL, napi_default, NULL },
  };
  CHECK(napi_define_properties(env, exports, 2, props));
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
