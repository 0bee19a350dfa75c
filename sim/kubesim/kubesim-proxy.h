/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP shell's proxy to a kubelet (proxy.c): what the core's ksim_response.proxy names,
 * fetched and streamed to the client as the API server streams a kubelet's answer. */
#ifndef GPUOP_KUBESIM_PROXY_H
#define GPUOP_KUBESIM_PROXY_H

#include <microhttpd.h>

#include "kubesim.h"

/* Queues the response to c: the kubelet's body (2xx; followed logs stream until either side
 * closes), or the Status the API server makes of its error or of a failed connection.
 * client_fd (-1: unknown) is watched for the client going away. *ret_code: the status sent. */
enum MHD_Result ks_proxy_respond(struct MHD_Connection *c, const struct ksim_proxy *p,
                                 int client_fd, int *ret_code);

#endif
