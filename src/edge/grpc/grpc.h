/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc: gRPC client and server over HTTP/2 (nghttp2) on unix-domain sockets, with protobuf-c
 * messages. Enough of gRPC for the kubelet's APIs: unary and server-streaming calls, deadlines
 * (grpc-timeout), grpc-status/grpc-message trailers, bounded message sizes. No TLS, no
 * compression, no client streaming. Interoperates with real gRPC (tested against grpcio).
 *
 * Server, e.g. a device plugin:
 *
 *     static void get_options(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
 *     {
 *         V1beta1__DevicePluginOptions o = V1beta1__DEVICE_PLUGIN_OPTIONS__INIT;
 *         o.get_preferred_allocation_available = true;
 *         grpc_call_reply_pb(call, &o.base);          // packs now; o may live on the stack
 *     }
 *     static void list_and_watch(struct grpc_stream *st, const ProtobufCMessage *req, void *ud)
 *     {
 *         struct plugin *p = ud;
 *         grpc_stream_send_pb(st, &p->current_list.base); // first full list, right away
 *         p->watcher = grpc_stream_ref(st);            // kept; another thread sends updates
 *     }                                                // with grpc_stream_send_pb()
 *
 *     struct grpc_server *s = NULL;
 *     grpc_server_new(NULL, &s, &e);                  // NULL: default options
 *     grpc_server_add_unary_pb(s, "/v1beta1.DevicePlugin/GetDevicePluginOptions",
 *                              &v1beta1__empty__descriptor, get_options, p, &e);
 *     grpc_server_add_stream_pb(s, "/v1beta1.DevicePlugin/ListAndWatch",
 *                               &v1beta1__empty__descriptor, list_and_watch, p, &e);
 *     grpc_server_start(s, "/var/lib/kubelet/device-plugins/nvidia-gpu.sock", &e);
 *     ...
 *     grpc_server_free(s);                            // stop, GOAWAY, join, unlink the socket
 *
 * Client, e.g. registering with the kubelet:
 *
 *     struct grpc_client *c = NULL;
 *     V1beta1__RegisterRequest rq = V1beta1__REGISTER_REQUEST__INIT;  (fill it)
 *     ProtobufCMessage *resp = NULL;
 *     int code = 0;
 *     r = grpc_client_connect("/var/lib/kubelet/device-plugins/kubelet.sock", 5000, NULL, &c, &e);
 *     r = grpc_client_unary_pb(c, "/v1beta1.Registration/Register", &rq.base,
 *                              &v1beta1__empty__descriptor, 5000, &resp, &code, &e);
 *     protobuf_c_message_free_unpacked(resp, NULL);
 *     grpc_client_free(c);
 *
 * Threading contract
 *  - Server: one event-loop thread per started server (poll() + an eventfd for wake-ups). All
 *    handlers and close callbacks run on that thread, one at a time, so they must be quick and
 *    must not block (no network calls, no waiting on other threads that wait on the server).
 *    A unary handler answers before it returns (grpc_call_reply or grpc_call_fail); the
 *    struct grpc_call is valid only during the handler.
 *  - A struct grpc_stream may be used from ANY thread once the streaming handler took a
 *    reference (grpc_stream_ref): grpc_stream_send*, grpc_stream_finish, grpc_stream_is_open,
 *    grpc_stream_unref are thread-safe. Sends are queued and written by the loop thread; they
 *    fail with -EPIPE once the client went away or the stream was finished. The close callback
 *    (grpc_stream_set_close_cb) runs on the loop thread when the stream ends for any reason
 *    (client cancel or disconnect, deadline, finish, server shutdown).
 *  - grpc_server_free() may be called from any thread except the loop thread (not from a
 *    handler). It runs the close callbacks of open streams before it returns.
 *  - Client: a struct grpc_client and its streams are used by one thread at a time (the calls
 *    drive the connection on the calling thread; there is no background thread). Use one client
 *    per thread. A client may hold several open streams and make unary calls meanwhile.
 *
 * Errors: functions return 0 (or a count) on success and a negative errno-style code with a
 * message in struct err on failure. Client calls also report the gRPC status code through
 * ret_code (GRPC_STATUS_OK on success; transport failures map to UNAVAILABLE, deadlines to
 * DEADLINE_EXCEEDED as gRPC clients do); a non-OK status returns -EPROTO, except
 * DEADLINE_EXCEEDED (-ETIMEDOUT) and UNAVAILABLE (-ECONNRESET/-ECONNREFUSED/-ENOENT as fits).
 */
#ifndef GPUOP_GRPC_H
#define GPUOP_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#include "util.h"

/* gRPC status codes, numbered as gRPC defines them. */
enum grpc_status_code {
    GRPC_STATUS_OK = 0,
    GRPC_STATUS_CANCELLED = 1,
    GRPC_STATUS_UNKNOWN = 2,
    GRPC_STATUS_INVALID_ARGUMENT = 3,
    GRPC_STATUS_DEADLINE_EXCEEDED = 4,
    GRPC_STATUS_NOT_FOUND = 5,
    GRPC_STATUS_ALREADY_EXISTS = 6,
    GRPC_STATUS_PERMISSION_DENIED = 7,
    GRPC_STATUS_RESOURCE_EXHAUSTED = 8,
    GRPC_STATUS_FAILED_PRECONDITION = 9,
    GRPC_STATUS_ABORTED = 10,
    GRPC_STATUS_OUT_OF_RANGE = 11,
    GRPC_STATUS_UNIMPLEMENTED = 12,
    GRPC_STATUS_INTERNAL = 13,
    GRPC_STATUS_UNAVAILABLE = 14,
    GRPC_STATUS_DATA_LOSS = 15,
    GRPC_STATUS_UNAUTHENTICATED = 16,
};

/* "OK", "DEADLINE_EXCEEDED", ...; codes outside 0..16 give "UNKNOWN". */
const char *grpc_status_name(int code);

#define GRPC_DEFAULT_MAX_RECV_MSG    (4u << 20) /* as gRPC's default */
#define GRPC_DEFAULT_MAX_SEND_MSG    (4u << 20)
#define GRPC_DEFAULT_MAX_STREAMS     100u
#define GRPC_DEFAULT_MAX_HEADER_LIST (16u << 10)
#define GRPC_DEFAULT_MAX_CONNECTIONS 64u
#define GRPC_DEFAULT_MAX_SEND_QUEUE  (16u << 20) /* bytes queued per stream, not yet written */

/* Limits and settings; zero fields take the defaults above. */
struct grpc_options {
    size_t max_recv_msg;      /* larger incoming message → RESOURCE_EXHAUSTED */
    size_t max_send_msg;      /* larger outgoing message → RESOURCE_EXHAUSTED, not sent */
    unsigned max_streams;     /* concurrent streams per connection */
    size_t max_header_list;   /* bytes of headers per request/response */
    unsigned max_connections; /* server: connections at once; more are closed at accept */
    size_t max_send_queue; /* server streams: bytes queued but not written; beyond → -ENOBUFS */
    unsigned socket_mode;  /* server: socket file mode, 0 = 0600 */
    /* client: once stop is requested, connect and every wait end at once (the connection is
     * treated as lost), so a peer that accepts and never answers cannot hold a stopping
     * process up to its timeout. NULL: only the timeouts. */
    struct stop_token *stop;
};

/* ==== server ================================================================================ */

struct grpc_server;
struct grpc_call;   /* a unary call, valid during its handler only */
struct grpc_stream; /* a server-streaming call, reference counted, thread-safe */

/* Creates a server (no socket yet). opts may be NULL. */
int grpc_server_new(const struct grpc_options *opts, struct grpc_server **ret, struct err *e);
/* Stops (if started): closes the listener, sends GOAWAY, ends open streams with UNAVAILABLE
 * and runs their close callbacks, joins the loop thread, unlinks the socket. Accepts NULL. */
void grpc_server_free(struct grpc_server *s);
DEFINE_CLEANUP_FUNC(struct grpc_server, grpc_server_free)

/* Handlers. req/req_len: the request message (bytes; may be empty). */
typedef void (*grpc_unary_fn)(struct grpc_call *call, const uint8_t *req, size_t req_len,
                              void *userdata);
typedef void (*grpc_stream_fn)(struct grpc_stream *st, const uint8_t *req, size_t req_len,
                               void *userdata);
/* Typed handlers: the request is unpacked with the registered descriptor (an unparsable request
 * is answered INTERNAL without calling the handler) and freed after the handler returns. */
typedef void (*grpc_unary_pb_fn)(struct grpc_call *call, const ProtobufCMessage *req,
                                 void *userdata);
typedef void (*grpc_stream_pb_fn)(struct grpc_stream *st, const ProtobufCMessage *req,
                                  void *userdata);

/* Registers a method by its full path, "/<package>.<Service>/<Method>". Before start only.
 * Calls to unregistered paths are answered UNIMPLEMENTED. -EEXIST for a duplicate path. */
int grpc_server_add_unary(struct grpc_server *s, const char *path, grpc_unary_fn fn, void *userdata,
                          struct err *e);
int grpc_server_add_stream(struct grpc_server *s, const char *path, grpc_stream_fn fn,
                           void *userdata, struct err *e);
int grpc_server_add_unary_pb(struct grpc_server *s, const char *path,
                             const ProtobufCMessageDescriptor *req_desc, grpc_unary_pb_fn fn,
                             void *userdata, struct err *e);
int grpc_server_add_stream_pb(struct grpc_server *s, const char *path,
                              const ProtobufCMessageDescriptor *req_desc, grpc_stream_pb_fn fn,
                              void *userdata, struct err *e);

/* Binds socket_path (a stale socket file there is unlinked; a non-socket is an error), listens,
 * and starts the loop thread. Once per server. */
int grpc_server_start(struct grpc_server *s, const char *socket_path, struct err *e);
/* The bound socket path, or NULL before start. */
const char *grpc_server_socket_path(const struct grpc_server *s);

/* Unary replies: exactly one per call, before the handler returns. A handler that returns
 * without one answers INTERNAL. Messages larger than max_send_msg answer RESOURCE_EXHAUSTED. */
void grpc_call_reply(struct grpc_call *call, const void *msg, size_t len);
void grpc_call_reply_pb(struct grpc_call *call, const ProtobufCMessage *msg);
/* Fails the call with a status code (not OK) and a message (percent-encoded on the wire). */
void grpc_call_fail(struct grpc_call *call, int code, const char *fmt, ...) GPUOP_PRINTF(3, 4);
/* The call's path and deadline (CLOCK_MONOTONIC ms from now_ms_mono(); 0 = none). */
const char *grpc_call_path(const struct grpc_call *call);
uint64_t grpc_call_deadline_ms(const struct grpc_call *call);

/* Streams. The handler's stream reference is borrowed: take one with grpc_stream_ref to keep
 * the stream past the handler; the stream stays open until grpc_stream_finish, the client
 * goes away, its deadline passes or the server stops. A handler that neither finishes nor
 * refs the stream leaves it open (the client may cancel it); the close callback still runs. */
struct grpc_stream *grpc_stream_ref(struct grpc_stream *st);
void grpc_stream_unref(struct grpc_stream *st); /* accepts NULL */
DEFINE_CLEANUP_FUNC(struct grpc_stream, grpc_stream_unref)
/* Queues a message: 0, -EPIPE when the stream is closed, -EMSGSIZE above max_send_msg,
 * -ENOBUFS when max_send_queue bytes are already waiting (a client that does not read). */
int grpc_stream_send(struct grpc_stream *st, const void *msg, size_t len);
int grpc_stream_send_pb(struct grpc_stream *st, const ProtobufCMessage *msg);
/* Ends the stream with a status (after the queued messages). 0, or -EPIPE when closed. */
int grpc_stream_finish(struct grpc_stream *st, int code, const char *fmt, ...) GPUOP_PRINTF(3, 4);
/* False once the client went away or the stream ended. */
bool grpc_stream_is_open(struct grpc_stream *st);
const char *grpc_stream_path(const struct grpc_stream *st);
/* Called once, on the loop thread, when the stream ends for any reason. Set it in the handler.
 * code: the status the stream ended with (CANCELLED when the client went away). */
typedef void (*grpc_stream_close_fn)(struct grpc_stream *st, int code, void *userdata);
void grpc_stream_set_close_cb(struct grpc_stream *st, grpc_stream_close_fn fn, void *userdata);

/* ==== client ================================================================================ */

struct grpc_client;
struct grpc_client_stream;

/* Connects to a unix socket and starts HTTP/2 (prior knowledge). timeout_ms bounds the connect
 * and the server's first SETTINGS frame (0 = 5000). opts may be NULL. */
int grpc_client_connect(const char *socket_path, uint64_t timeout_ms,
                        const struct grpc_options *opts, struct grpc_client **ret, struct err *e);
/* Sends GOAWAY and closes; open streams are cancelled. Accepts NULL. */
void grpc_client_free(struct grpc_client *c);
DEFINE_CLEANUP_FUNC(struct grpc_client, grpc_client_free)

/* A unary call. timeout_ms is the call's deadline (sent as grpc-timeout, enforced here too;
 * 0 = none). On success *ret_resp (malloc'd, caller frees; non-NULL even when empty) and
 * *ret_len. ret_code (may be NULL) always receives the gRPC status code. */
int grpc_client_unary(struct grpc_client *c, const char *path, const void *req, size_t req_len,
                      uint64_t timeout_ms, uint8_t **ret_resp, size_t *ret_len, int *ret_code,
                      struct err *e);
/* Typed: packs req, unpacks the response with resp_desc (bounded by max_recv_msg). Free
 * *ret_resp with protobuf_c_message_free_unpacked(*ret_resp, NULL). */
int grpc_client_unary_pb(struct grpc_client *c, const char *path, const ProtobufCMessage *req,
                         const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms,
                         ProtobufCMessage **ret_resp, int *ret_code, struct err *e);

/* Opens a server-streaming call (timeout_ms: whole-call deadline, 0 = none). */
int grpc_client_stream_open(struct grpc_client *c, const char *path, const void *req,
                            size_t req_len, uint64_t timeout_ms, struct grpc_client_stream **ret,
                            struct err *e);
int grpc_client_stream_open_pb(struct grpc_client *c, const char *path, const ProtobufCMessage *req,
                               uint64_t timeout_ms, struct grpc_client_stream **ret, struct err *e);
/* Waits up to wait_ms (0 = don't wait, UINT64_MAX = until the call's deadline or forever) for
 * the next message. Returns 1 with a message (*ret_msg malloc'd, caller frees), 0 at the end
 * of the stream with status OK, -EAGAIN when wait_ms passed with no message (the stream stays
 * usable), or a negative code when the call failed (ret_code says how; may be NULL). */
int grpc_client_stream_next(struct grpc_client_stream *st, uint64_t wait_ms, uint8_t **ret_msg,
                            size_t *ret_len, int *ret_code, struct err *e);
int grpc_client_stream_next_pb(struct grpc_client_stream *st,
                               const ProtobufCMessageDescriptor *desc, uint64_t wait_ms,
                               ProtobufCMessage **ret_msg, int *ret_code, struct err *e);
/* Cancels the call if still open (RST_STREAM CANCEL) and frees. Accepts NULL. Free every
 * stream before its client. */
void grpc_client_stream_free(struct grpc_client_stream *st);
DEFINE_CLEANUP_FUNC(struct grpc_client_stream, grpc_client_stream_free)

/* ==== protobuf helpers ====================================================================== */

/* Packs msg into a malloc'd buffer; -EMSGSIZE above limit (0 = no limit). */
int grpc_pb_pack(const ProtobufCMessage *msg, size_t limit, uint8_t **ret, size_t *ret_len,
                 struct err *e);
/* Unpacks; -EMSGSIZE above limit (0 = no limit), -EBADMSG when not a valid desc message. */
int grpc_pb_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                   size_t limit, ProtobufCMessage **ret, struct err *e);

#endif
