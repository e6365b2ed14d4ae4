/*
 * malloc_trim(3) for the daemon's own process, as a Node-API addon (see core/malloc-trim.ts for why).
 * Built by scripts/build-native.sh against the headers of the Node that builds it; Node-API keeps it loadable
 * by later Nodes too.
 */
#include <malloc.h>
#include <node_api.h>

/* mallocTrim(): whether glibc gave any memory back to the system. */
static napi_value trim(napi_env env, napi_callback_info info) {
    (void)info;
    napi_value released;
    if (napi_get_boolean(env, malloc_trim(0) == 1, &released) != napi_ok) return NULL;
    return released;
}

NAPI_MODULE_INIT(/* env, exports */) {
    napi_value fn;
    if (napi_create_function(env, "mallocTrim", NAPI_AUTO_LENGTH, trim, NULL, &fn) != napi_ok) return NULL;
    if (napi_set_named_property(env, exports, "mallocTrim", fn) != napi_ok) return NULL;
    return exports;
}
