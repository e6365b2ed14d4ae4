/*
 * malloc_trim(3) and glibc's trim threshold for the daemon's own process, as a Node-API addon (see
 * core/malloc-trim.ts for why).
 * Built by scripts/build-native.sh against the headers of the Node that builds it; Node-API keeps it loadable
 * by later Nodes too.
 */
#include <malloc.h>
#include <stdint.h>
#include <node_api.h>

/* mallocTrim(): whether glibc gave any memory back to the system. */
static napi_value trim(napi_env env, napi_callback_info info) {
    (void)info;
    napi_value released;
    if (napi_get_boolean(env, malloc_trim(0) == 1, &released) != napi_ok) return NULL;
    return released;
}

/* setTrimThreshold(bytes): how much free memory the top of an arena may hold before free() hands it back. */
static napi_value trim_threshold(napi_env env, napi_callback_info info) {
    size_t argc = 1;
    napi_value arg = NULL;
    napi_valuetype type = napi_undefined;
    double bytes;
    if (napi_get_cb_info(env, info, &argc, &arg, NULL, NULL) != napi_ok) return NULL;
    if (argc < 1 || napi_typeof(env, arg, &type) != napi_ok || type != napi_number) {
        napi_throw_type_error(env, NULL, "setTrimThreshold takes a byte count");
        return NULL;
    }
    if (napi_get_value_double(env, arg, &bytes) != napi_ok) return NULL;
    if (!(bytes >= 0 && bytes <= INT32_MAX) || bytes != (double)(int32_t)bytes) {
        napi_throw_range_error(env, NULL, "setTrimThreshold takes a whole byte count from 0 to 2^31 - 1");
        return NULL;
    }
    if (mallopt(M_TRIM_THRESHOLD, (int)bytes) != 1) {
        napi_throw_error(env, NULL, "glibc refused the trim threshold");
        return NULL;
    }
    return NULL;
}

static int export_function(napi_env env, napi_value exports, const char *name, napi_callback cb) {
    napi_value fn;
    return napi_create_function(env, name, NAPI_AUTO_LENGTH, cb, NULL, &fn) == napi_ok
        && napi_set_named_property(env, exports, name, fn) == napi_ok;
}

NAPI_MODULE_INIT(/* env, exports */) {
    if (!export_function(env, exports, "mallocTrim", trim)) return NULL;
    if (!export_function(env, exports, "setTrimThreshold", trim_threshold)) return NULL;
    return exports;
}
