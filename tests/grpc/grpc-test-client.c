/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small C client built on src/edge/grpc, run by interop.py against a python grpcio server that
 * plays the kubelet (Registration, PodResourcesLister) and a device plugin (DevicePlugin).
 * Usage: grpc-test-client SOCKET [wait-shutdown]. Exit 0 when every check passed.
 */
#include <inttypes.h>
#include <string.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "grpc.h"
#include "podresources/v1/api.pb-c.h"

static int fails;

#define CHECK(cond, ...)                      \
    do {                                      \
        bool ok_ = (cond);                    \
        printf("%s ", ok_ ? "ok  " : "FAIL"); \
        printf(__VA_ARGS__);                  \
        printf("\n");                         \
        fflush(stdout);                       \
        if (!ok_)                             \
            fails++;                          \
    } while (0)

static void check_unary(struct grpc_client *c)
{
    struct err e = {0};
    int code = -1;
    ProtobufCMessage *resp = NULL;

    V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
    int r =
        grpc_client_unary_pb(c, "/v1beta1.DevicePlugin/GetDevicePluginOptions", &empty.base,
                             &v1beta1__device_plugin_options__descriptor, 5000, &resp, &code, &e);
    CHECK(r == 0 && code == 0 &&
              ((V1beta1__DevicePluginOptions *)resp)->get_preferred_allocation_available,
          "GetDevicePluginOptions (%s)", err_msg(&e));
    protobuf_c_message_free_unpacked(resp, NULL);
    resp = NULL;

    V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    opts.get_preferred_allocation_available = true;
    V1beta1__RegisterRequest rq = V1BETA1__REGISTER_REQUEST__INIT;
    rq.version = "v1beta1";
    rq.endpoint = "nvidia-gpu.sock";
    rq.resource_name = "nvidia.com/gpu";
    rq.options = &opts;
    r = grpc_client_unary_pb(c, "/v1beta1.Registration/Register", &rq.base,
                             &v1beta1__empty__descriptor, 5000, &resp, &code, &e);
    CHECK(r == 0 && code == 0, "Registration.Register (%s)", err_msg(&e));
    protobuf_c_message_free_unpacked(resp, NULL);
    resp = NULL;

    char *ids0[] = {"GPU-0", "GPU-1"};
    V1beta1__ContainerAllocateRequest car = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    car.n_devices_ids = 2;
    car.devices_ids = ids0;
    V1beta1__ContainerAllocateRequest *cars[] = {&car};
    V1beta1__AllocateRequest ar = V1BETA1__ALLOCATE_REQUEST__INIT;
    ar.n_container_requests = 1;
    ar.container_requests = cars;
    r = grpc_client_unary_pb(c, "/v1beta1.DevicePlugin/Allocate", &ar.base,
                             &v1beta1__allocate_response__descriptor, 5000, &resp, &code, &e);
    V1beta1__AllocateResponse *aresp = (V1beta1__AllocateResponse *)resp;
    CHECK(r == 0 && aresp->n_container_responses == 1 &&
              aresp->container_responses[0]->n_envs == 1 &&
              strcmp(aresp->container_responses[0]->envs[0]->value, "GPU-0,GPU-1") == 0,
          "Allocate (%s)", err_msg(&e));
    protobuf_c_message_free_unpacked(resp, NULL);
    resp = NULL;

    /* Error status with a percent-encoded, non-ASCII, multi-line message. */
    V1beta1__AllocateRequest empty_ar = V1BETA1__ALLOCATE_REQUEST__INIT;
    r = grpc_client_unary_pb(c, "/v1beta1.DevicePlugin/Allocate", &empty_ar.base,
                             &v1beta1__allocate_response__descriptor, 5000, &resp, &code, &e);
    CHECK(r == -EPROTO && code == GRPC_STATUS_INVALID_ARGUMENT && !resp &&
              strstr(err_msg(&e), "INVALID_ARGUMENT: empty request: 100% \xc3\xa9"
                                  "chec\nline2"),
          "error status and decoded grpc-message (%s)", err_msg(&e));

    /* Deadline exceeded: the server takes 2 s, the deadline is 200 ms. */
    V1beta1__PreferredAllocationRequest pr = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    uint64_t t0 = now_ms_mono();
    r = grpc_client_unary_pb(c, "/v1beta1.DevicePlugin/GetPreferredAllocation", &pr.base,
                             &v1beta1__preferred_allocation_response__descriptor, 200, &resp, &code,
                             &e);
    uint64_t took = now_ms_mono() - t0;
    CHECK(r == -ETIMEDOUT && code == GRPC_STATUS_DEADLINE_EXCEEDED && took < 1500,
          "deadline exceeded after %" PRIu64 " ms (%s)", took, err_msg(&e));

    /* Unknown method. */
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    r = grpc_client_unary(c, "/v1beta1.DevicePlugin/Nope", "", 0, 5000, &raw, &raw_len, &code, &e);
    CHECK(r < 0 && code == GRPC_STATUS_UNIMPLEMENTED, "unknown method -> UNIMPLEMENTED (%s)",
          err_msg(&e));

    /* A reply above our 4 MiB receive limit. */
    r = grpc_client_unary(c, "/gpuop.test.Control/Big", "", 0, 5000, &raw, &raw_len, &code, &e);
    CHECK(r < 0 && code == GRPC_STATUS_RESOURCE_EXHAUSTED,
          "oversized reply -> RESOURCE_EXHAUSTED (%s)", err_msg(&e));

    /* The connection is still good after the cancelled calls. */
    V1__ListPodResourcesRequest lr = V1__LIST_POD_RESOURCES_REQUEST__INIT;
    r = grpc_client_unary_pb(c, "/v1.PodResourcesLister/List", &lr.base,
                             &v1__list_pod_resources_response__descriptor, 5000, &resp, &code, &e);
    V1__ListPodResourcesResponse *l = (V1__ListPodResourcesResponse *)resp;
    CHECK(r == 0 && l->n_pod_resources == 2 && strcmp(l->pod_resources[0]->name, "train-0") == 0 &&
              strcmp(l->pod_resources[0]->namespace_, "ml") == 0 &&
              l->pod_resources[0]->containers[0]->devices[0]->n_device_ids == 2 &&
              strcmp(l->pod_resources[1]->containers[0]->devices[0]->device_ids[0], "GPU-2::3") ==
                  0 &&
              l->pod_resources[1]->n_containers == 2,
          "PodResourcesLister.List (%s)", err_msg(&e));
    protobuf_c_message_free_unpacked(resp, NULL);
    resp = NULL;

    V1__AllocatableResourcesRequest alr = V1__ALLOCATABLE_RESOURCES_REQUEST__INIT;
    r = grpc_client_unary_pb(c, "/v1.PodResourcesLister/GetAllocatableResources", &alr.base,
                             &v1__allocatable_resources_response__descriptor, 5000, &resp, &code,
                             &e);
    CHECK(r == 0 && ((V1__AllocatableResourcesResponse *)resp)->n_devices == 1,
          "PodResourcesLister.GetAllocatableResources (%s)", err_msg(&e));
    protobuf_c_message_free_unpacked(resp, NULL);
    resp = NULL;

    V1__GetPodResourcesRequest gr = V1__GET_POD_RESOURCES_REQUEST__INIT;
    gr.pod_name = "x";
    gr.pod_namespace = "y";
    r = grpc_client_unary_pb(c, "/v1.PodResourcesLister/Get", &gr.base,
                             &v1__get_pod_resources_response__descriptor, 5000, &resp, &code, &e);
    CHECK(r < 0 && code == GRPC_STATUS_NOT_FOUND && strstr(err_msg(&e), "pod y/x not found"),
          "PodResourcesLister.Get -> NOT_FOUND (%s)", err_msg(&e));
}

static void check_stream(struct grpc_client *c)
{
    struct err e = {0};
    int code = -1;
    struct grpc_client_stream *st = NULL;
    V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
    int r = grpc_client_stream_open_pb(c, "/v1beta1.DevicePlugin/ListAndWatch", &empty.base, 700,
                                       &st, &e);
    CHECK(r == 0, "ListAndWatch open (%s)", err_msg(&e));
    if (r < 0)
        return;
    /* Meanwhile, a unary call on the same connection. */
    ProtobufCMessage *resp = NULL;
    r = grpc_client_unary_pb(c, "/v1beta1.DevicePlugin/GetDevicePluginOptions", &empty.base,
                             &v1beta1__device_plugin_options__descriptor, 5000, &resp, &code, &e);
    CHECK(r == 0, "unary call while a stream is open (%s)", err_msg(&e));
    protobuf_c_message_free_unpacked(resp, NULL);

    unsigned unhealthy_seen = 0, n = 0;
    for (;;) {
        ProtobufCMessage *m = NULL;
        r = grpc_client_stream_next_pb(st, &v1beta1__list_and_watch_response__descriptor,
                                       UINT64_MAX, &m, &code, &e);
        if (r <= 0)
            break;
        V1beta1__ListAndWatchResponse *lw = (V1beta1__ListAndWatchResponse *)m;
        if (lw->n_devices == 4 && lw->devices[1]->topology &&
            lw->devices[1]->topology->nodes[0]->id == 1)
            n++;
        for (size_t i = 0; i < lw->n_devices; i++)
            if (strcmp(lw->devices[i]->health, "Unhealthy") == 0)
                unhealthy_seen++;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    CHECK(n == 3 && unhealthy_seen == 2, "ListAndWatch: 3 lists, health changes (%u, %u)", n,
          unhealthy_seen);
    CHECK(r == -ETIMEDOUT && code == GRPC_STATUS_DEADLINE_EXCEEDED,
          "stream ends at its deadline (%s)", err_msg(&e));
    grpc_client_stream_free(st);

    /* A short wait returns -EAGAIN and leaves the stream usable; then cancel by freeing. */
    r = grpc_client_stream_open_pb(c, "/v1beta1.DevicePlugin/ListAndWatch", &empty.base, 0, &st,
                                   &e);
    uint8_t *msg = NULL;
    size_t len = 0;
    r = grpc_client_stream_next(st, 5000, &msg, &len, &code, &e);
    free(msg);
    msg = NULL;
    CHECK(r == 1, "stream first message");
    for (int i = 0; i < 2; i++) {
        r = grpc_client_stream_next(st, 5000, &msg, &len, &code, &e);
        free(msg);
        msg = NULL;
    }
    r = grpc_client_stream_next(st, 100, &msg, &len, &code, &e);
    CHECK(r == -EAGAIN, "no message within 100 ms -> -EAGAIN (%d %s)", r, err_msg(&e));
    grpc_client_stream_free(st);
}

static int wait_shutdown(struct grpc_client *c)
{
    struct err e = {0};
    int code = -1;
    struct grpc_client_stream *st = NULL;
    V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
    if (grpc_client_stream_open_pb(c, "/v1beta1.DevicePlugin/ListAndWatch", &empty.base, 0, &st,
                                   &e) < 0) {
        fprintf(stderr, "%s\n", err_msg(&e));
        return 1;
    }
    uint8_t *msg = NULL;
    size_t len = 0;
    if (grpc_client_stream_next(st, 5000, &msg, &len, &code, &e) != 1) {
        fprintf(stderr, "%s\n", err_msg(&e));
        return 1;
    }
    free(msg);
    printf("STREAMING\n");
    fflush(stdout);
    int r;
    uint64_t t0 = now_ms_mono();
    while ((r = grpc_client_stream_next(st, 8000, &msg, &len, &code, &e)) == 1)
        free(msg);
    grpc_client_stream_free(st);
    fprintf(stderr, "stream ended after %" PRIu64 " ms: r=%d code=%s: %s\n", now_ms_mono() - t0, r,
            grpc_status_name(code), err_msg(&e));
    /* grpcio ends streams with CANCELLED or UNAVAILABLE on stop, or the connection closes. */
    if (r == -EAGAIN || r == 0)
        return 1;
    /* A new call fails cleanly too. */
    ProtobufCMessage *resp = NULL;
    r = grpc_client_unary_pb(c, "/v1beta1.DevicePlugin/GetDevicePluginOptions", &empty.base,
                             &v1beta1__device_plugin_options__descriptor, 2000, &resp, &code, &e);
    fprintf(stderr, "call after shutdown: r=%d code=%s: %s\n", r, grpc_status_name(code),
            err_msg(&e));
    return r < 0 && code == GRPC_STATUS_UNAVAILABLE ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s SOCKET [wait-shutdown]\n", argv[0]);
        return 2;
    }
    struct err e = {0};
    struct grpc_client *c = NULL;
    /* Errors of connect: a missing socket. */
    int r = grpc_client_connect("/nonexistent/gpuop.sock", 500, NULL, &c, &e);
    if (argc == 2)
        CHECK(r == -ENOENT && !c, "connect to a missing socket (%s)", err_msg(&e));
    if (grpc_client_connect(argv[1], 5000, NULL, &c, &e) < 0) {
        fprintf(stderr, "%s\n", err_msg(&e));
        return 1;
    }
    if (argc > 2 && strcmp(argv[2], "wait-shutdown") == 0) {
        r = wait_shutdown(c);
        grpc_client_free(c);
        return r;
    }
    check_unary(c);
    check_stream(c);
    grpc_client_free(c);
    printf("%d failure(s)\n", fails);
    return fails ? 1 : 0;
}
