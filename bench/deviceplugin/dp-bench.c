/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dp-bench: latency of a running `gpuop device-plugin` measured from a C gRPC client
 * (src/edge/grpc), as the kubelet sees it: one connection, calls back to back.
 *
 *   dp-bench SOCKET ITERATIONS SIZE [MUST AVAILABLE]
 *
 * Reads the device list (ListAndWatch), then times ITERATIONS Allocate calls of one device and
 * ITERATIONS GetPreferredAllocation calls choosing SIZE of all devices, and prints
 * "<call> n=<n> p50_us=<..> p99_us=<..> max_us=<..>" lines. With MUST and AVAILABLE, call i
 * offers AVAILABLE devices of the list, cyclically from device i, the first MUST of them
 * must-include (a different subset, in a different order, each call).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "grpc.h"
#include "util.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *us, size_t n)
{
    qsort(us, n, sizeof(*us), cmp_u64);
    printf("%s n=%zu p50_us=%llu p99_us=%llu max_us=%llu\n", what, n, (unsigned long long)us[n / 2],
           (unsigned long long)us[(n * 99) / 100], (unsigned long long)us[n - 1]);
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: %s SOCKET ITERATIONS SIZE [MUST AVAILABLE]\n", argv[0]);
        return 2;
    }
    unsigned iters = 0, size = 0, must = 0, avail = 0;
    if (parse_uint(argv[2], &iters) < 0 || iters == 0 || parse_uint(argv[3], &size) < 0 ||
        size == 0) {
        fprintf(stderr, "dp-bench: ITERATIONS and SIZE must be positive integers\n");
        return 2;
    }
    if (argc == 6 && (parse_uint(argv[4], &must) < 0 || parse_uint(argv[5], &avail) < 0 ||
                      must > size || avail < size)) {
        fprintf(stderr, "dp-bench: MUST must be at most SIZE, AVAILABLE at least SIZE\n");
        return 2;
    }
    struct err e = {0};
    _cleanup_(grpc_client_freep) struct grpc_client *c = NULL;
    if (grpc_client_connect(argv[1], 5000, NULL, &c, &e) < 0) {
        fprintf(stderr, "dp-bench: %s\n", err_msg(&e));
        return 1;
    }
    V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
    _cleanup_(grpc_client_stream_freep) struct grpc_client_stream *st = NULL;
    ProtobufCMessage *m = NULL;
    int code = 0;
    if (grpc_client_stream_open_pb(c, "/v1beta1.DevicePlugin/ListAndWatch", &empty.base, 0, &st,
                                   &e) < 0 ||
        grpc_client_stream_next_pb(st, &v1beta1__list_and_watch_response__descriptor, 5000, &m,
                                   &code, &e) != 1) {
        fprintf(stderr, "dp-bench: ListAndWatch: %s\n", err_msg(&e));
        return 1;
    }
    V1beta1__ListAndWatchResponse *list = (V1beta1__ListAndWatchResponse *)m;
    size_t n = list->n_devices;
    if (!avail)
        avail = (unsigned)n;
    if (n < size || n < avail) {
        fprintf(stderr, "dp-bench: %zu devices, fewer than SIZE %u or AVAILABLE %u\n", n, size,
                avail);
        return 1;
    }
    char **ids = xcalloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        ids[i] = list->devices[i]->id;
    char **offer = xcalloc(avail, sizeof(char *));
    printf("devices=%zu\n", n);

    uint64_t *lat = xcalloc(iters, sizeof(uint64_t));
    for (unsigned i = 0; i < iters; i++) {
        V1beta1__ContainerAllocateRequest cr = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        char *one = ids[i % n];
        cr.n_devices_ids = 1;
        cr.devices_ids = &one;
        V1beta1__ContainerAllocateRequest *crp = &cr;
        V1beta1__AllocateRequest rq = V1BETA1__ALLOCATE_REQUEST__INIT;
        rq.n_container_requests = 1;
        rq.container_requests = &crp;
        ProtobufCMessage *resp = NULL;
        uint64_t t0 = now_us_mono();
        int r =
            grpc_client_unary_pb(c, "/v1beta1.DevicePlugin/Allocate", &rq.base,
                                 &v1beta1__allocate_response__descriptor, 5000, &resp, &code, &e);
        lat[i] = now_us_mono() - t0;
        if (r < 0) {
            fprintf(stderr, "dp-bench: Allocate: %s\n", err_msg(&e));
            return 1;
        }
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    report("Allocate", lat, iters);

    for (unsigned i = 0; i < iters; i++) {
        V1beta1__ContainerPreferredAllocationRequest cr =
            V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
        for (unsigned j = 0; j < avail; j++)
            offer[j] = ids[argc == 6 ? (i + j) % n : j];
        cr.n_available_deviceids = avail;
        cr.available_deviceids = offer;
        cr.n_must_include_deviceids = must;
        cr.must_include_deviceids = offer;
        cr.allocation_size = (int32_t)size;
        V1beta1__ContainerPreferredAllocationRequest *crp = &cr;
        V1beta1__PreferredAllocationRequest rq = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
        rq.n_container_requests = 1;
        rq.container_requests = &crp;
        ProtobufCMessage *resp = NULL;
        uint64_t t0 = now_us_mono();
        int r = grpc_client_unary_pb(c, "/v1beta1.DevicePlugin/GetPreferredAllocation", &rq.base,
                                     &v1beta1__preferred_allocation_response__descriptor, 5000,
                                     &resp, &code, &e);
        lat[i] = now_us_mono() - t0;
        if (r < 0) {
            fprintf(stderr, "dp-bench: GetPreferredAllocation: %s\n", err_msg(&e));
            return 1;
        }
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    char what[96];
    snprintf(what, sizeof(what), "GetPreferredAllocation(size=%u must=%u available=%u)", size, must,
             avail);
    report(what, lat, iters);
    free(lat);
    free(offer);
    free(ids);
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}
