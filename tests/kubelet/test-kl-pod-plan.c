/* SPDX-License-Identifier: Apache-2.0 */
/* kl_pod_plan: the kubelet's decisions for one pod, as tables. Each row is a pod, what the
 * worker observed of its containers and the time; it expects the actions (in order), the
 * phase, and values at paths of the status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kl-pod-plan.h"
#include "kobj.h"

#define T0 1800000000000ULL /* 2027-01-15T08:00:00Z */
#define S  1000ULL

#define POD(spec)                                                                         \
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":" \
    "\"ns\",\"uid\":\"u-1\"},\"spec\":{" spec "}}"
#define C(name)        "{\"name\":\"" name "\",\"image\":\"gpuop:1\"}"
#define CX(name, more) "{\"name\":\"" name "\",\"image\":\"gpuop:1\"," more "}"

enum { MAXC = 4 };

struct row {
    const char *what;
    const char *pod;
    struct kl_ctr_obs init[MAXC], ctrs[MAXC];
    bool not_ready; /* sandbox not ready */
    const char *mount_error;
    uint64_t deletion_seen_ms;
    bool removed; /* gone from the API (force-deleted) */
    uint64_t now; /* offset from T0 */
    const char *actions;
    const char *phase;
    const char *checks[8]; /* "path=value" on the status */
    uint64_t wake;         /* expected wake_ms offset from T0 (0: not checked) */
    bool delete_pod;
    const char *events; /* "Reason;Reason" */
};

#define RUN(t)                                                           \
    {                                                                    \
        .phase = KL_CTR_RUNNING, .pulled = true, .started_ms = T0 + (t), \
        .container_id = "containerd://abc"                               \
    }
#define EXIT(code, s, f)                                                            \
    {                                                                               \
        .phase = KL_CTR_EXITED, .pulled = true, .started_ms = T0 + (s), .exited = { \
            .exit_code = (code),                                                    \
            .started_ms = T0 + (s),                                                 \
            .finished_ms = T0 + (f)                                                 \
        }                                                                           \
    }
#define PULLED         \
    {                  \
        .pulled = true \
    }

static const struct row rows[] = {
    {.what = "new pod: pull, then ContainerCreating",
     .pod = POD("\"containers\":[" C("a") "]"),
     .actions = "PULL a",
     .phase = "Pending",
     .checks = {"containerStatuses.0.state.waiting.reason=ContainerCreating",
                "conditions.0.type=PodReadyToStartContainers", "conditions.0.status=True",
                "qosClass=BestEffort", "startTime=2027-01-15T08:00:00Z", "podIP=10.0.0.2",
                "hostIP=10.0.0.2"}},
    {.what = "pulled: start",
     .pod = POD("\"containers\":[" C("a") "," C("b") "]"),
     .ctrs = {PULLED, RUN(0)},
     .actions = "START a",
     .phase = "Pending"},
    {.what = "all running, no probes: Running and Ready",
     .pod = POD("\"containers\":[" C("a") "," C("b") "]"),
     .ctrs = {RUN(0), RUN(0)},
     .now = 5 * S,
     .actions = "",
     .phase = "Running",
     .checks = {"conditions.3.type=ContainersReady", "conditions.3.status=True",
                "conditions.2.type=Ready", "containerStatuses.1.ready=true",
                "containerStatuses.0.started=true",
                "containerStatuses.0.state.running.startedAt=2027-01-15T08:00:00Z",
                "containerStatuses.0.containerID=containerd://abc"}},
    {.what = "volumes not set up: ContainerCreating, no start, retry soon",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {PULLED},
     .not_ready = true,
     .mount_error = "MountVolume.SetUp failed",
     .actions = "",
     .phase = "Pending",
     .wake = 2 * S,
     .checks = {"containerStatuses.0.state.waiting.reason=ContainerCreating",
                "conditions.0.status=False"}},
    /* init containers */
    {.what = "init containers run first, in order",
     .pod = POD("\"initContainers\":[" C("i1") "," C("i2") "],\"containers\":[" C("a") "]"),
     .init = {PULLED, PULLED},
     .ctrs = {PULLED},
     .actions = "START i1",
     .phase = "Pending",
     .checks = {"initContainerStatuses.1.state.waiting.reason=PodInitializing",
                "containerStatuses.0.state.waiting.reason=PodInitializing",
                "conditions.1.type=Initialized", "conditions.1.status=False",
                "conditions.1.reason=ContainersNotInitialized",
                "conditions.1.message=containers with incomplete status: [i1 i2]"}},
    {.what = "init running: nothing else starts",
     .pod = POD("\"initContainers\":[" C("i1") "," C("i2") "],\"containers\":[" C("a") "]"),
     .init = {RUN(0), PULLED},
     .ctrs = {PULLED},
     .actions = "",
     .phase = "Pending",
     .checks = {"initContainerStatuses.0.ready=false"}},
    {.what = "first init done: the second starts",
     .pod = POD("\"initContainers\":[" C("i1") "," C("i2") "],\"containers\":[" C("a") "]"),
     .init = {EXIT(0, 0, 1 * S), PULLED},
     .ctrs = {PULLED},
     .now = 1 * S,
     .actions = "START i2",
     .phase = "Pending",
     .checks = {"initContainerStatuses.0.state.terminated.reason=Completed",
                "conditions.1.message=containers with incomplete status: [i2]"}},
    {.what = "inits done: containers start, Initialized",
     .pod = POD("\"initContainers\":[" C("i1") "],\"containers\":[" C("a") "]"),
     .init = {EXIT(0, 0, 1 * S)},
     .ctrs = {PULLED},
     .now = 1 * S,
     .actions = "START a",
     .phase = "Pending",
     .checks = {"conditions.1.status=True",
                "containerStatuses.0.state.waiting.reason=ContainerCreating"}},
    {.what = "failed init, restartPolicy Never: pod Failed",
     .pod = POD("\"restartPolicy\":\"Never\",\"initContainers\":[" C("i1") "],\"containers\":[" C(
         "a") "]"),
     .init = {EXIT(1, 0, 1 * S)},
     .ctrs = {PULLED},
     .now = 2 * S,
     .actions = "",
     .phase = "Failed",
     .checks = {"initContainerStatuses.0.state.terminated.reason=Error",
                "initContainerStatuses.0.state.terminated.exitCode=1",
                "containerStatuses.0.state.waiting.reason=PodInitializing"}},
    {.what = "failed init, restartPolicy Always: first restart at once",
     .pod = POD("\"initContainers\":[" C("i1") "],\"containers\":[" C("a") "]"),
     .init = {EXIT(1, 0, 1 * S)},
     .ctrs = {PULLED},
     .now = 1 * S,
     .actions = "START i1 (backoff 10000)",
     .phase = "Pending"},
    {.what = "failed init again within backoff: Init CrashLoopBackOff",
     .pod = POD("\"initContainers\":[" C("i1") "],\"containers\":[" C("a") "]"),
     .init = {{.phase = KL_CTR_EXITED,
               .pulled = true,
               .restart_count = 1,
               .backoff_ms = 10 * S,
               .backoff_updated_ms = T0 + 1 * S,
               .exited = {.exit_code = 2, .started_ms = T0 + 1 * S, .finished_ms = T0 + 2 * S}}},
     .ctrs = {PULLED},
     .now = 3 * S,
     .actions = "",
     .phase = "Pending",
     .wake = 12 * S,
     .events = "BackOff",
     .checks = {"initContainerStatuses.0.state.waiting.reason=CrashLoopBackOff",
                "initContainerStatuses.0.state.waiting.message=back-off 10s restarting failed "
                "container=i1 pod=p_ns(u-1)",
                "initContainerStatuses.0.lastState.terminated.exitCode=2",
                "initContainerStatuses.0.restartCount=1"}},
    {.what = "a failed container's termination message reaches lastState",
     .pod = POD("\"initContainers\":[" C("i1") "],\"containers\":[" C("a") "]"),
     .init = {{.phase = KL_CTR_EXITED,
               .pulled = true,
               .restart_count = 1,
               .backoff_ms = 10 * S,
               .backoff_updated_ms = T0 + 1 * S,
               .has_last = true,
               .last = {.exit_code = 1, .message = "no headers", .finished_ms = T0},
               .exited = {.exit_code = 1,
                          .message = "Could not resolve Linux kernel version",
                          .started_ms = T0 + 1 * S,
                          .finished_ms = T0 + 2 * S}}},
     .ctrs = {PULLED},
     .now = 3 * S,
     .actions = "",
     .phase = "Pending",
     .wake = 12 * S,
     .events = "BackOff",
     .checks = {"initContainerStatuses.0.lastState.terminated.message=Could not resolve Linux "
                "kernel version"}},
    /* restart policies and backoff */
    {.what = "Always: exit 0 restarts at once the first time",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {EXIT(0, 0, 5 * S)},
     .now = 5 * S,
     .actions = "START a (backoff 10000)",
     .phase = "Running",
     .checks = {"containerStatuses.0.state.terminated.reason=Completed"}},
    {.what = "Always: second crash within 10 s backoff: CrashLoopBackOff",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {{.phase = KL_CTR_EXITED,
               .pulled = true,
               .restart_count = 1,
               .backoff_ms = 10 * S,
               .backoff_updated_ms = T0 + 5 * S,
               .exited = {.exit_code = 1, .started_ms = T0 + 5 * S, .finished_ms = T0 + 6 * S}}},
     .now = 7 * S,
     .actions = "",
     .phase = "Running",
     .wake = 16 * S,
     .events = "BackOff",
     .checks = {"containerStatuses.0.state.waiting.reason=CrashLoopBackOff",
                "containerStatuses.0.state.waiting.message=back-off 10s restarting failed "
                "container=a pod=p_ns(u-1)",
                "containerStatuses.0.lastState.terminated.reason=Error",
                "containerStatuses.0.ready=false", "conditions.2.status=False",
                "conditions.2.message=containers with unready status: [a]"}},
    {.what = "backoff over: restart, delay doubles",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {{.phase = KL_CTR_EXITED,
               .pulled = true,
               .restart_count = 1,
               .backoff_ms = 10 * S,
               .backoff_updated_ms = T0 + 5 * S,
               .exited = {.exit_code = 1, .started_ms = T0 + 5 * S, .finished_ms = T0 + 6 * S}}},
     .now = 16 * S,
     .actions = "START a (backoff 20000)",
     .phase = "Running"},
    {.what = "backoff caps at 5 min",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {{.phase = KL_CTR_EXITED,
               .pulled = true,
               .restart_count = 6,
               .backoff_ms = 160 * S,
               .backoff_updated_ms = T0 + 5 * S,
               .exited = {.exit_code = 1, .started_ms = T0 + 5 * S, .finished_ms = T0 + 6 * S}}},
     .now = 200 * S,
     .actions = "START a (backoff 300000)",
     .phase = "Running"},
    {.what = "2m40s shows as Go prints it",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {{.phase = KL_CTR_EXITED,
               .pulled = true,
               .restart_count = 5,
               .backoff_ms = 160 * S,
               .backoff_updated_ms = T0 + 5 * S,
               .exited = {.exit_code = 1, .started_ms = T0 + 5 * S, .finished_ms = T0 + 6 * S}}},
     .now = 100 * S,
     .actions = "",
     .phase = "Running",
     .events = "BackOff",
     .checks = {"containerStatuses.0.state.waiting.message=back-off 2m40s restarting failed "
                "container=a pod=p_ns(u-1)"}},
    {.what = "ran more than 10 min since the last restart: backoff reset, at once",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {{.phase = KL_CTR_EXITED,
               .pulled = true,
               .restart_count = 6,
               .backoff_ms = 300 * S,
               .backoff_updated_ms = T0,
               .exited = {.exit_code = 1, .started_ms = T0, .finished_ms = T0 + 601 * S}}},
     .now = 601 * S,
     .actions = "START a (backoff 10000)",
     .phase = "Running"},
    {.what = "OnFailure: exit 0 stays Completed, pod Succeeded",
     .pod = POD("\"restartPolicy\":\"OnFailure\",\"containers\":[" C("a") "]"),
     .ctrs = {EXIT(0, 0, 5 * S)},
     .now = 5 * S,
     .actions = "",
     .phase = "Succeeded",
     .checks = {"conditions.2.reason=PodCompleted", "conditions.1.reason=PodCompleted"}},
    {.what = "OnFailure: exit 1 restarts",
     .pod = POD("\"restartPolicy\":\"OnFailure\",\"containers\":[" C("a") "]"),
     .ctrs = {EXIT(1, 0, 5 * S)},
     .now = 5 * S,
     .actions = "START a (backoff 10000)",
     .phase = "Running"},
    {.what = "Never: one failed, one succeeded: Failed",
     .pod = POD("\"restartPolicy\":\"Never\",\"containers\":[" C("a") "," C("b") "]"),
     .ctrs = {EXIT(0, 0, 5 * S),
              {.phase = KL_CTR_EXITED,
               .pulled = true,
               .exited = {.exit_code = 137, .oom_killed = true}}},
     .now = 5 * S,
     .actions = "",
     .phase = "Failed",
     .checks = {"containerStatuses.1.state.terminated.reason=OOMKilled"}},
    {.what = "Never: one still running: Running",
     .pod = POD("\"restartPolicy\":\"Never\",\"containers\":[" C("a") "," C("b") "]"),
     .ctrs = {EXIT(0, 0, 5 * S), RUN(0)},
     .now = 5 * S,
     .actions = "",
     .phase = "Running",
     .checks = {"conditions.2.message=containers with unready status: [a]"}},
    /* images */
    {.what = "pull failed just now: ErrImagePull",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {{.pull_failures = 1, .last_pull_ms = T0, .pull_error = "rpc error: not found"}},
     .now = 100,
     .actions = "",
     .phase = "Pending",
     .wake = 1 * S,
     .checks = {"containerStatuses.0.state.waiting.reason=ErrImagePull",
                "containerStatuses.0.state.waiting.message=rpc error: not found"}},
    {.what = "then ImagePullBackOff until the backoff ends",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {{.pull_failures = 1, .last_pull_ms = T0, .pull_error = "rpc error: not found"}},
     .now = 2 * S,
     .actions = "",
     .phase = "Pending",
     .wake = 10 * S,
     .events = "BackOff",
     .checks = {"containerStatuses.0.state.waiting.reason=ImagePullBackOff",
                "containerStatuses.0.state.waiting.message=Back-off pulling image \"gpuop:1\""}},
    {.what = "pull again after the backoff",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {{.pull_failures = 2, .last_pull_ms = T0, .pull_error = "rpc error: not found"}},
     .now = 21 * S,
     .actions = "PULL a",
     .phase = "Pending",
     .checks = {"containerStatuses.0.state.waiting.reason=ErrImagePull"}},
    {.what = "create failed: CreateContainerError, retried after backoff",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {{.pulled = true,
               .create_failures = 1,
               .last_create_ms = T0,
               .create_error = "unresolvable CDI devices nvidia.com/gpu=9"}},
     .now = 1 * S,
     .actions = "",
     .phase = "Pending",
     .wake = 10 * S,
     .checks = {"containerStatuses.0.state.waiting.reason=CreateContainerError",
                "containerStatuses.0.state.waiting.message=unresolvable CDI devices "
                "nvidia.com/gpu=9"}},
    /* probes */
    {.what = "startup probe gates readiness and liveness",
     .pod = POD("\"containers\":[" CX("a", "\"startupProbe\":{\"exec\":{\"command\":[\"true\"]},"
                                           "\"initialDelaySeconds\":2},"
                                           "\"readinessProbe\":{\"tcpSocket\":{\"port\":80}},"
                                           "\"livenessProbe\":{\"tcpSocket\":{\"port\":80}}") "]"),
     .ctrs = {RUN(0)},
     .now = 3 * S,
     .actions = "PROBE a Startup",
     .phase = "Running",
     .checks = {"containerStatuses.0.started=false", "containerStatuses.0.ready=false"}},
    {.what = "startup probe not due yet: wait for initialDelay",
     .pod = POD("\"containers\":[" CX("a", "\"startupProbe\":{\"exec\":{\"command\":[\"true\"]},"
                                           "\"initialDelaySeconds\":2}") "]"),
     .ctrs = {RUN(0)},
     .now = 1 * S,
     .actions = "",
     .phase = "Running",
     .wake = 2 * S},
    {.what = "started: readiness and liveness run, readiness not yet passed",
     .pod = POD("\"containers\":[" CX("a", "\"startupProbe\":{\"exec\":{\"command\":[\"true\"]}},"
                                           "\"readinessProbe\":{\"tcpSocket\":{\"port\":80}},"
                                           "\"livenessProbe\":{\"tcpSocket\":{\"port\":80}}") "]"),
     .ctrs = {{.phase = KL_CTR_RUNNING,
               .pulled = true,
               .started_ms = T0,
               .probes = {[KL_PROBE_STARTUP] =
                              {.result = KL_PROBE_SUCCESS, .successes = 1, .last_ms = T0 + 1 * S},
                          [KL_PROBE_READINESS] = {.result = KL_PROBE_FAILURE},
                          [KL_PROBE_LIVENESS] = {.result = KL_PROBE_SUCCESS}}}},
     .now = 2 * S,
     .actions = "PROBE a Readiness; PROBE a Liveness",
     .phase = "Running",
     .checks = {"containerStatuses.0.started=true", "containerStatuses.0.ready=false",
                "conditions.2.status=False"}},
    {.what = "readiness passed: Ready; next probes after the period",
     .pod = POD("\"containers\":[" CX("a", "\"readinessProbe\":{\"tcpSocket\":{\"port\":80},"
                                           "\"periodSeconds\":5}") "]"),
     .ctrs = {{.phase = KL_CTR_RUNNING,
               .pulled = true,
               .started_ms = T0,
               .probes = {[KL_PROBE_READINESS] = {.result = KL_PROBE_SUCCESS,
                                                  .successes = 1,
                                                  .last_ms = T0 + 1 * S}}}},
     .now = 2 * S,
     .actions = "",
     .phase = "Running",
     .wake = 6 * S,
     .checks = {"containerStatuses.0.ready=true", "conditions.2.status=True"}},
    {.what = "liveness failed failureThreshold times: kill with the pod's grace",
     .pod = POD("\"terminationGracePeriodSeconds\":7,\"containers\":[" CX(
         "a", "\"livenessProbe\":{\"tcpSocket\":{\"port\":80}}") "]"),
     .ctrs = {{.phase = KL_CTR_RUNNING,
               .pulled = true,
               .started_ms = T0,
               .probes = {[KL_PROBE_LIVENESS] = {.result = KL_PROBE_FAILURE,
                                                 .failures = 3,
                                                 .last_ms = T0 + 30 * S}}}},
     .now = 31 * S,
     .actions = "KILL a 7000 Container a failed liveness probe, will be restarted",
     .phase = "Running"},
    {.what = "startup failed: kill",
     .pod = POD("\"containers\":[" CX("a", "\"startupProbe\":{\"tcpSocket\":{\"port\":80}}") "]"),
     .ctrs = {{.phase = KL_CTR_RUNNING,
               .pulled = true,
               .started_ms = T0,
               .probes = {[KL_PROBE_STARTUP] = {.result = KL_PROBE_FAILURE,
                                                .failures = 3,
                                                .last_ms = T0 + 30 * S}}}},
     .now = 31 * S,
     .actions = "KILL a 30000 Container a failed startup probe, will be restarted",
     .phase = "Running"},
    {.what = "a kill in progress: nothing more",
     .pod = POD("\"containers\":[" CX("a", "\"livenessProbe\":{\"tcpSocket\":{\"port\":80}}") "]"),
     .ctrs = {{.phase = KL_CTR_RUNNING,
               .pulled = true,
               .started_ms = T0,
               .killing = true,
               .probes = {[KL_PROBE_LIVENESS] = {.result = KL_PROBE_FAILURE}}}},
     .now = 31 * S,
     .actions = "",
     .phase = "Running"},
    /* deletion */
    {.what = "deleted: preStop first, bounded by the grace period",
     .pod =
         "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\",\"deletionTimestamp\":"
         "\"2027-01-15T08:00:00Z\",\"deletionGracePeriodSeconds\":20},\"spec\":{\"containers\":"
         "[" CX("a",
                "\"lifecycle\":{\"preStop\":{\"exec\":{\"command\":[\"x\"]}}}") "," C("b") "]}}",
     .ctrs = {RUN(0), RUN(0)},
     .deletion_seen_ms = T0 + 1 * S,
     .now = 1 * S,
     .actions = "PRESTOP a 20000; KILL b 20000 Stopping container b",
     .phase = "Running",
     .checks = {"containerStatuses.0.ready=false", "conditions.2.status=False"}},
    {.what = "preStop done: SIGTERM with what remains of the grace",
     .pod =
         "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\",\"deletionTimestamp\":"
         "\"2027-01-15T08:00:00Z\"},\"spec\":{\"terminationGracePeriodSeconds\":10,"
         "\"containers\":[" CX(
             "a", "\"lifecycle\":{\"preStop\":{\"exec\":{\"command\":[\"x\"]}}}") "]}}",
     .ctrs = {{.phase = KL_CTR_RUNNING, .pulled = true, .started_ms = T0, .prestop_done = true}},
     .deletion_seen_ms = T0,
     .now = 4 * S,
     .actions = "KILL a 6000 Stopping container a",
     .phase = "Running"},
    {.what = "deleted, all stopped: final status, delete the object",
     .pod =
         "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\",\"deletionTimestamp\":"
         "\"2027-01-15T08:00:00Z\"},\"spec\":{\"containers\":[" C("a") "," C("b") "]}}",
     .ctrs = {EXIT(0, 0, 3 * S), PULLED},
     .deletion_seen_ms = T0,
     .now = 3 * S,
     .actions = "",
     .phase = "Failed",
     .delete_pod = true,
     .checks = {"containerStatuses.0.state.terminated.exitCode=0",
                "containerStatuses.1.state.terminated.reason=ContainerStatusUnknown",
                "containerStatuses.1.state.terminated.exitCode=137", "conditions.0.status=False"}},
    {.what = "deleted, every container exited 0: Succeeded",
     .pod =
         "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\",\"deletionTimestamp\":"
         "\"2027-01-15T08:00:00Z\"},\"spec\":{\"containers\":[" C("a") "]}}",
     .ctrs = {EXIT(0, 0, 3 * S)},
     .deletion_seen_ms = T0,
     .now = 3 * S,
     .actions = "",
     .phase = "Succeeded",
     .delete_pod = true},
    {.what = "force-deleted (gone from the API): kill with the pod's grace",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {RUN(0)},
     .removed = true,
     .deletion_seen_ms = T0 + 1 * S,
     .now = 1 * S,
     .actions = "KILL a 30000 Stopping container a",
     .phase = "Running"},
    {.what = "force-deleted and stopped: nothing to delete",
     .pod = POD("\"containers\":[" C("a") "]"),
     .ctrs = {EXIT(137, 0, 2 * S)},
     .removed = true,
     .deletion_seen_ms = T0 + 1 * S,
     .now = 2 * S,
     .actions = "",
     .phase = "Failed",
     .delete_pod = false},
    /* QoS */
    {.what = "Guaranteed: limits only (requests default to them)",
     .pod = POD("\"containers\":[" CX("a", "\"resources\":{\"limits\":{\"cpu\":\"1\",\"memory\":"
                                           "\"1Gi\"}}") "]"),
     .ctrs = {RUN(0)},
     .actions = "",
     .phase = "Running",
     .checks = {"qosClass=Guaranteed"}},
    {.what = "Burstable: requests below limits",
     .pod = POD("\"containers\":[" CX("a", "\"resources\":{\"requests\":{\"cpu\":\"500m\"},"
                                           "\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}") "]"),
     .ctrs = {RUN(0)},
     .actions = "",
     .phase = "Running",
     .checks = {"qosClass=Burstable"}},
    {.what = "extended resources alone: BestEffort",
     .pod =
         POD("\"containers\":[" CX("a", "\"resources\":{\"limits\":{\"nvidia.com/gpu\":1}}") "]"),
     .ctrs = {RUN(0)},
     .actions = "",
     .phase = "Running",
     .checks = {"qosClass=BestEffort"}},
};

static char *actions_str(const struct kl_pod_plan *p)
{
    struct sbuf b;
    sbuf_init(&b, 4096);
    static const char *const kinds[] = {"PULL", "START", "PRESTOP", "KILL", "PROBE"};
    for (size_t i = 0; i < p->n_actions; i++) {
        const struct kl_action *a = &p->actions[i];
        sbuf_addf(&b, "%s%s %s", i ? "; " : "", kinds[a->kind], a->name);
        if (a->kind == KL_ACT_PROBE)
            sbuf_addf(&b, " %s", kl_probe_kind_name(a->probe));
        if (a->kind == KL_ACT_PRESTOP)
            sbuf_addf(&b, " %llu", (unsigned long long)a->grace_ms);
        if (a->kind == KL_ACT_KILL)
            sbuf_addf(&b, " %llu %s", (unsigned long long)a->grace_ms, a->message);
        if (a->kind == KL_ACT_START && a->backoff_ms)
            sbuf_addf(&b, " (backoff %llu)", (unsigned long long)a->backoff_ms);
    }
    assert_int_equal(sbuf_check(&b), 0);
    return sbuf_steal(&b);
}

static char *value_str(const json_t *v)
{
    if (json_is_string(v))
        return strdup(json_string_value(v));
    if (!v)
        return strdup("(absent)");
    return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
}

static void run_row(const struct row *r)
{
    json_error_t je;
    json_t *pod = json_loads(r->pod, 0, &je);
    if (!pod)
        fail_msg("%s: pod JSON: %s", r->what, je.text);
    size_t n_init = json_array_size(kobj_path(pod, "spec.initContainers"));
    size_t n_ctrs = json_array_size(kobj_path(pod, "spec.containers"));
    struct kl_pod_obs obs = {
        .init = r->init,
        .n_init = n_init,
        .ctrs = r->ctrs,
        .n_ctrs = n_ctrs,
        .sandbox_ready = !r->not_ready,
        .mount_error = r->mount_error,
        .admitted_ms = T0,
        .deletion_seen_ms = r->deletion_seen_ms,
        .removed = r->removed,
        .host_ip = "10.0.0.2",
        .pod_ip = "10.0.0.2",
    };
    struct kl_plan_config cfg = {0};
    struct kl_pod_plan p = {0};
    struct err e = {0};
    int rc = kl_pod_plan(pod, &obs, &cfg, T0 + r->now, &p, &e);
    if (rc < 0)
        fail_msg("%s: %s", r->what, err_msg(&e));
    char *acts = actions_str(&p);
    if (strcmp(acts, r->actions) != 0)
        fail_msg("%s: actions\n  got:  %s\n  want: %s", r->what, acts, r->actions);
    free(acts);
    const char *phase = kobj_path_str(p.status, "phase");
    if (!streq_ptr(phase, r->phase))
        fail_msg("%s: phase %s, want %s\n%s", r->what, phase, r->phase,
                 json_dumps(p.status, JSON_INDENT(1)));
    for (size_t i = 0; i < ARRAY_SIZE(r->checks) && r->checks[i]; i++) {
        const char *eq = strchr(r->checks[i], '=');
        char *path = strndup(r->checks[i], (size_t)(eq - r->checks[i]));
        char *got = value_str(kobj_path(p.status, path));
        if (strcmp(got, eq + 1) != 0)
            fail_msg("%s: %s = %s, want %s\n%s", r->what, path, got, eq + 1,
                     json_dumps(p.status, JSON_INDENT(1)));
        free(got);
        free(path);
    }
    if (r->wake && p.wake_ms != T0 + r->wake)
        fail_msg("%s: wake at +%lld ms, want +%llu", r->what, (long long)(p.wake_ms - T0),
                 (unsigned long long)r->wake);
    if (p.delete_pod != r->delete_pod)
        fail_msg("%s: delete_pod %d", r->what, p.delete_pod);
    char evs[256] = "";
    for (size_t i = 0; i < p.n_events; i++) {
        size_t l = strlen(evs);
        snprintf(evs + l, sizeof(evs) - l, "%s%s", i ? ";" : "", p.events[i].reason);
    }
    if (strcmp(evs, r->events ? r->events : "") != 0)
        fail_msg("%s: events %s, want %s", r->what, evs, r->events ? r->events : "");
    kl_pod_plan_clear(&p);
    json_decref(pod);
}

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
        run_row(&rows[i]);
}

/* lastTransitionTime stays while a condition keeps its status; startTime stays. */
static void test_transition_times_kept(void **state)
{
    (void)state;
    json_t *pod = json_loads(POD("\"containers\":[" C("a") "]"), 0, NULL);
    json_object_set_new(
        pod, "status",
        json_loads("{\"startTime\":\"2027-01-01T00:00:00Z\",\"conditions\":[{\"type\":"
                   "\"Ready\",\"status\":\"True\",\"lastTransitionTime\":"
                   "\"2027-01-02T00:00:00Z\"},{\"type\":\"PodScheduled\",\"status\":"
                   "\"False\",\"lastTransitionTime\":\"2027-01-03T00:00:00Z\"}]}",
                   0, NULL));
    struct kl_ctr_obs c[1] = {RUN(0)};
    struct kl_pod_obs obs = {.ctrs = c, .n_ctrs = 1, .sandbox_ready = true, .admitted_ms = T0};
    struct kl_pod_plan p = {0};
    struct err e = {0};
    assert_int_equal(kl_pod_plan(pod, &obs, NULL, T0 + 60 * S, &p, &e), 0);
    assert_string_equal(kobj_path_str(p.status, "startTime"), "2027-01-01T00:00:00Z");
    json_t *conds = json_object_get(p.status, "conditions");
    size_t i;
    json_t *cd;
    int seen = 0;
    json_array_foreach (conds, i, cd) {
        const char *type = kobj_str(cd, "type");
        if (strcmp(type, "Ready") == 0) {
            assert_string_equal(kobj_str(cd, "lastTransitionTime"), "2027-01-02T00:00:00Z");
            seen++;
        }
        if (strcmp(type, "PodScheduled") == 0) { /* status changed: now */
            assert_string_equal(kobj_str(cd, "lastTransitionTime"), "2027-01-15T08:01:00Z");
            seen++;
        }
    }
    assert_int_equal(seen, 2);
    kl_pod_plan_clear(&p);
    json_decref(pod);
}

/* A terminal pod stays terminal: nothing restarts even under restartPolicy Always. */
static void test_terminal_stays(void **state)
{
    (void)state;
    json_t *pod = json_loads(POD("\"containers\":[" C("a") "]"), 0, NULL);
    json_object_set_new(pod, "status", json_pack("{s:s}", "phase", "Failed"));
    struct kl_ctr_obs c[1] = {EXIT(1, 0, 1 * S)};
    struct kl_pod_obs obs = {.ctrs = c, .n_ctrs = 1, .sandbox_ready = true};
    struct kl_pod_plan p = {0};
    struct err e = {0};
    assert_int_equal(kl_pod_plan(pod, &obs, NULL, T0 + 60 * S, &p, &e), 0);
    assert_int_equal(p.n_actions, 0);
    assert_true(p.terminal);
    assert_string_equal(kobj_path_str(p.status, "phase"), "Failed");
    kl_pod_plan_clear(&p);
    json_decref(pod);
}

static void test_probe_record(void **state)
{
    (void)state;
    json_t *probe = json_pack("{s:i,s:i}", "successThreshold", 2, "failureThreshold", 2);
    struct kl_probe_state s;
    kl_probe_init(&s, KL_PROBE_READINESS);
    assert_int_equal(s.result, KL_PROBE_FAILURE);
    kl_probe_record(&s, probe, true, 1);
    assert_int_equal(s.result, KL_PROBE_FAILURE);
    kl_probe_record(&s, probe, true, 2);
    assert_int_equal(s.result, KL_PROBE_SUCCESS);
    kl_probe_record(&s, probe, false, 3); /* one failure: still ready */
    assert_int_equal(s.result, KL_PROBE_SUCCESS);
    kl_probe_record(&s, probe, false, 4);
    assert_int_equal(s.result, KL_PROBE_FAILURE);
    assert_int_equal(s.last_ms, 4);
    kl_probe_init(&s, KL_PROBE_LIVENESS);
    assert_int_equal(s.result, KL_PROBE_SUCCESS);
    kl_probe_init(&s, KL_PROBE_STARTUP);
    assert_int_equal(s.result, KL_PROBE_UNKNOWN);
    json_decref(probe);
}

static void test_go_duration(void **state)
{
    (void)state;
    static const struct {
        uint64_t ms;
        const char *s;
    } t[] = {{0, "0s"},        {100, "100ms"}, {10000, "10s"},     {80000, "1m20s"},
             {300000, "5m0s"}, {1500, "1.5s"}, {3600000, "1h0m0s"}};
    char buf[32];
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        kl_go_duration(t[i].ms, buf, sizeof(buf));
        assert_string_equal(buf, t[i].s);
    }
}

static void test_quantity(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int64_t milli;
    } t[] = {{"1", 1000},
             {"100m", 100},
             {"1.5", 1500},
             {"1Ki", 1024000},
             {"1Gi", 1073741824000LL},
             {"2e3", 2000000},
             {"1k", 1000000},
             {"0.1m", 1}};
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        int64_t v = 0;
        assert_int_equal(kobj_quantity_milli(t[i].s, &v), 0);
        assert_int_equal(v, t[i].milli);
    }
    int64_t v;
    assert_int_equal(kobj_quantity_milli("1x", &v), -EINVAL);
    assert_int_equal(kobj_quantity_milli("", &v), -EINVAL);
}

/* FallbackToLogsOnError: the last 80 lines, of those the last 2048 bytes. */
static void test_log_tail_message(void **state)
{
    (void)state;
    assert_null(kl_log_tail_message("", 0));
    _cleanup_free_ char *one = kl_log_tail_message("a\nb\n", 4);
    assert_string_equal(one, "a\nb\n");
    char big[4096];
    size_t n = 0;
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "line %d\n", i);
    _cleanup_free_ char *lines = kl_log_tail_message(big, n);
    assert_true(strncmp(lines, "line 20\n", 8) == 0); /* lines 20..99: 80 lines */
    assert_true(strstr(lines, "line 99\n") != NULL);
    char wide[3000];
    memset(wide, 'x', sizeof(wide));
    wide[sizeof(wide) - 1] = '\n';
    _cleanup_free_ char *bytes = kl_log_tail_message(wide, sizeof(wide));
    assert_int_equal(strlen(bytes), 2048);
}

static void test_bad_input(void **state)
{
    (void)state;
    json_t *pod = json_loads(POD("\"containers\":[]"), 0, NULL);
    struct kl_pod_obs obs = {0};
    struct kl_pod_plan p = {0};
    struct err e = {0};
    assert_int_equal(kl_pod_plan(pod, &obs, NULL, T0, &p, &e), -EINVAL);
    json_decref(pod);
    pod = json_loads(POD("\"containers\":[" C("a") "]"), 0, NULL);
    assert_int_equal(kl_pod_plan(pod, &obs, NULL, T0, &p, &e), -EINVAL); /* 0 observations */
    json_decref(pod);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),           cmocka_unit_test(test_transition_times_kept),
        cmocka_unit_test(test_terminal_stays), cmocka_unit_test(test_probe_record),
        cmocka_unit_test(test_go_duration),    cmocka_unit_test(test_quantity),
        cmocka_unit_test(test_bad_input),      cmocka_unit_test(test_log_tail_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
