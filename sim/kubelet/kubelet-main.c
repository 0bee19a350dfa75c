/* SPDX-License-Identifier: Apache-2.0 */
/* build/kubelet-sim: the shell. Reads the cluster file and checks it before anything starts. */
#include <errno.h>
#include <stddef.h>

#include "kubelet-sim.h"
#include "svc.h"

#define KL_COMPONENT        "kubelet-sim"
#define KL_CLUSTER_FILE_MAX (1u << 20)

struct kubelet_sim {
    const char *cluster_path;
    struct kl_cluster *cluster;
};

static const struct svc_option kl_options[] = {
    {.flag = "cluster",
     .env = "KUBELET_SIM_CLUSTER",
     .kind = SVC_STRING,
     .off = offsetof(struct kubelet_sim, cluster_path),
     .metavar = "FILE",
     .help = "the cluster file: the simulated nodes (required)"},
    {0},
};

static int kl_configure(struct svc *s, struct err *e)
{
    struct kubelet_sim *k = svc_state(s);
    if (!k->cluster_path)
        return err_set(e, -EINVAL, "--cluster: required");
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = file_read_all(k->cluster_path, KL_CLUSTER_FILE_MAX, &text, &len, e);
    if (r < 0)
        return r;
    return kl_cluster_parse(k->cluster_path, text, len, &k->cluster, e);
}

static int kl_run(struct svc *s, struct err *e)
{
    (void)e;
    svc_wait(s, DEADLINE_NEVER);
    return 0;
}

static void kl_cleanup(void *state)
{
    struct kubelet_sim *k = state;
    kl_cluster_free(k->cluster);
}

static const struct svc_component kl_component = {
    .name = KL_COMPONENT,
    .usage = "Usage: kubelet-sim --cluster FILE [flags]\n\n"
             "A kubelet for simulated GPU nodes.\n",
    .options = {kl_options},
    .state_size = sizeof(struct kubelet_sim),
    .configure = kl_configure,
    .run = kl_run,
    .cleanup = kl_cleanup,
};

int main(int argc, char **argv)
{
    return svc_main(&kl_component, argc, argv);
}
