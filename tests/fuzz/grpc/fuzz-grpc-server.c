/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: arbitrary bytes into a server-side gRPC connection, as if read from the socket
 * (nghttp2 session + the gRPC request decoding + handlers), with the output drained after each
 * chunk. The first byte picks the chunk size, so the fuzzer also explores split reads.
 */
#include <stdint.h>
#include <string.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "grpc-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void echo(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)ud;
    if (len > 0 && req[0] == 'E')
        grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "bad \"%.*s\"", (int)len, req);
    else
        grpc_call_reply(call, req, len);
}

static void allocate(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)ud;
    const V1beta1__AllocateRequest *rq = (const V1beta1__AllocateRequest *)req;
    V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
    if (rq->n_container_requests > 2) {
        grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "too many containers\n");
        return;
    }
    grpc_call_reply_pb(call, &resp.base);
}

static void on_close(struct grpc_stream *st, int code, void *ud)
{
    (void)code;
    (void)ud;
    grpc_stream_unref(st);
}

static void watch(struct grpc_stream *st, const ProtobufCMessage *req, void *ud)
{
    (void)req;
    (void)ud;
    V1beta1__Device d = V1BETA1__DEVICE__INIT;
    V1beta1__Device *dp[] = {&d};
    d.id = "GPU-0";
    d.health = "Healthy";
    V1beta1__ListAndWatchResponse r = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    r.n_devices = 1;
    r.devices = dp;
    grpc_stream_send_pb(st, &r.base);
    grpc_stream_send_pb(st, &r.base);
    grpc_stream_ref(st);
    grpc_stream_set_close_cb(st, on_close, NULL);
}

static void watch_finish(struct grpc_stream *st, const uint8_t *req, size_t len, void *ud)
{
    (void)ud;
    grpc_stream_send(st, req, len);
    grpc_stream_finish(st, GRPC_STATUS_OK, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct grpc_server *s = NULL;
    struct grpc_sconn *c = NULL;
    struct err e = {0};
    struct grpc_options o = {.max_recv_msg = 4096, .max_streams = 8, .max_header_list = 2048};
    if (size < 1 || grpc_server_new(&o, &s, &e) < 0)
        return 0;
    grpc_server_add_unary(s, "/t.S/Echo", echo, NULL, &e);
    grpc_server_add_unary_pb(s, "/v1beta1.DevicePlugin/Allocate",
                             &v1beta1__allocate_request__descriptor, allocate, NULL, &e);
    grpc_server_add_stream_pb(s, "/v1beta1.DevicePlugin/ListAndWatch", &v1beta1__empty__descriptor,
                              watch, NULL, &e);
    grpc_server_add_stream(s, "/t.S/Once", watch_finish, NULL, &e);
    if (grpc_sconn_new(s, -1, &c, &e) == 0) {
        size_t chunk = data[0] ? data[0] : size;
        data++;
        size--;
        grpc_sconn_drain(c);
        for (size_t off = 0; off < size; off += chunk) {
            size_t n = size - off < chunk ? size - off : chunk;
            if (grpc_sconn_feed(c, data + off, n) < 0)
                break;
            if (grpc_sconn_drain(c) < 0)
                break;
        }
        grpc_sconn_free(c);
    }
    grpc_server_free(s);
    return 0;
}
