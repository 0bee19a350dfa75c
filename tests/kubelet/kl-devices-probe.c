/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-devices-probe ROOT: the device manager of one simulated node, driven line by line on stdin
 * for the integration tests; one JSON object per command on stdout.
 *
 *   resources                         {"resources":{...}}
 *   wait RESOURCE N TIMEOUT_MS        until RESOURCE's allocatable is N: {"ok":..,"ms":..,...}
 *   alloc UID NS NAME CTR REQUESTS    REQUESTS a JSON object: {"ok":true,"envs":[..],...} or
 *                                     {"ok":false,"code":-28,"error":".."}
 *   cdi NAME...                       resolves CDI names against ROOT's CDI directories:
 *                                     {"ok":true,"device_nodes":[..],...} or the error
 *   release UID | retain ["uid",..] | restart (free + new) | quit
 */
#include <string.h>

#include <jansson.h>

#include "kl-cdi.h"
#include "kl-devices.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;
static unsigned changes;

static void on_change(void *ud)
{
    (void)ud;
    pthread_mutex_lock(&mu);
    changes++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static void emit(json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    printf("%s\n", s ? s : "{}");
    fflush(stdout);
    free(s);
    json_decref(j);
}

static json_t *strv(char **v)
{
    json_t *a = json_array();
    for (; v && *v; v++)
        json_array_append_new(a, json_string(*v));
    return a;
}

static json_t *alloc_json(const struct kl_alloc *a)
{
    json_t *mounts = json_array();
    for (size_t i = 0; i < a->n_mounts; i++)
        json_array_append_new(mounts,
                              json_pack("{s:s, s:s, s:b}", "source", a->mounts[i].source, "target",
                                        a->mounts[i].target, "read_only", a->mounts[i].read_only));
    json_t *devs = json_array();
    for (size_t i = 0; i < a->n_devices; i++)
        json_array_append_new(devs, json_string(a->devices[i].host_path));
    return json_pack("{s:b, s:o, s:o, s:o, s:o, s:O}", "ok", 1, "envs", strv(a->envs), "mounts",
                     mounts, "device_nodes", devs, "cdi", strv(a->cdi_devices), "annotations",
                     a->annotations);
}

static json_t *fail_json(struct err *e)
{
    return json_pack("{s:b, s:i, s:s}", "ok", 0, "code", e->code, "error", err_msg(e));
}

static int start(const char *root, struct kl_devices **d, struct err *e)
{
    struct kl_devices_config cfg = {
        .root = root, .node_name = "probe", .on_change = on_change, .userdata = NULL};
    return kl_devices_new(&cfg, d, e);
}

static json_int_t allocatable(struct kl_devices *d, const char *res)
{
    json_t *r = kl_devices_resources(d);
    json_t *v = json_object_get(json_object_get(r, res), "allocatable");
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(r);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: kl-devices-probe ROOT\n");
        return 2;
    }
    cond_init_monotonic(&cond);
    struct err e = {0};
    struct kl_devices *d = NULL;
    if (start(argv[1], &d, &e) < 0) {
        fprintf(stderr, "kl-devices-probe: %s\n", err_msg(&e));
        return 1;
    }
    emit(json_pack("{s:b}", "started", 1));
    char line[8192];
    while (fgets(line, sizeof(line), stdin)) {
        line[strcspn(line, "\n")] = 0;
        char *save = NULL;
        char *cmd = strtok_r(line, " ", &save);
        if (!cmd)
            continue;
        if (strcmp(cmd, "quit") == 0)
            break;
        err_clear(&e);
        if (strcmp(cmd, "resources") == 0) {
            emit(json_pack("{s:o}", "resources", kl_devices_resources(d)));
        } else if (strcmp(cmd, "wait") == 0) {
            const char *res = strtok_r(NULL, " ", &save);
            const char *n = strtok_r(NULL, " ", &save);
            const char *t = strtok_r(NULL, " ", &save);
            if (!res || !n || !t) {
                emit(json_pack("{s:b, s:s}", "ok", 0, "error", "wait RESOURCE N TIMEOUT_MS"));
                continue;
            }
            uint64_t t0 = now_ms_mono(), deadline = deadline_after(strtoull(t, NULL, 10));
            json_int_t want = strtoll(n, NULL, 10);
            bool ok;
            pthread_mutex_lock(&mu);
            while (!(ok = allocatable(d, res) == want) &&
                   cond_wait_deadline(&cond, &mu, deadline) == 0)
                ;
            ok = allocatable(d, res) == want;
            pthread_mutex_unlock(&mu);
            emit(json_pack("{s:b, s:I, s:o}", "ok", ok, "ms", (json_int_t)(now_ms_mono() - t0),
                           "resources", kl_devices_resources(d)));
        } else if (strcmp(cmd, "alloc") == 0) {
            const char *uid = strtok_r(NULL, " ", &save);
            const char *ns = strtok_r(NULL, " ", &save);
            const char *name = strtok_r(NULL, " ", &save);
            const char *ctr = strtok_r(NULL, " ", &save);
            const char *rq = strtok_r(NULL, "", &save);
            json_t *req = rq ? json_loads(rq, 0, NULL) : NULL;
            struct kl_alloc *a = NULL;
            if (!uid || !ns || !name || !ctr || !req)
                emit(json_pack("{s:b, s:s}", "ok", 0, "error", "alloc UID NS NAME CTR JSON"));
            else if (kl_devices_allocate(d, uid, ns, name, ctr, req, &a, &e) < 0)
                emit(fail_json(&e));
            else
                emit(alloc_json(a));
            kl_alloc_free(a);
            json_decref(req);
        } else if (strcmp(cmd, "cdi") == 0) {
            const char *names[64];
            size_t n = 0;
            for (const char *t; n < ARRAY_SIZE(names) - 1 && (t = strtok_r(NULL, " ", &save));)
                names[n++] = t;
            names[n] = NULL;
            struct kl_alloc *a = xcalloc(1, sizeof(*a));
            a->annotations = json_object();
            if (kl_cdi_resolve(argv[1], names, a, &e) < 0)
                emit(fail_json(&e));
            else
                emit(alloc_json(a));
            kl_alloc_free(a);
        } else if (strcmp(cmd, "release") == 0) {
            const char *uid = strtok_r(NULL, " ", &save);
            kl_devices_release(d, uid);
            emit(json_pack("{s:b}", "ok", 1));
        } else if (strcmp(cmd, "retain") == 0) {
            const char *arr = strtok_r(NULL, "", &save);
            json_t *live = arr ? json_loads(arr, 0, NULL) : NULL;
            kl_devices_retain(d, live);
            json_decref(live);
            emit(json_pack("{s:b}", "ok", 1));
        } else if (strcmp(cmd, "restart") == 0) {
            kl_devices_free(d);
            d = NULL;
            if (start(argv[1], &d, &e) < 0) {
                emit(fail_json(&e));
                return 1;
            }
            emit(json_pack("{s:b}", "ok", 1));
        } else {
            emit(json_pack("{s:b, s:s}", "ok", 0, "error", "unknown command"));
        }
    }
    kl_devices_free(d);
    return 0;
}
