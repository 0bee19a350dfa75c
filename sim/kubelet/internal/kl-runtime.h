/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-runtime: runs one container as a process, as a container runtime would for the kubelet.
 *
 * A container sees: a root of its own (a tmpfs with the host's /usr, /bin, /sbin, /lib*, /etc
 * bound read-only, so the host's programs run unchanged; a fresh /proc; a /dev of its own holding
 * the default devices and exactly the device nodes of the spec, made with mknod as runc makes
 * them, or the host's /dev when privileged; /tmp a tmpfs), then the spec's mounts in order
 * (hostPath volumes from the node root, ConfigMap, Secret and projected volumes the kubelet
 * materialised, the service-account token), its own mount namespace, and the node's network
 * namespace (all pods of a node share the node's address: the simulation's one simplification of
 * pod networking). stdout and stderr go to the log file.
 *
 * Threads: every function may be called from any thread; a pid belongs to the caller that
 * started it. Needs root (CAP_SYS_ADMIN for namespaces and mounts).
 */
#ifndef GPUOP_KL_RUNTIME_H
#define GPUOP_KL_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

struct kl_mount {
    const char *source; /* host path: a file or a directory */
    const char *target; /* absolute path in the container; created when missing */
    bool read_only;
};

/* A device node the container gets in its /dev (runc's linux.devices entry). */
struct kl_device {
    const char *path; /* absolute, under /dev, without . or .. */
    char type;        /* 'c' (character) or 'b' (block) */
    unsigned major, minor;
    unsigned file_mode; /* permission bits (07777) */
    unsigned uid, gid;
};

struct kl_container_spec {
    const char *const *argv; /* argv[0]: absolute path in the container's view, or a name looked
                              * up in PATH of envp */
    const char *const *envp; /* "NAME=value", NULL-terminated */
    const char *workdir;     /* NULL: "/" */
    const struct kl_mount *mounts;
    size_t n_mounts;
    /* Made in the container's /dev before the mounts; ignored when privileged (the host's /dev,
     * the machine's own, is bound and never written to). */
    const struct kl_device *devices;
    size_t n_devices;
    const char *netns_path; /* a network namespace file (/run/netns/X); NULL: the host's */
    const char *hostname;   /* NULL: the host's */
    const char *log_path;   /* stdout and stderr appended to this file (created 0640) */
    bool privileged;        /* false: /sys read-only, CAP_SYS_ADMIN etc. dropped */
};

/* Starts the container's process. ret_pidfd (a pidfd, O_CLOEXEC) polls readable when the
 * process exits; reap it with kl_container_reap. Errors (a missing executable, a mount that
 * fails) are returned when detectable before exec; after exec they are the exit status (127 for
 * a missing program, with the reason in the log file). */
int kl_container_start(const struct kl_container_spec *s, pid_t *ret_pid, int *ret_pidfd,
                       struct err *e);

/* Non-blocking: 1 and *ret_status (a wait status) when the process exited and was reaped, 0
 * when it still runs. Closes nothing. */
int kl_container_reap(pid_t pid, int pidfd, int *ret_status, struct err *e);

/* SIGTERM, then SIGKILL after grace_ms if it is still running; returns once it was reaped
 * (*ret_status set). The stop token (may be NULL) cuts the grace period short: SIGKILL at once,
 * so a kubelet-sim that is stopping leaves no process behind. */
int kl_container_stop(pid_t pid, int pidfd, uint64_t grace_ms, const struct stop_token *stop,
                      int *ret_status, struct err *e);

/* Runs argv inside a running container's namespaces (mount and network) for an exec probe or a
 * preStop hook; returns the exit code (0..255), -ETIMEDOUT after timeout_ms (the command is
 * killed), or another negative code when it could not run. Output is discarded, or its first
 * out_size-1 bytes copied to out (NUL-terminated) when out is not NULL. */
int kl_container_exec(pid_t pid, const char *const *argv, uint64_t timeout_ms, char *out,
                      size_t out_size, struct err *e);

#endif
