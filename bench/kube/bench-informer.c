/* SPDX-License-Identifier: Apache-2.0 */
/* Node informer at scale against kubesim: time to sync, heap per node (full objects and a
 * projection), watch events per second (live, and replaying a backlog).
 * usage: bench-informer KUBECONFIG NODES PATCHES */
#include <malloc.h>
#include <sys/resource.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kube-internal.h"

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static size_t heap_used(void)
{
    malloc_trim(0);
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

static const char *const keep[] = {"spec.unschedulable",
                                   "spec.taints",
                                   "status.allocatable",
                                   "status.nodeInfo.kernelVersion",
                                   "status.nodeInfo.osImage",
                                   "status.nodeInfo.containerRuntimeVersion",
                                   NULL};

static const char *const index_keys[] = {"nvidia.com/gpu.present", "nvidia.com/gpu.deploy.driver",
                                         NULL};

/* mode 0: full objects; 1: projection, every label indexed; 2: projection, two label keys
 * indexed */
static int sync_once(struct kube_client *c, int mode, unsigned nodes, double *ret_s,
                     double *ret_bytes_per_node, double *ret_cpu_us,
                     struct kube_informer **keep_inf)
{
    double cpu0 = cpu_s();
    size_t h0 = heap_used();
    uint64_t t0 = now_us_mono();
    struct kube_informer_opts o = {.page_size = 500,
                                   .keep_fields = mode ? keep : NULL,
                                   .index_label_keys = mode == 2 ? index_keys : NULL};
    struct kube_informer *inf = NULL;
    struct err e = {0};
    if (kube_informer_new(c, &KUBE_NODES, &o, &inf, &e) < 0) {
        fprintf(stderr, "informer: %s\n", e.msg);
        return -1;
    }
    if (kube_informer_wait_synced(inf, 600000) < 0 || kube_informer_count(inf) != nodes) {
        fprintf(stderr, "informer did not sync (%zu of %u nodes)\n", kube_informer_count(inf),
                nodes);
        kube_informer_free(inf);
        return -1;
    }
    *ret_s = (double)(now_us_mono() - t0) / 1e6;
    *ret_cpu_us = (cpu_s() - cpu0) * 1e6 / nodes;
    size_t h1 = heap_used();
    *ret_bytes_per_node = ((double)h1 - (double)h0) / nodes;
    if (keep_inf)
        *keep_inf = inf;
    else
        kube_informer_free(inf);
    return 0;
}

struct writer {
    struct kube_client *c;
    unsigned nodes, first, count;
    int failures;
};

static void *writer_main(void *ud)
{
    struct writer *w = ud;
    for (unsigned i = 0; i < w->count; i++) {
        unsigned k = w->first + i;
        char name[32], val[32];
        snprintf(name, sizeof(name), "gpu-node-%05u", k % w->nodes);
        snprintf(val, sizeof(val), "v%u", k);
        json_t *p = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "bench/round", val);
        struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
        struct err e = {0};
        if (kube_patch(w->c, &KUBE_NODES, NULL, name, &po, p, NULL, &e) < 0 && w->failures++ == 0)
            fprintf(stderr, "patch: %s\n", e.msg);
        json_decref(p);
    }
    return NULL;
}

struct counter {
    unsigned n, want;
};

static int count_cb(enum kube_watch_type t, json_t *obj, void *ud)
{
    (void)obj;
    struct counter *c = ud;
    if (t == KUBE_WATCH_MODIFIED)
        c->n++;
    return c->n >= c->want ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s KUBECONFIG NODES PATCHES\n", argv[0]);
        return 2;
    }
    unsigned nodes = (unsigned)atoi(argv[2]), patches = (unsigned)atoi(argv[3]);
    struct kube_options o = {.kubeconfig = argv[1], .qps = 100000, .burst = 100000};
    struct kube_client *c = NULL, *wc = NULL;
    struct err e = {0};
    if (kube_client_new(&o, &c, &e) < 0 || kube_client_new(&o, &wc, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    long rss0 = rss_kib();
    double full_s, full_b, proj_s, proj_b, lean_s, lean_b, full_c, proj_c, lean_c;
    if (sync_once(c, 0, nodes, &full_s, &full_b, &full_c, NULL) < 0)
        return 1;
    long rss_full = rss_kib();
    if (sync_once(c, 2, nodes, &lean_s, &lean_b, &lean_c, NULL) < 0)
        return 1;
    struct kube_informer *inf = NULL;
    if (sync_once(c, 1, nodes, &proj_s, &proj_b, &proj_c, &inf) < 0)
        return 1;

    /* live: writers patch node labels, the projected informer follows */
    _cleanup_free_ char *rv0 = kube_informer_resource_version(inf);
    struct kube_informer_stats st0, st1;
    kube_informer_stats(inf, &st0);
    enum { W = 8 };
    pthread_t th[W];
    struct writer w[W];
    uint64_t t0 = now_us_mono();
    for (unsigned i = 0; i < W; i++) {
        w[i] = (struct writer){wc, nodes, i * (patches / W), patches / W, 0};
        pthread_create(&th[i], NULL, writer_main, &w[i]);
    }
    for (unsigned i = 0; i < W; i++)
        pthread_join(th[i], NULL);
    double write_s = (double)(now_us_mono() - t0) / 1e6;
    unsigned total = (patches / W) * W;
    uint64_t deadline = now_ms_mono() + 120000;
    do {
        kube_informer_stats(inf, &st1);
        if (st1.events - st0.events >= total)
            break;
        usleep(1000);
    } while (now_ms_mono() < deadline);
    double live_s = (double)(now_us_mono() - t0) / 1e6;
    unsigned live_events = (unsigned)(st1.events - st0.events);
    kube_informer_free(inf);

    /* backlog: one watch from before the writes, replaying every event */
    struct counter cnt = {0, total};
    struct kube_watch_opts wo = {.resource_version = rv0, .timeout_seconds = 120};
    t0 = now_us_mono();
    double cpu0 = cpu_s();
    int r = kube_watch(c, &KUBE_NODES, NULL, &wo, count_cb, &cnt, &e);
    double replay_s = (double)(now_us_mono() - t0) / 1e6;
    double replay_cpu = cpu_s() - cpu0;
    if (r < 0)
        fprintf(stderr, "replay watch: %s\n", e.msg);

    printf("nodes=%u\n", nodes);
    printf("full_sync_s=%.3f\nfull_bytes_per_node=%.0f\n", full_s, full_b);
    printf("proj_sync_s=%.3f\nproj_bytes_per_node=%.0f\n", proj_s, proj_b);
    printf("full_cpu_us=%.0f\nproj_cpu_us=%.0f\nlean_cpu_us=%.0f\n", full_c, proj_c, lean_c);
    printf("lean_sync_s=%.3f\nlean_bytes_per_node=%.0f\n", lean_s, lean_b);
    printf("rss_before_kib=%ld\nrss_after_full_kib=%ld\n", rss0, rss_full);
    printf("patches=%u\nwrite_s=%.3f\nlive_events=%u\nlive_s=%.3f\nlive_eps=%.0f\n", total, write_s,
           live_events, live_s, live_events / live_s);
    printf("replay_events=%u\nreplay_s=%.3f\nreplay_eps=%.0f\n", cnt.n, replay_s, cnt.n / replay_s);
    printf("replay_cpu_us_per_event=%.1f\n", cnt.n ? replay_cpu * 1e6 / cnt.n : 0.0);
    printf("requests=%llu\n", (unsigned long long)kube_client_requests(c));
    kube_client_free(c);
    kube_client_free(wc);
    return 0;
}
