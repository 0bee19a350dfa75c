/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-devices and kl-cdi: CDI resolution against a node root (parsing is src/edge/cdi's, tested in
 * tests/cdi); the Registration service's validation; a fake device plugin
 * (src/edge/grpc server in this process) driving health, preferred allocation, Allocate's response
 * and a stream that ends; the checkpoint refused when corrupt. No root needed: sockets live in a
 * temporary node root.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cmocka.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "grpc.h"
#include "kl-cdi.h"
#include "kl-devices.h"

static char tmp[256];

static char *root_path(const char *sub)
{
    return xasprintf("%s/%s", tmp, sub);
}

static void write_file(const char *path, const char *text)
{
    char *dir = xstrdup(path);
    *strrchr(dir, '/') = 0;
    assert_int_equal(mkdir_p(dir, 0755), 0);
    free(dir);
    struct err e = {0};
    assert_int_equal(file_write_atomic(path, text, strlen(text), 0644, &e), 0);
}

/* ---- CDI ----------------------------------------------------------------------------------- */

static const char spec_yaml[] =
    "cdiVersion: 0.5.0\n"
    "kind: nvidia.com/gpu\n"
    "containerEdits:\n"
    "  env: [NVIDIA_VISIBLE_DEVICES=void]\n"
    "  deviceNodes: [{path: /dev/nvidiactl}]\n"
    "  mounts:\n"
    "  - {hostPath: /usr/lib/libcuda.so.1, containerPath: "
    "/usr/lib/libcuda.so.1, options: [ro, nosuid, bind]}\n"
    "  hooks:\n"
    "  - {hookName: createContainer, path: /usr/bin/nvidia-cdi-hook,"
    " args: [nvidia-cdi-hook, update-ldcache]}\n"
    "devices:\n"
    "- name: \"0\"\n"
    "  containerEdits:\n"
    "    deviceNodes: [{path: /dev/nvidia0}]\n"
    "- name: all\n"
    "  containerEdits:\n"
    "    deviceNodes: [{path: /dev/nvidia0}, {path: /dev/nvidia1, type: c, major: 195, minor: 1, "
    "fileMode: 384, uid: 7, gid: 8}]\n"
    "- name: GPU-aaaa\n"
    "  containerEdits:\n"
    "    env: [GPU_NAME=aaaa]\n"
    "    deviceNodes: [{path: /dev/nvidia0, hostPath: /dev/nvidia7}]\n";

/* ---- CDI: resolve --------------------------------------------------------------------------- */

static bool strv_has(char **v, const char *s)
{
    for (; v && *v; v++)
        if (strcmp(*v, s) == 0)
            return true;
    return false;
}

/* The device a has at container path, with that host path. */
static const struct kl_alloc_device *has_dev(const struct kl_alloc *a, const char *path,
                                             const char *host)
{
    for (size_t i = 0; i < a->n_devices; i++)
        if (strcmp(a->devices[i].path, path) == 0 && strcmp(a->devices[i].host_path, host) == 0)
            return &a->devices[i];
    return NULL;
}

static void test_cdi_resolve(void **state)
{
    (void)state;
    char *spec = root_path("etc/cdi/nvidia.yaml");
    write_file(spec, spec_yaml);
    /* A later directory wins for the same name: GPU-aaaa with another env there. */
    char *over = root_path("var/run/cdi/override.json");
    write_file(over, "{\"cdiVersion\":\"0.6.0\",\"kind\":\"nvidia.com/gpu\",\"devices\":[{\"name\":"
                     "\"GPU-aaaa\",\"containerEdits\":{\"env\":[\"GPU_NAME=override\"]}}]}");
    char *broken = root_path("var/run/cdi/broken.yaml");
    write_file(broken, "cdiVersion: 0.1.0\nkind: other.com/x\ndevices: []\n");

    struct kl_alloc *a = xcalloc(1, sizeof(*a));
    a->annotations = json_object();
    struct err e = {0};
    const char *names[] = {"nvidia.com/gpu=0", "nvidia.com/gpu=GPU-aaaa", NULL};
    assert_int_equal(kl_cdi_resolve(tmp, names, a, &e), 0);
    assert_true(strv_has(a->envs, "NVIDIA_VISIBLE_DEVICES=void"));
    assert_true(strv_has(a->envs, "GPU_NAME=override"));
    char *ctl = root_path("dev/nvidiactl"), *n0 = root_path("dev/nvidia0");
    assert_non_null(has_dev(a, "/dev/nvidiactl", ctl));
    const struct kl_alloc_device *d0 = has_dev(a, "/dev/nvidia0", n0);
    assert_non_null(d0);
    assert_false(d0->has_numbers); /* read from the host's node when the container is made */
    assert_int_equal(d0->type, 0);
    assert_int_equal(a->n_devices, 2); /* GPU-aaaa's /dev/nvidia0 is the one "0" gave */
    assert_int_equal(a->n_mounts, 1);
    char *lib = root_path("usr/lib/libcuda.so.1");
    assert_string_equal(a->mounts[0].source, lib);
    assert_string_equal(a->mounts[0].target, "/usr/lib/libcuda.so.1");
    assert_true(a->mounts[0].read_only);
    kl_alloc_free(a);

    /* "all" is a device the spec defines. */
    a = xcalloc(1, sizeof(*a));
    a->annotations = json_object();
    const char *all[] = {"nvidia.com/gpu=all", NULL};
    assert_int_equal(kl_cdi_resolve(tmp, all, a, &e), 0);
    char *n1 = root_path("dev/nvidia1");
    const struct kl_alloc_device *d1 = has_dev(a, "/dev/nvidia1", n1);
    assert_non_null(d1);
    assert_int_equal(d1->type, 'c');
    assert_true(d1->has_numbers && d1->has_mode && d1->has_uid && d1->has_gid);
    assert_int_equal(d1->major, 195);
    assert_int_equal(d1->minor, 1);
    assert_int_equal(d1->file_mode, 0600);
    assert_int_equal(d1->uid, 7);
    assert_int_equal(d1->gid, 8);

    /* Unknown names: containerd's words, every one named, and the spec that did not parse. */
    const char *bad[] = {"nvidia.com/gpu=9", "other.com/x=1", "nvidia.com/gpu=0", NULL};
    assert_int_equal(kl_cdi_resolve(tmp, bad, a, &e), -ENOENT);
    assert_non_null(
        strstr(err_msg(&e), "unresolvable CDI devices nvidia.com/gpu=9, other.com/x=1"));
    assert_non_null(strstr(err_msg(&e), "broken.yaml.cdiVersion"));
    kl_alloc_free(a);
    free(spec), free(over), free(broken), free(ctl), free(n0), free(n1), free(lib);
}

/* ---- a fake device plugin ------------------------------------------------------------------- */

struct fake {
    pthread_mutex_t mu;
    struct grpc_server *srv;
    struct grpc_stream *watch;
    int allocs, preferred, prestarts;
    char last_alloc[256];
};
static struct fake fk = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void fake_options(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)req, (void)ud;
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    o.get_preferred_allocation_available = true;
    o.pre_start_required = true;
    grpc_call_reply_pb(call, &o.base);
}

static void fake_prestart(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)ud;
    const V1beta1__PreStartContainerRequest *rq = (const V1beta1__PreStartContainerRequest *)req;
    fk.prestarts += (int)rq->n_devices_ids;
    V1beta1__PreStartContainerResponse resp = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
    grpc_call_reply_pb(call, &resp.base);
}

static void fake_watch(struct grpc_stream *st, const ProtobufCMessage *req, void *ud)
{
    (void)req, (void)ud;
    pthread_mutex_lock(&fk.mu);
    grpc_stream_unref(fk.watch);
    fk.watch = grpc_stream_ref(st);
    pthread_mutex_unlock(&fk.mu);
}

/* Prefers the last `size` available devices, so the test sees its choice was used. */
static void fake_preferred(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)ud;
    const V1beta1__PreferredAllocationRequest *rq =
        (const V1beta1__PreferredAllocationRequest *)req;
    const V1beta1__ContainerPreferredAllocationRequest *cr = rq->container_requests[0];
    V1beta1__ContainerPreferredAllocationResponse c =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_RESPONSE__INIT;
    c.n_deviceids = (size_t)cr->allocation_size;
    c.deviceids = cr->available_deviceids + (cr->n_available_deviceids - c.n_deviceids);
    V1beta1__ContainerPreferredAllocationResponse *cp = &c;
    V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    resp.n_container_responses = 1;
    resp.container_responses = &cp;
    fk.preferred++;
    grpc_call_reply_pb(call, &resp.base);
}

static void fake_allocate(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)ud;
    const V1beta1__AllocateRequest *rq = (const V1beta1__AllocateRequest *)req;
    const V1beta1__ContainerAllocateRequest *cr = rq->container_requests[0];
    fk.last_alloc[0] = 0;
    for (size_t i = 0; i < cr->n_devices_ids; i++) {
        strncat(fk.last_alloc, i ? "," : "", sizeof(fk.last_alloc) - strlen(fk.last_alloc) - 1);
        strncat(fk.last_alloc, cr->devices_ids[i],
                sizeof(fk.last_alloc) - strlen(fk.last_alloc) - 1);
    }
    V1beta1__ContainerAllocateResponse__EnvsEntry env =
        V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ENVS_ENTRY__INIT;
    env.key = (char *)"FAKE_DEVICES";
    env.value = fk.last_alloc;
    V1beta1__ContainerAllocateResponse__EnvsEntry *envp = &env;
    V1beta1__ContainerAllocateResponse__AnnotationsEntry an =
        V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ANNOTATIONS_ENTRY__INIT;
    an.key = (char *)"cdi.k8s.io/fake";
    an.value = (char *)"example.com/dev=a,example.com/dev=b";
    V1beta1__ContainerAllocateResponse__AnnotationsEntry *anp = &an;
    V1beta1__Mount m = V1BETA1__MOUNT__INIT;
    m.host_path = (char *)"/host/lib";
    m.container_path = (char *)"/lib/fake";
    m.read_only = true;
    V1beta1__Mount *mp = &m;
    V1beta1__DeviceSpec ds = V1BETA1__DEVICE_SPEC__INIT;
    ds.host_path = (char *)"/dev/fake0";
    ds.container_path = (char *)"/dev/fake0";
    V1beta1__DeviceSpec *dsp = &ds;
    V1beta1__CDIDevice cdi = V1BETA1__CDIDEVICE__INIT;
    cdi.name = (char *)"example.com/dev=c";
    V1beta1__CDIDevice *cdip = &cdi;
    V1beta1__ContainerAllocateResponse c = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
    c.n_envs = 1, c.envs = &envp;
    c.n_annotations = 1, c.annotations = &anp;
    c.n_mounts = 1, c.mounts = &mp;
    c.n_devices = 1, c.devices = &dsp;
    c.n_cdi_devices = 1, c.cdi_devices = &cdip;
    V1beta1__ContainerAllocateResponse *cp = &c;
    V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
    resp.n_container_responses = 1;
    resp.container_responses = &cp;
    fk.allocs++;
    grpc_call_reply_pb(call, &resp.base);
}

static void fake_start(void)
{
    struct err e = {0};
    char *sock = root_path("var/lib/kubelet/device-plugins/fake.sock");
    assert_int_equal(grpc_server_new(NULL, &fk.srv, &e), 0);
    assert_int_equal(grpc_server_add_unary_pb(fk.srv,
                                              "/v1beta1.DevicePlugin/GetDevicePluginOptions",
                                              &v1beta1__empty__descriptor, fake_options, NULL, &e),
                     0);
    assert_int_equal(grpc_server_add_stream_pb(fk.srv, "/v1beta1.DevicePlugin/ListAndWatch",
                                               &v1beta1__empty__descriptor, fake_watch, NULL, &e),
                     0);
    assert_int_equal(grpc_server_add_unary_pb(fk.srv,
                                              "/v1beta1.DevicePlugin/GetPreferredAllocation",
                                              &v1beta1__preferred_allocation_request__descriptor,
                                              fake_preferred, NULL, &e),
                     0);
    assert_int_equal(grpc_server_add_unary_pb(fk.srv, "/v1beta1.DevicePlugin/Allocate",
                                              &v1beta1__allocate_request__descriptor, fake_allocate,
                                              NULL, &e),
                     0);
    assert_int_equal(grpc_server_add_unary_pb(fk.srv, "/v1beta1.DevicePlugin/PreStartContainer",
                                              &v1beta1__pre_start_container_request__descriptor,
                                              fake_prestart, NULL, &e),
                     0);
    assert_int_equal(grpc_server_start(fk.srv, sock, &e), 0);
    free(sock);
}

static void fake_stop(void)
{
    pthread_mutex_lock(&fk.mu);
    struct grpc_stream *w = fk.watch;
    fk.watch = NULL;
    pthread_mutex_unlock(&fk.mu);
    grpc_stream_unref(w);
    grpc_server_free(fk.srv);
    fk.srv = NULL;
}

/* Sends a device list: ids with health flags ('H'ealthy / 'U'nhealthy). */
static void fake_send(const char *const *ids, const char *health)
{
    size_t n = strlen(health);
    V1beta1__Device devs[8], *dp[8];
    for (size_t i = 0; i < n; i++) {
        v1beta1__device__init(&devs[i]);
        devs[i].id = (char *)ids[i];
        devs[i].health = (char *)(health[i] == 'H' ? "Healthy" : "Unhealthy");
        dp[i] = &devs[i];
    }
    V1beta1__ListAndWatchResponse u = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    u.n_devices = n;
    u.devices = dp;
    pthread_mutex_lock(&fk.mu);
    assert_non_null(fk.watch);
    assert_int_equal(grpc_stream_send_pb(fk.watch, &u.base), 0);
    pthread_mutex_unlock(&fk.mu);
}

static bool fake_watching(void)
{
    pthread_mutex_lock(&fk.mu);
    bool w = fk.watch && grpc_stream_is_open(fk.watch);
    pthread_mutex_unlock(&fk.mu);
    return w;
}

static int register_as(const char *version, const char *name, const char *endpoint, char *msg,
                       size_t msg_size)
{
    struct err e = {0};
    char *ks = root_path("var/lib/kubelet/device-plugins/kubelet.sock");
    struct grpc_client *c = NULL;
    int r = grpc_client_connect(ks, 2000, NULL, &c, &e);
    free(ks);
    if (r < 0)
        return r;
    V1beta1__RegisterRequest rq = V1BETA1__REGISTER_REQUEST__INIT;
    rq.version = (char *)version;
    rq.resource_name = (char *)name;
    rq.endpoint = (char *)endpoint;
    ProtobufCMessage *resp = NULL;
    int code = 0;
    r = grpc_client_unary_pb(c, "/v1beta1.Registration/Register", &rq.base,
                             &v1beta1__empty__descriptor, 2000, &resp, &code, &e);
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    grpc_client_free(c);
    snprintf(msg, msg_size, "%s", err_msg(&e));
    return r;
}

static int changes;
static void on_change(void *ud)
{
    (void)ud;
    __atomic_add_fetch(&changes, 1, __ATOMIC_SEQ_CST);
}

static long field(struct kl_devices *d, const char *res, const char *key)
{
    json_t *j = kl_devices_resources(d);
    json_t *v = json_object_get(json_object_get(j, res), key);
    long n = json_is_integer(v) ? (long)json_integer_value(v) : -1;
    json_decref(j);
    return n;
}

static bool wait_for(struct kl_devices *d, const char *res, long allocatable, long capacity)
{
    for (int i = 0; i < 300; i++) {
        if (field(d, res, "allocatable") == allocatable && field(d, res, "capacity") == capacity)
            return true;
        usleep(10000);
    }
    return false;
}

static bool wait_watching(void)
{
    for (int i = 0; i < 300 && !fake_watching(); i++)
        usleep(10000);
    return fake_watching();
}

static struct kl_devices *manager(void)
{
    struct kl_devices_config cfg = {.root = tmp, .node_name = "t", .on_change = on_change};
    struct kl_devices *d = NULL;
    struct err e = {0};
    if (kl_devices_new(&cfg, &d, &e) < 0)
        fail_msg("kl_devices_new: %s", err_msg(&e));
    return d;
}

static void test_registration_validation(void **state)
{
    (void)state;
    struct kl_devices *d = manager();
    char msg[ERR_MSG_MAX];
    static const struct {
        const char *version, *name, *endpoint, *want;
    } bad[] = {
        {"v1alpha", "example.com/dev", "x.sock", "requested API version \"v1alpha\""},
        {"v1beta1", "dev", "x.sock", "the ResourceName \"dev\" is invalid"},
        {"v1beta1", "kubernetes.io/dev", "x.sock", "is invalid"},
        {"v1beta1", "example.com/-dev", "x.sock", "is invalid"},
        {"v1beta1", "Example.com/dev", "x.sock", "is invalid"},
        {"v1beta1", "example.com/a/b", "x.sock", "is invalid"},
        {"v1beta1", "example.com/dev", "../x.sock", "the endpoint \"../x.sock\" is invalid"},
        {"v1beta1", "example.com/dev", "", "the endpoint \"\" is invalid"},
        {"v1beta1", "example.com/dev", "kubelet.sock", "is invalid"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        int r = register_as(bad[i].version, bad[i].name, bad[i].endpoint, msg, sizeof(msg));
        if (r >= 0 || !strstr(msg, bad[i].want))
            fail_msg("case %zu: r=%d \"%s\", want \"%s\"", i, r, msg, bad[i].want);
    }
    json_t *res = kl_devices_resources(d);
    assert_int_equal(json_object_size(res), 0);
    json_decref(res);
    kl_devices_free(d);
}

struct racer {
    struct kl_devices *d;
    char uid[16];
    int r;
    char got[64];
};

static void *race_one(void *arg)
{
    struct racer *rc = arg;
    json_t *one = json_pack("{s:i}", "example.com/dev", 1);
    struct kl_alloc *a = NULL;
    struct err e = {0};
    rc->r = kl_devices_allocate(rc->d, rc->uid, "ns", rc->uid, "c", one, &a, &e);
    for (char **v = a ? a->envs : NULL; v && *v; v++)
        if (str_has_prefix(*v, "FAKE_DEVICES="))
            snprintf(rc->got, sizeof(rc->got), "%s", *v + 13);
    kl_alloc_free(a);
    json_decref(one);
    return NULL;
}

/* Many containers at once: each device goes to one of them, the rest get -ENOSPC. */
static void race(struct kl_devices *d, size_t n_free)
{
    struct racer rc[8];
    pthread_t th[8];
    for (size_t i = 0; i < 8; i++) {
        rc[i] = (struct racer){.d = d};
        snprintf(rc[i].uid, sizeof(rc[i].uid), "race-%zu", i);
        assert_int_equal(pthread_create(&th[i], NULL, race_one, &rc[i]), 0);
    }
    size_t ok = 0;
    for (size_t i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        if (rc[i].r == 0) {
            ok++;
            for (size_t k = 0; k < i; k++)
                assert_true(rc[k].r != 0 || strcmp(rc[k].got, rc[i].got) != 0);
        } else {
            assert_int_equal(rc[i].r, -ENOSPC);
        }
    }
    assert_int_equal(ok, n_free);
    for (size_t i = 0; i < 8; i++)
        kl_devices_release(d, rc[i].uid);
}

static void test_fake_plugin(void **state)
{
    (void)state;
    char *ckpt = root_path("var/lib/kubelet/device-plugins/kubelet_internal_checkpoint");
    unlink(ckpt);
    struct kl_devices *d = manager();
    const char *ids[] = {"d0", "d1", "d2", "d3"};
    char msg[ERR_MSG_MAX];
    struct err e = {0};
    json_t *req = json_pack("{s:i}", "example.com/dev", 2);
    struct kl_alloc *a = NULL;

    /* Not registered yet: a resource nobody serves is no device resource. */
    assert_int_equal(kl_devices_allocate(d, "u0", "ns", "p0", "c", req, &a, &e), 0);
    assert_null(a->envs[0]);
    kl_alloc_free(a);

    fake_start();
    assert_int_equal(register_as("v1beta1", "example.com/dev", "fake.sock", msg, sizeof(msg)), 0);
    assert_true(wait_watching());
    int before = __atomic_load_n(&changes, __ATOMIC_SEQ_CST);
    fake_send(ids, "HHHU");
    assert_true(wait_for(d, "example.com/dev", 3, 4));
    /* on_change runs after the lock is released: give it its moment. */
    for (int i = 0; i < 300 && __atomic_load_n(&changes, __ATOMIC_SEQ_CST) == before; i++)
        usleep(10000);
    assert_true(__atomic_load_n(&changes, __ATOMIC_SEQ_CST) > before);

    /* The preferred set (the last two available: d1, d2; d3 is unhealthy) is allocated. */
    a = NULL;
    assert_int_equal(kl_devices_allocate(d, "u1", "ns", "p1", "c", req, &a, &e), 0);
    assert_int_equal(fk.preferred, 1);
    assert_string_equal(fk.last_alloc, "d1,d2");
    assert_int_equal(fk.prestarts, 2); /* the options asked for PreStartContainer */
    assert_true(strv_has(a->envs, "FAKE_DEVICES=d1,d2"));
    assert_true(strv_has(a->cdi_devices, "example.com/dev=a"));
    assert_true(strv_has(a->cdi_devices, "example.com/dev=b"));
    assert_true(strv_has(a->cdi_devices, "example.com/dev=c"));
    char *fake0 = root_path("dev/fake0"); /* a DeviceSpec's host path is the node's */
    assert_non_null(has_dev(a, "/dev/fake0", fake0));
    free(fake0);
    assert_int_equal(a->n_mounts, 1);
    assert_string_equal(a->mounts[0].source, "/host/lib");
    assert_true(a->mounts[0].read_only);
    assert_string_equal(json_string_value(json_object_get(a->annotations, "cdi.k8s.io/fake")),
                        "example.com/dev=a,example.com/dev=b");
    kl_alloc_free(a);

    /* One healthy device left: two more fail with the kubelet's words, and nothing is kept. */
    a = NULL;
    assert_int_equal(kl_devices_allocate(d, "u2", "ns", "p2", "c", req, &a, &e), -ENOSPC);
    assert_non_null(strstr(err_msg(&e), "Requested: 2, Available: 1"));
    assert_null(a);

    /* Health: d3 recovers, d0 fails; a device that vanishes from the list is gone. */
    fake_send(ids, "UHHH");
    assert_true(wait_for(d, "example.com/dev", 3, 4));
    fake_send(ids, "HHH");
    assert_true(wait_for(d, "example.com/dev", 3, 3));

    /* The stream ends: capacity stays, nothing allocatable, allocation -EAGAIN. */
    pthread_mutex_lock(&fk.mu);
    grpc_stream_finish(fk.watch, GRPC_STATUS_UNAVAILABLE, "going away");
    pthread_mutex_unlock(&fk.mu);
    assert_true(wait_for(d, "example.com/dev", 0, 3));
    json_t *one = json_pack("{s:i}", "example.com/dev", 1);
    assert_int_equal(kl_devices_allocate(d, "u3", "ns", "p3", "c", one, &a, &e), -EAGAIN);
    /* ... but a recorded container still gets its recorded response. */
    assert_int_equal(kl_devices_allocate(d, "u1", "ns", "p1", "c", req, &a, &e), 0);
    assert_true(strv_has(a->envs, "FAKE_DEVICES=d1,d2"));
    kl_alloc_free(a);

    /* Re-registration replaces the plugin; its stream brings the devices back. */
    assert_int_equal(register_as("v1beta1", "example.com/dev", "fake.sock", msg, sizeof(msg)), 0);
    for (int i = 0; i < 300; i++) {
        pthread_mutex_lock(&fk.mu);
        bool fresh = fk.watch && grpc_stream_is_open(fk.watch);
        pthread_mutex_unlock(&fk.mu);
        if (fresh)
            break;
        usleep(10000);
    }
    fake_send(ids, "HHHH");
    assert_true(wait_for(d, "example.com/dev", 4, 4));

    /* A restart keeps u1's devices from the checkpoint (d1, d2 stay taken). */
    kl_devices_free(d);
    fake_stop();
    d = manager();
    fake_start();
    assert_int_equal(register_as("v1beta1", "example.com/dev", "fake.sock", msg, sizeof(msg)), 0);
    assert_true(wait_watching());
    fake_send(ids, "HHHH");
    assert_true(wait_for(d, "example.com/dev", 4, 4));
    json_t *three = json_pack("{s:i}", "example.com/dev", 3);
    assert_int_equal(kl_devices_allocate(d, "u4", "ns", "p4", "c", three, &a, &e), -ENOSPC);
    a = NULL;
    assert_int_equal(kl_devices_allocate(d, "u4", "ns", "p4", "c", req, &a, &e), 0);
    assert_true(strv_has(a->envs, "FAKE_DEVICES=d0,d3") || strv_has(a->envs, "FAKE_DEVICES=d3,d0"));
    kl_alloc_free(a);
    kl_devices_free(d);
    fake_stop();

    /* A tampered checkpoint is refused (start without it), not trusted. */
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(file_read_all(ckpt, 1 << 20, &text, &len, &e), 0);
    char *p = strstr(text, "\"u4\"");
    assert_non_null(p);
    p[2] = '9';
    write_file(ckpt, text);
    free(text);
    d = manager();
    fake_start();
    assert_int_equal(register_as("v1beta1", "example.com/dev", "fake.sock", msg, sizeof(msg)), 0);
    assert_true(wait_watching());
    fake_send(ids, "HHHH");
    assert_true(wait_for(d, "example.com/dev", 4, 4));
    race(d, 4);
    json_t *four = json_pack("{s:i}", "example.com/dev", 4);
    a = NULL;
    assert_int_equal(kl_devices_allocate(d, "u5", "ns", "p5", "c", four, &a, &e), 0);
    kl_alloc_free(a);
    kl_devices_free(d);
    fake_stop();

    json_decref(req);
    json_decref(one);
    json_decref(three);
    json_decref(four);
    free(ckpt);
}

/* kl_device_resolve: what an entry leaves out comes from the host's node; without one, an error
 * in containerd's words. */
static void test_device_resolve(void **state)
{
    (void)state;
    const struct stat chr = {
        .st_mode = S_IFCHR | 0660, .st_rdev = makedev(195, 3), .st_uid = 1, .st_gid = 44};
    const struct stat blk = {.st_mode = S_IFBLK | 0600, .st_rdev = makedev(8, 0)};
    const struct stat reg = {.st_mode = S_IFREG | 0644};
    const struct {
        struct kl_alloc_device in;
        const struct stat *host;
        int host_errno;
        int code;
        const char *msg;
        struct kl_device want;
    } cases[] = {
        /* nothing given: all from the host's node */
        {{.path = "/dev/nvidia0", .host_path = "/r/dev/nvidia3"},
         &chr,
         0,
         0,
         NULL,
         {"/dev/nvidia0", 'c', 195, 3, 0660, 1, 44}},
        {{.path = "/dev/sda", .host_path = "/dev/sda"},
         &blk,
         0,
         0,
         NULL,
         {"/dev/sda", 'b', 8, 0, 0600, 0, 0}},
        /* a mode and owner given win over the host's */
        {{.path = "/dev/x",
          .host_path = "/h",
          .has_mode = true,
          .file_mode = 0640,
          .has_gid = true,
          .gid = 9},
         &chr,
         0,
         0,
         NULL,
         {"/dev/x", 'c', 195, 3, 0640, 1, 9}},
        /* type and numbers given: the host's node is not needed; runc's 0666, root */
        {{.path = "/dev/nvidia1",
          .host_path = "/gone",
          .type = 'c',
          .has_numbers = true,
          .major = 195,
          .minor = 1},
         NULL,
         ENOENT,
         0,
         NULL,
         {"/dev/nvidia1", 'c', 195, 1, 0666, 0, 0}},
        /* numbers without a type: the host's node is read, and missing */
        {{.path = "/dev/nvidia1", .host_path = "/gone", .has_numbers = true, .major = 195},
         NULL,
         ENOENT,
         -ENOENT,
         "error gathering device information while adding custom device \"/gone\": No such "
         "file or directory",
         {0}},
        {{.path = "/dev/nvidiactl", .host_path = "/r/dev/nvidiactl"},
         NULL,
         EACCES,
         -EACCES,
         "error gathering device information while adding custom device \"/r/dev/nvidiactl\": "
         "Permission denied",
         {0}},
        {{.path = "/dev/nvidia0", .host_path = "/r/file"},
         &reg,
         0,
         -ENODEV,
         "device \"/dev/nvidia0\": \"/r/file\" is not a device node",
         {0}},
        {{.path = "/dev/p", .host_path = "/p", .type = 'p', .has_numbers = true},
         NULL,
         ENOENT,
         -EINVAL,
         "device \"/dev/p\": type 'p' is not c or b",
         {0}},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct kl_device got = {0};
        struct err e = {0};
        int r = kl_device_resolve(&cases[i].in, cases[i].host, cases[i].host_errno, &got, &e);
        assert_int_equal(r, cases[i].code);
        if (r < 0) {
            assert_string_equal(err_msg(&e), cases[i].msg);
            continue;
        }
        assert_string_equal(got.path, cases[i].want.path);
        assert_int_equal(got.type, cases[i].want.type);
        assert_int_equal(got.major, cases[i].want.major);
        assert_int_equal(got.minor, cases[i].want.minor);
        assert_int_equal(got.file_mode, cases[i].want.file_mode);
        assert_int_equal(got.uid, cases[i].want.uid);
        assert_int_equal(got.gid, cases[i].want.gid);
    }
}

int main(void)
{
    snprintf(tmp, sizeof(tmp), "%s/kl-devices-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp))
        return 1;
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cdi_resolve),
        cmocka_unit_test(test_device_resolve),
        cmocka_unit_test(test_registration_validation),
        cmocka_unit_test(test_fake_plugin),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    char *cmd = xasprintf("rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        r = r ? r : 1;
    free(cmd);
    return r;
}
