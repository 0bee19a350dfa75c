/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grpc internals: the pure wire functions (bytes in, values or events out; no I/O) and the
 * server connection core, exposed for the unit tests and the fuzz target.
 */
#ifndef GPUOP_GRPC_INTERNAL_H
#define GPUOP_GRPC_INTERNAL_H

#include "grpc.h"

#define GRPC_PREFIX_LEN 5 /* compressed flag (1 byte) + big-endian length (4 bytes) */

/* ---- length-prefixed message framing ---- */

/* Writes the 5-byte prefix of an uncompressed message of len bytes (len < 2^32). */
void grpc_frame_prefix(uint8_t out[GRPC_PREFIX_LEN], uint32_t len);

/*
 * Incremental decoder of a DATA byte stream into gRPC messages. Feed it any split of the bytes;
 * each complete message is handed to the callback (ownership passes: the callback frees the
 * malloc'd buffer, which is non-NULL even for a zero-length message). Messages larger than
 * max_msg are refused as soon as their prefix is seen, before anything is buffered.
 */
struct grpc_deframer {
    size_t max_msg;
    uint8_t prefix[GRPC_PREFIX_LEN];
    size_t prefix_have;
    uint8_t *msg; /* non-NULL while a message body is being collected */
    size_t msg_len;
    size_t msg_have;
    int failed; /* the status code of the first error; feeding more fails the same way */
};

/* Returns 0 to go on, or a negative code to stop (the deframer fails with INTERNAL). */
typedef int (*grpc_msg_fn)(void *userdata, uint8_t *msg, size_t len);

void grpc_deframer_init(struct grpc_deframer *d, size_t max_msg);
void grpc_deframer_free(struct grpc_deframer *d);
/* 0, or a gRPC status code (> 0) with e set: RESOURCE_EXHAUSTED for a message above max_msg,
 * UNIMPLEMENTED for a compressed message (no grpc-encoding is negotiated), INTERNAL for a bad
 * flag byte or a callback failure. After a failure every call fails the same way. */
int grpc_deframer_feed(struct grpc_deframer *d, const uint8_t *data, size_t len, grpc_msg_fn fn,
                       void *userdata, struct err *e);
/* True when no partial prefix or message is pending (a clean place for the stream to end). */
bool grpc_deframer_idle(const struct grpc_deframer *d);

/* ---- header values ---- */

/* Whether an HTTP/2 header name (len bytes, not NUL-terminated) is exactly lit. */
bool grpc_name_is(const uint8_t *name, size_t len, const char *lit);

/* Percent-encodes a grpc-message value as gRPC specifies: bytes outside 0x20..0x7e and '%' become
 * %XX. Always NUL-terminates out (size n >= 1); truncates at a character boundary. Returns the
 * length written. */
size_t grpc_percent_encode(const char *in, size_t in_len, char *out, size_t n);
/* Decodes %XX sequences; a malformed sequence is kept literally (as gRPC requires). NUL bytes
 * decode to '?'. Always NUL-terminates out (n >= 1). Returns the length written. */
size_t grpc_percent_decode(const char *in, size_t in_len, char *out, size_t n);

/* grpc-timeout: "<1-8 digits><H|M|S|m|u|n>". Formats ms as the shortest exact value. */
void grpc_timeout_format(uint64_t ms, char out[16]);
/* -EINVAL when malformed; the result is rounded up to whole ms and capped at ~100 days. */
int grpc_timeout_parse(const char *s, size_t len, uint64_t *ret_ms);

/* "application/grpc", optionally followed by "+<subtype>" or ";<params>". */
bool grpc_content_type_ok(const char *v, size_t len);
/* Parses a decimal grpc-status value 0..(2^31-1); -EINVAL otherwise. */
int grpc_status_parse(const char *v, size_t len, int *ret);
/* The gRPC code for a non-200 HTTP :status, as gRPC's HTTP-to-gRPC mapping says. */
int grpc_status_from_http(int http_status);
/* The gRPC code for an HTTP/2 RST_STREAM error code. */
int grpc_status_from_h2_error(uint32_t h2_error);

/* ---- server connection core (no socket; tests and the fuzz target drive it) ---- */

struct grpc_sconn;
/* A connection of server s (which need not be started). fd < 0: no socket; output is kept in
 * memory and discarded by grpc_sconn_drain. */
int grpc_sconn_new(struct grpc_server *s, int fd, struct grpc_sconn **ret, struct err *e);
void grpc_sconn_free(struct grpc_sconn *c);
/* Feeds bytes as read from the socket; runs handlers. -EPROTO when the connection must close. */
int grpc_sconn_feed(struct grpc_sconn *c, const uint8_t *data, size_t len);
/* Request bytes a server connection holds across its streams (messages being received or
 * waiting for their stream to end). Above GRPC_CONN_RECV_FACTOR x max_recv_msg the stream whose
 * data crossed the line is answered RESOURCE_EXHAUSTED and its buffer freed. */
#define GRPC_CONN_RECV_FACTOR 2
size_t grpc_sconn_buffered(const struct grpc_sconn *c);
/* Moves queued stream messages into HTTP/2 and produces output; with fd < 0, output is counted
 * and discarded. Returns the bytes produced, or -EPROTO when the connection must close. */
ssize_t grpc_sconn_drain(struct grpc_sconn *c);

#endif
