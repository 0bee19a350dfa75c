/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A device-plugin-shaped gRPC server built on src/edge/grpc, with canned data, for the interop test
 * driven by a python grpcio client (interop.py). Usage: grpc-test-server SOCKET
 *
 * Serves Registration.Register and every DevicePlugin method. ListAndWatch sends the list at
 * once; a pusher thread (not the loop thread) then sends a new list every 100 ms with a changing
 * health pattern. Test-only methods under /gpuop.test.Control/ (raw bytes):
 *   Stats     → "opened=<n> closed=<n> cancelled=<n> deadline=<n> registered=<n>"
 *   Big       → a 5 MiB reply (above the 4 MiB send limit → RESOURCE_EXHAUSTED)
 *   Silent    → a handler that forgets to answer (→ INTERNAL)
 *   Shutdown  → the main thread frees the server (streams see UNAVAILABLE), then exits 0.
 * Receive limit: 64 KiB, so a larger request gets RESOURCE_EXHAUSTED.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "grpc.h"

#define MAX_WATCHERS 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct grpc_stream *watchers[MAX_WATCHERS];
static unsigned n_opened, n_closed, n_cancelled, n_deadline, n_registered;
static atomic_bool stop_pusher;
static int shutdown_pipe[2];

static const char *const device_ids[] = {"GPU-0a1b", "GPU-1c2d", "GPU-2e3f", "GPU-3a4b"};

static int send_list(struct grpc_stream *st, unsigned generation)
{
    V1beta1__Device devs[ARRAY_SIZE(device_ids)];
    V1beta1__Device *ptrs[ARRAY_SIZE(device_ids)];
    V1beta1__TopologyInfo topo = V1BETA1__TOPOLOGY_INFO__INIT;
    V1beta1__NUMANode node = V1BETA1__NUMANODE__INIT;
    V1beta1__NUMANode *nodes[] = {&node};
    node.id = 1;
    topo.n_nodes = 1;
    topo.nodes = nodes;
    for (size_t i = 0; i < ARRAY_SIZE(device_ids); i++) {
        v1beta1__device__init(&devs[i]);
        devs[i].id = (char *)device_ids[i];
        devs[i].health = (char *)((generation >> i) & 1 ? "Unhealthy" : "Healthy");
        devs[i].topology = &topo;
        ptrs[i] = &devs[i];
    }
    V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    resp.n_devices = ARRAY_SIZE(device_ids);
    resp.devices = ptrs;
    return grpc_stream_send_pb(st, &resp.base);
}

static void on_watch_closed(struct grpc_stream *st, int code, void *ud)
{
    (void)ud;
    pthread_mutex_lock(&mu);
    n_closed++;
    if (code == GRPC_STATUS_CANCELLED)
        n_cancelled++;
    if (code == GRPC_STATUS_DEADLINE_EXCEEDED)
        n_deadline++;
    for (size_t i = 0; i < MAX_WATCHERS; i++) {
        if (watchers[i] == st) {
            watchers[i] = NULL;
            grpc_stream_unref(st);
        }
    }
    pthread_mutex_unlock(&mu);
}

static void list_and_watch(struct grpc_stream *st, const ProtobufCMessage *req, void *ud)
{
    (void)req;
    (void)ud;
    send_list(st, 0);
    pthread_mutex_lock(&mu);
    n_opened++;
    for (size_t i = 0; i < MAX_WATCHERS; i++) {
        if (!watchers[i]) {
            watchers[i] = grpc_stream_ref(st);
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    grpc_stream_set_close_cb(st, on_watch_closed, NULL);
}

static void *pusher(void *arg)
{
    (void)arg;
    unsigned gen = 0;
    while (!atomic_load(&stop_pusher)) {
        usleep(100 * 1000);
        gen++;
        struct grpc_stream *batch[MAX_WATCHERS];
        size_t n = 0;
        pthread_mutex_lock(&mu);
        for (size_t i = 0; i < MAX_WATCHERS; i++)
            if (watchers[i])
                batch[n++] = grpc_stream_ref(watchers[i]);
        pthread_mutex_unlock(&mu);
        for (size_t i = 0; i < n; i++) {
            send_list(batch[i], gen); /* -EPIPE when the client just left: fine */
            grpc_stream_unref(batch[i]);
        }
    }
    return NULL;
}

static void get_options(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)req;
    (void)ud;
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    o.get_preferred_allocation_available = true;
    grpc_call_reply_pb(call, &o.base);
}

static void allocate(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)ud;
    const V1beta1__AllocateRequest *rq = (const V1beta1__AllocateRequest *)req;
    size_t n = rq->n_container_requests;
    if (n == 0) {
        grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "no container requests: 100%% empty");
        return;
    }
    V1beta1__ContainerAllocateResponse *cr = xcalloc(n, sizeof(*cr));
    V1beta1__ContainerAllocateResponse **crp = xcalloc(n, sizeof(*crp));
    V1beta1__ContainerAllocateResponse__EnvsEntry *env = xcalloc(n, sizeof(*env));
    V1beta1__ContainerAllocateResponse__EnvsEntry **envp = xcalloc(n, sizeof(*envp));
    char **vals = xcalloc(n, sizeof(*vals));
    bool too_long = false;
    for (size_t i = 0; i < n; i++) {
        struct sbuf b;
        sbuf_init(&b, 1 << 20);
        for (size_t j = 0; j < rq->container_requests[i]->n_devices_ids; j++)
            sbuf_addf(&b, "%s%s", j ? "," : "", rq->container_requests[i]->devices_ids[j]);
        if (sbuf_check(&b) < 0)
            too_long = true;
        vals[i] = sbuf_steal(&b);
        v1beta1__container_allocate_response__envs_entry__init(&env[i]);
        env[i].key = "NVIDIA_VISIBLE_DEVICES";
        env[i].value = vals[i];
        envp[i] = &env[i];
        v1beta1__container_allocate_response__init(&cr[i]);
        cr[i].n_envs = 1;
        cr[i].envs = &envp[i];
        crp[i] = &cr[i];
    }
    V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
    resp.n_container_responses = n;
    resp.container_responses = crp;
    if (too_long)
        grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "device list over 1 MiB");
    else
        grpc_call_reply_pb(call, &resp.base);
    for (size_t i = 0; i < n; i++)
        free(vals[i]);
    free(vals);
    free(envp);
    free(env);
    free(crp);
    free(cr);
}

static void preferred(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)ud;
    const V1beta1__PreferredAllocationRequest *rq =
        (const V1beta1__PreferredAllocationRequest *)req;
    size_t n = rq->n_container_requests;
    V1beta1__ContainerPreferredAllocationResponse *cr = xcalloc(n ? n : 1, sizeof(*cr));
    V1beta1__ContainerPreferredAllocationResponse **crp = xcalloc(n ? n : 1, sizeof(*crp));
    for (size_t i = 0; i < n; i++) {
        const V1beta1__ContainerPreferredAllocationRequest *r = rq->container_requests[i];
        v1beta1__container_preferred_allocation_response__init(&cr[i]);
        size_t k = r->allocation_size > 0 ? (size_t)r->allocation_size : 0;
        cr[i].n_deviceids = k < r->n_available_deviceids ? k : r->n_available_deviceids;
        cr[i].deviceids = r->available_deviceids; /* the first k available ones */
        crp[i] = &cr[i];
    }
    V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    resp.n_container_responses = n;
    resp.container_responses = crp;
    grpc_call_reply_pb(call, &resp.base);
    free(crp);
    free(cr);
}

static void prestart(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)req;
    (void)ud;
    V1beta1__PreStartContainerResponse resp = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
    grpc_call_reply_pb(call, &resp.base);
}

static void reg(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)ud;
    const V1beta1__RegisterRequest *rq = (const V1beta1__RegisterRequest *)req;
    if (strcmp(rq->version, "v1beta1") != 0) {
        grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "unsupported version \"%s\"",
                       rq->version);
        return;
    }
    pthread_mutex_lock(&mu);
    n_registered++;
    pthread_mutex_unlock(&mu);
    V1beta1__Empty resp = V1BETA1__EMPTY__INIT;
    grpc_call_reply_pb(call, &resp.base);
}

static void stats(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)req;
    (void)len;
    (void)ud;
    char buf[256];
    pthread_mutex_lock(&mu);
    int n = snprintf(buf, sizeof(buf), "opened=%u closed=%u cancelled=%u deadline=%u registered=%u",
                     n_opened, n_closed, n_cancelled, n_deadline, n_registered);
    pthread_mutex_unlock(&mu);
    grpc_call_reply(call, buf, (size_t)n);
}

static void big(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)req;
    (void)len;
    (void)ud;
    size_t n = 5u << 20;
    char *b = xcalloc(1, n);
    grpc_call_reply(call, b, n);
    free(b);
}

static void silent(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)call;
    (void)req;
    (void)len;
    (void)ud;
}

static void do_shutdown(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)req;
    (void)len;
    (void)ud;
    grpc_call_reply(call, "bye", 3);
    ssize_t r = write(shutdown_pipe[1], "x", 1);
    (void)r;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SOCKET\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (pipe(shutdown_pipe) < 0)
        return 1;
    struct err e = {0};
    struct grpc_options o = {.max_recv_msg = 64 << 10};
    struct grpc_server *s = NULL;
    const char *dp = "/v1beta1.DevicePlugin/";
    char path[128];
#define ADD_PB(kind, name, desc, fn)                                  \
    snprintf(path, sizeof(path), "%s%s", dp, name);                   \
    if (grpc_server_add_##kind##_pb(s, path, desc, fn, NULL, &e) < 0) \
        goto fail;
    if (grpc_server_new(&o, &s, &e) < 0)
        goto fail;
    ADD_PB(unary, "GetDevicePluginOptions", &v1beta1__empty__descriptor, get_options);
    ADD_PB(stream, "ListAndWatch", &v1beta1__empty__descriptor, list_and_watch);
    ADD_PB(unary, "GetPreferredAllocation", &v1beta1__preferred_allocation_request__descriptor,
           preferred);
    ADD_PB(unary, "Allocate", &v1beta1__allocate_request__descriptor, allocate);
    ADD_PB(unary, "PreStartContainer", &v1beta1__pre_start_container_request__descriptor, prestart);
    if (grpc_server_add_unary_pb(s, "/v1beta1.Registration/Register",
                                 &v1beta1__register_request__descriptor, reg, NULL, &e) < 0 ||
        grpc_server_add_unary(s, "/gpuop.test.Control/Stats", stats, NULL, &e) < 0 ||
        grpc_server_add_unary(s, "/gpuop.test.Control/Big", big, NULL, &e) < 0 ||
        grpc_server_add_unary(s, "/gpuop.test.Control/Silent", silent, NULL, &e) < 0 ||
        grpc_server_add_unary(s, "/gpuop.test.Control/Shutdown", do_shutdown, NULL, &e) < 0)
        goto fail;
    /* Registering twice is refused. */
    if (grpc_server_add_unary(s, "/gpuop.test.Control/Stats", stats, NULL, &e) != -EEXIST) {
        fprintf(stderr, "duplicate method was accepted\n");
        return 1;
    }
    if (grpc_server_start(s, argv[1], &e) < 0)
        goto fail;
    pthread_t th;
    pthread_create(&th, NULL, pusher, NULL);
    printf("READY\n");
    fflush(stdout);
    char c;
    ssize_t r = read(shutdown_pipe[0], &c, 1);
    (void)r;
    usleep(50 * 1000); /* let the Shutdown reply reach the client */
    grpc_server_free(s);
    atomic_store(&stop_pusher, true);
    pthread_join(th, NULL);
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < MAX_WATCHERS; i++)
        if (watchers[i])
            fprintf(stderr, "watcher %zu still held after shutdown\n", i);
    pthread_mutex_unlock(&mu);
    if (access(argv[1], F_OK) == 0) {
        fprintf(stderr, "socket %s left behind\n", argv[1]);
        return 1;
    }
    fprintf(stderr, "grpc-test-server: clean shutdown (closed=%u)\n", n_closed);
    return 0;
fail:
    fprintf(stderr, "grpc-test-server: %s\n", err_msg(&e));
    grpc_server_free(s);
    return 1;
}
