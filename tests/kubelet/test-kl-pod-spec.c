/* SPDX-License-Identifier: Apache-2.0 */
/* The pod workers' spec builders: images, $(VAR) expansion, field and resource references,
 * volumes materialised under a scratch node root, a container's argv, env and mounts, and the
 * NVIDIA_VISIBLE_DEVICES the nvidia runtime handler leaves a container. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "kl-pod-plan.h"
#include "kobj.h"

static char root[256];

static void rm_rf(const char *p)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
    assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/kl-pod-spec.XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rm_rf(root);
    return 0;
}

static char *slurp(const char *fmt, const char *a)
{
    char path[512];
    snprintf(path, sizeof(path), fmt, root, a);
    char *data = NULL;
    size_t len;
    struct err e = {0};
    if (file_read_all(path, 1 << 20, &data, &len, &e) < 0)
        return NULL;
    return data;
}

/* ---- lookups: a fixed set of objects ------------------------------------------------------ */

static const char *const objects =
    "{\"configmaps\":{\"cfg\":{\"data\":{\"a\":\"1\",\"b\":\"two\",\"bad-key!\":\"x\"}},"
    "\"kube-root-ca.crt\":{\"data\":{\"ca.crt\":\"CA-FROM-CM\"}}},"
    "\"secrets\":{\"sec\":{\"data\":{\"pw\":\"c2VjcmV0\"}}}}";

static int lookup(void *ud, const char *kind, const char *ns, const char *name, json_t **ret,
                  struct err *e)
{
    json_t *all = ud;
    (void)ns;
    json_t *o = json_object_get(json_object_get(all, kind), name);
    if (!o)
        return err_set(e, -ENOENT, "not found");
    *ret = json_incref(o);
    return 0;
}
static int get_cm(void *ud, const char *ns, const char *name, json_t **ret, struct err *e)
{
    return lookup(ud, "configmaps", ns, name, ret, e);
}
static int get_secret(void *ud, const char *ns, const char *name, json_t **ret, struct err *e)
{
    return lookup(ud, "secrets", ns, name, ret, e);
}

static const char *const sim_env[] = {"GPUOP_SIM_FLEET=/f.yaml", NULL};

static struct kl_spec_input input(json_t *pod, json_t *objs)
{
    return (struct kl_spec_input){
        .pod = pod,
        .node_root = root,
        .host_ip = "10.1.0.2",
        .pod_ip = "10.1.0.2",
        .node_cpu_milli = 8000,
        .node_memory_bytes = 32ULL << 30,
        .gpuop_exe = "/b/gpuop",
        .sim_image_bin = "/b/sim/images",
        .sim_env = sim_env,
        .api_host = "10.1.0.1",
        .api_port = "6443",
        .sa_token = "TOKEN",
        .sa_ca_pem = "CA-FROM-CLIENT",
        .get_configmap = get_cm,
        .get_secret = get_secret,
        .lookup_ud = objs,
    };
}

static json_t *parse(const char *s)
{
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    if (!j)
        fail_msg("JSON: %s: %s", je.text, s);
    return j;
}

/* ---- images ------------------------------------------------------------------------------- */

static void test_images(void **state)
{
    (void)state;
    static const struct {
        const char *image, *entrypoint, *ref;
    } t[] = {
        {"gpuop:0.1.0", "/b/gpuop", "docker.io/library/gpuop:0.1.0"},
        {"gpuop", "/b/gpuop", "docker.io/library/gpuop:latest"},
        {"ghcr.io/acme/gpuop:v1", "/b/gpuop", "ghcr.io/acme/gpuop:v1"},
        {"localhost:5000/gpuop@sha256:00", "/b/gpuop", "localhost:5000/gpuop@sha256:00"},
        {"nvcr.io/nvidia/driver:550.127.05-ubuntu22.04", "/opt/gpuop-sim/bin/nvidia-driver",
         "nvcr.io/nvidia/driver:550.127.05-ubuntu22.04"},
        {"nvcr.io/nvidia/cuda:12.4.1-base-ubi9", "/opt/gpuop-sim/bin/cuda-sample", NULL},
        {"nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0", "/opt/gpuop-sim/bin/cuda-sample",
         NULL},
        /* the driver pod's module containers, as the operator tags them for the OS */
        {"nvcr.io/nvidia/cloud-native/nvidia-fs:2.20.5-ubuntu22.04",
         "/opt/gpuop-sim/bin/nvidia-gds-driver", NULL},
        {"nvcr.io/nvidia/cloud-native/gdrdrv:v2.4.1-2-ubuntu22.04",
         "/opt/gpuop-sim/bin/nvidia-gdrcopy-driver", NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        struct kl_image im = {0};
        struct err e = {0};
        if (kl_image_resolve(t[i].image, "/b/gpuop", &im, &e) < 0)
            fail_msg("%s: %s", t[i].image, err_msg(&e));
        assert_string_equal(im.entrypoint, t[i].entrypoint);
        if (t[i].ref)
            assert_string_equal(im.ref, t[i].ref);
        assert_non_null(strstr(im.image_id, "@sha256:"));
        kl_image_clear(&im);
    }
    struct kl_image im = {0};
    struct err e = {0};
    assert_int_equal(kl_image_resolve("busybox:1.36", "/b/gpuop", &im, &e), -ENOENT);
    assert_string_equal(err_msg(&e),
                        "rpc error: code = NotFound desc = failed to pull and unpack image "
                        "\"docker.io/library/busybox:1.36\": failed to resolve reference "
                        "\"docker.io/library/busybox:1.36\": docker.io/library/busybox:1.36: "
                        "not found");
    /* a repository merely ending in "gpuop" is not gpuop */
    assert_int_equal(kl_image_resolve("acme/notgpuop:1", "/b/gpuop", &im, &e), -ENOENT);
    assert_int_equal(kl_image_resolve("nvcr.io/nvidia/driverx:1", "/b/gpuop", &im, &e), -ENOENT);
}

/* ---- expansion (the cases of Kubernetes' expansion_test.go) -------------------------------- */

static void test_expand(void **state)
{
    (void)state;
    const char *env[] = {"VAR_A=A",          "VAR_B=B",    "VAR_C=C",
                         "VAR_REF=$(VAR_A)", "VAR_EMPTY=", "VAR_A=A2"};
    static const struct {
        const char *in, *out;
    } t[] = {
        {"$(VAR_A)", "A2"},
        {"___$(VAR_B)___", "___B___"},
        {"$(VAR_A)-$(VAR_A)", "A2-A2"},
        {"$(VAR_REF)", "$(VAR_A)"}, /* values are not expanded twice */
        {"foo\\$(VAR_C)bar", "foo\\Cbar"},
        {"$$(VAR_B)", "$(VAR_B)"},
        {"$$$(VAR_B)", "$B"},
        {"$(VAR_DNE)", "$(VAR_DNE)"},
        {"$(VAR_EMPTY)", ""},
        {"$(VAR_A", "$(VAR_A"},
        {"$VAR_A", "$VAR_A"},
        {"$", "$"},
        {"x$", "x$"},
        {"$(", "$("},
        {"$()", "$()"},
        {"$$", "$"},
        {"", ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        char *got = kl_expand(t[i].in, env, ARRAY_SIZE(env));
        if (strcmp(got, t[i].out) != 0)
            fail_msg("expand %s: got %s want %s", t[i].in, got, t[i].out);
        free(got);
    }
}

/* ---- references --------------------------------------------------------------------------- */

static void test_refs(void **state)
{
    (void)state;
    json_t *pod = parse(
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u1\",\"labels\":{\"app\":"
        "\"x\"},\"annotations\":{\"a.b/c\":\"d\"}},\"spec\":{\"nodeName\":\"n1\","
        "\"serviceAccountName\":\"sa\",\"containers\":[{\"name\":\"c\",\"image\":\"gpuop\","
        "\"resources\":{\"limits\":{\"cpu\":\"1500m\",\"memory\":\"1Gi\"},\"requests\":{"
        "\"memory\":\"100Mi\"}}}]}}");
    struct kl_spec_input in = input(pod, NULL);
    static const struct {
        const char *path, *value;
    } f[] = {
        {"metadata.name", "p"},
        {"metadata.namespace", "ns"},
        {"metadata.uid", "u1"},
        {"metadata.labels['app']", "x"},
        {"metadata.annotations['a.b/c']", "d"},
        {"metadata.labels['none']", ""},
        {"spec.nodeName", "n1"},
        {"spec.serviceAccountName", "sa"},
        {"status.hostIP", "10.1.0.2"},
        {"status.podIP", "10.1.0.2"},
        {"status.podIPs", "10.1.0.2"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
        char *v = NULL;
        struct err e = {0};
        if (kl_field_ref(&in, f[i].path, &v, &e) < 0)
            fail_msg("%s: %s", f[i].path, err_msg(&e));
        assert_string_equal(v, f[i].value);
        free(v);
    }
    char *v = NULL;
    struct err e = {0};
    assert_int_equal(kl_field_ref(&in, "spec.containers", &v, &e), -EINVAL);
    assert_string_equal(err_msg(&e), "unsupported fieldPath: spec.containers");

    const json_t *c = kobj_path(pod, "spec.containers.0");
    static const struct {
        const char *ref, *value;
    } r[] = {
        {"{\"resource\":\"limits.cpu\"}", "2"}, /* ceil(1.5) */
        {"{\"resource\":\"limits.cpu\",\"divisor\":\"1m\"}", "1500"},
        {"{\"resource\":\"requests.cpu\",\"divisor\":\"1m\"}", "1500"}, /* from limits */
        {"{\"resource\":\"limits.memory\",\"divisor\":\"1Mi\"}", "1024"},
        {"{\"resource\":\"requests.memory\"}", "104857600"},
        {"{\"resource\":\"limits.memory\",\"divisor\":\"1Gi\"}", "1"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(r); i++) {
        json_t *ref = parse(r[i].ref);
        if (kl_resource_field_ref(&in, c, ref, &v, &e) < 0)
            fail_msg("%s: %s", r[i].ref, err_msg(&e));
        if (strcmp(v, r[i].value) != 0)
            fail_msg("%s: got %s want %s", r[i].ref, v, r[i].value);
        free(v);
        json_decref(ref);
    }
    /* no limit: the node's allocatable */
    json_t *bare = parse("{\"name\":\"b\"}");
    json_t *ref = parse("{\"resource\":\"limits.cpu\",\"divisor\":\"1m\"}");
    assert_int_equal(kl_resource_field_ref(&in, bare, ref, &v, &e), 0);
    assert_string_equal(v, "8000");
    free(v);
    json_decref(ref);
    ref = parse("{\"resource\":\"limits.nvidia.com/gpu\"}");
    assert_int_equal(kl_resource_field_ref(&in, bare, ref, &v, &e), -EINVAL);
    json_decref(ref);
    json_decref(bare);
    json_decref(pod);
}

/* ---- volumes ------------------------------------------------------------------------------ */

#define VPOD(vols)                                                                               \
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u1\",\"labels\":{\"b\":\"2\"," \
    "\"a\":\"1\"}},\"spec\":{\"automountServiceAccountToken\":false,\"containers\":[{\"name\":"  \
    "\"c\",\"image\":\"gpuop\"}],\"volumes\":[" vols "]}}"

static void test_volumes(void **state)
{
    (void)state;
    json_t *objs = parse(objects);
    json_t *pod = parse(VPOD(
        "{\"name\":\"run\",\"hostPath\":{\"path\":\"/run/nvidia\",\"type\":"
        "\"DirectoryOrCreate\"}},"
        "{\"name\":\"plain\",\"hostPath\":{\"path\":\"/var/plain\"}},"
        "{\"name\":\"sock\",\"hostPath\":{\"path\":\"/var/x.sock\",\"type\":\"FileOrCreate\"}},"
        "{\"name\":\"cm\",\"configMap\":{\"name\":\"cfg\",\"defaultMode\":384,\"items\":[{"
        "\"key\":\"b\",\"path\":\"sub/b.txt\"}]}},"
        "{\"name\":\"cmall\",\"configMap\":{\"name\":\"cfg\"}},"
        "{\"name\":\"opt\",\"configMap\":{\"name\":\"nope\",\"optional\":true}},"
        "{\"name\":\"sec\",\"secret\":{\"secretName\":\"sec\"}},"
        "{\"name\":\"dapi\",\"downwardAPI\":{\"items\":[{\"path\":\"labels\",\"fieldRef\":{"
        "\"fieldPath\":\"metadata.labels\"}},{\"path\":\"name\",\"fieldRef\":{\"fieldPath\":"
        "\"metadata.name\"}}]}},"
        "{\"name\":\"scratch\",\"emptyDir\":{}},"
        "{\"name\":\"kube-api-access-x\",\"projected\":{\"sources\":[{\"serviceAccountToken\":{"
        "\"path\":\"token\"}},{\"configMap\":{\"name\":\"kube-root-ca.crt\",\"items\":[{\"key\":"
        "\"ca.crt\",\"path\":\"ca.crt\"}]}},{\"downwardAPI\":{\"items\":[{\"path\":\"namespace\","
        "\"fieldRef\":{\"fieldPath\":\"metadata.namespace\"}}]}}]}}"));
    struct kl_spec_input in = input(pod, objs);
    struct kl_pod_volumes *vols = NULL;
    struct err e = {0};
    if (kl_pod_volumes_setup(&in, &vols, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_int_equal(vols->n, 10);
    struct stat st;
    char p[512];
    snprintf(p, sizeof(p), "%s/run/nvidia", root);
    assert_int_equal(stat(p, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_string_equal(vols->v[0].host_path, p);
    assert_false(vols->v[0].read_only);
    snprintf(p, sizeof(p), "%s/var/x.sock", root);
    assert_int_equal(stat(p, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    const char *vd = "%s/var/lib/kubelet/pods/u1/volumes/kubernetes.io~%s";
    char *s = slurp(vd, "configmap/cm/sub/b.txt");
    assert_string_equal(s, "two");
    free(s);
    snprintf(p, sizeof(p),
             "%s/var/lib/kubelet/pods/u1/volumes/kubernetes.io~configmap/cm/sub/"
             "b.txt",
             root);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    s = slurp(vd, "configmap/cmall/a");
    assert_string_equal(s, "1");
    free(s);
    s = slurp(vd, "secret/sec/pw");
    assert_string_equal(s, "secret");
    free(s);
    s = slurp(vd, "downward-api/dapi/labels");
    assert_string_equal(s, "a=\"1\"\nb=\"2\"");
    free(s);
    s = slurp(vd, "projected/kube-api-access-x/token");
    assert_string_equal(s, "TOKEN");
    free(s);
    s = slurp(vd, "projected/kube-api-access-x/ca.crt");
    assert_string_equal(s, "CA-FROM-CM");
    free(s);
    s = slurp(vd, "projected/kube-api-access-x/namespace");
    assert_string_equal(s, "ns");
    free(s);
    assert_true(vols->v[3].read_only);
    kl_pod_volumes_free(vols);
    json_decref(pod);

    /* failures: the kubelet's FailedMount texts */
    static const struct {
        const char *vol, *msg;
    } bad[] = {
        {"{\"name\":\"x\",\"hostPath\":{\"path\":\"/missing\",\"type\":\"Directory\"}}",
         "MountVolume.SetUp failed for volume \"x\" : hostPath type check failed: /missing is "
         "not a directory"},
        {"{\"name\":\"y\",\"hostPath\":{\"path\":\"/run\",\"type\":\"File\"}}",
         "MountVolume.SetUp failed for volume \"y\" : hostPath type check failed: /run is not a "
         "file"},
        {"{\"name\":\"z\",\"configMap\":{\"name\":\"nope\"}}",
         "MountVolume.SetUp failed for volume \"z\" : configmap \"nope\" not found"},
        {"{\"name\":\"s\",\"secret\":{\"secretName\":\"nope\"}}",
         "MountVolume.SetUp failed for volume \"s\" : secret \"nope\" not found"},
        {"{\"name\":\"k\",\"configMap\":{\"name\":\"cfg\",\"items\":[{\"key\":\"zz\",\"path\":"
         "\"zz\"}]}}",
         "MountVolume.SetUp failed for volume \"k\" : configmap references non-existent config "
         "key: zz"},
        {"{\"name\":\"t\",\"configMap\":{\"name\":\"cfg\",\"items\":[{\"key\":\"a\",\"path\":"
         "\"../escape\"}]}}",
         "MountVolume.SetUp failed for volume \"t\" : invalid path \"../escape\": must be "
         "relative and may not contain '..'"},
        {"{\"name\":\"pvc\",\"persistentVolumeClaim\":{\"claimName\":\"c\"}}",
         "MountVolume.SetUp failed for volume \"pvc\" : volume type not supported by "
         "kubelet-sim"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char buf[2048];
        snprintf(buf, sizeof(buf), VPOD("%s"), bad[i].vol);
        pod = parse(buf);
        in = input(pod, objs);
        vols = NULL;
        assert_true(kl_pod_volumes_setup(&in, &vols, &e) < 0);
        assert_null(vols);
        assert_string_equal(err_msg(&e), bad[i].msg);
        json_decref(pod);
    }
    assert_int_equal(kl_pod_volumes_teardown(root, "u1", &e), 0);
    snprintf(p, sizeof(p), "%s/var/lib/kubelet/pods/u1", root);
    assert_int_equal(stat(p, &st), -1);
    snprintf(p, sizeof(p), "%s/run/nvidia", root); /* hostPath contents stay */
    assert_int_equal(stat(p, &st), 0);
    json_decref(objs);
}

/* ---- containers --------------------------------------------------------------------------- */

static const char *env_of(char **envp, const char *name)
{
    size_t n = strlen(name);
    for (char **p = envp; *p; p++)
        if (strncmp(*p, name, n) == 0 && (*p)[n] == '=')
            return *p + n + 1;
    return NULL;
}

static void test_container(void **state)
{
    (void)state;
    json_t *objs = parse(objects);
    json_t *pod = parse(
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u2\"},\"spec\":{"
        "\"nodeName\":\"n1\",\"initContainers\":[{\"name\":\"i\",\"image\":\"gpuop:1\"}],"
        "\"containers\":[{\"name\":\"c\",\"image\":\"gpuop:1\",\"workingDir\":\"/w\","
        "\"command\":[\"gpuop\",\"$(MODE)\"],\"args\":[\"--node=$(NODE)\",\"$(MISSING)\","
        "\"$$(NODE)\"],"
        "\"envFrom\":[{\"configMapRef\":{\"name\":\"cfg\"},\"prefix\":\"CFG_\"},{\"secretRef\":{"
        "\"name\":\"gone\",\"optional\":true}}],"
        "\"env\":[{\"name\":\"NODE\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":"
        "\"spec.nodeName\"}}},{\"name\":\"MODE\",\"value\":\"device-plugin\"},{\"name\":\"NM\","
        "\"value\":\"$(NODE)-$(MODE)\"},{\"name\":\"PW\",\"valueFrom\":{\"secretKeyRef\":{"
        "\"name\":\"sec\",\"key\":\"pw\"}}},{\"name\":\"OPT\",\"valueFrom\":{\"configMapKeyRef\":{"
        "\"name\":\"cfg\",\"key\":\"zz\",\"optional\":true}}},{\"name\":\"CFG_a\",\"value\":"
        "\"override\"},{\"name\":\"GPUOP_SIM_FLEET\",\"value\":\"mine\"}],"
        "\"volumeMounts\":[{\"name\":\"run\",\"mountPath\":\"/run/nvidia\"},{\"name\":\"run\","
        "\"mountPath\":\"/sub\",\"subPath\":\"validations\",\"readOnly\":true},{\"name\":\"cm\","
        "\"mountPath\":\"/etc/cfg\"}]}],"
        "\"volumes\":[{\"name\":\"run\",\"hostPath\":{\"path\":\"/run/nvidia\",\"type\":"
        "\"DirectoryOrCreate\"}},{\"name\":\"cm\",\"configMap\":{\"name\":\"cfg\"}}]}}");
    struct kl_spec_input in = input(pod, objs);
    struct kl_pod_volumes *vols = NULL;
    struct err e = {0};
    if (kl_pod_volumes_setup(&in, &vols, &e) < 0)
        fail_msg("%s", err_msg(&e));
    struct kl_image im = {0};
    assert_int_equal(kl_image_resolve("gpuop:1", "/b/gpuop", &im, &e), 0);
    struct kl_ctr_build *b = NULL;
    if (kl_ctr_build(&in, vols, false, 0, &im, &b, &e) < 0)
        fail_msg("%s", err_msg(&e));
    const char *argv[] = {"/b/gpuop", "device-plugin", "--node=n1", "$(MISSING)", "$(NODE)", NULL};
    for (size_t i = 0; argv[i]; i++)
        assert_string_equal(b->argv[i], argv[i]);
    assert_null(b->argv[5]);
    assert_string_equal(b->workdir, "/w");
    assert_string_equal(env_of(b->envp, "NODE"), "n1");
    assert_string_equal(env_of(b->envp, "NM"), "n1-device-plugin");
    assert_string_equal(env_of(b->envp, "PW"), "secret");
    assert_null(env_of(b->envp, "OPT"));
    assert_string_equal(env_of(b->envp, "CFG_a"), "override");
    assert_string_equal(env_of(b->envp, "CFG_b"), "two");
    assert_null(env_of(b->envp, "CFG_bad-key!"));
    assert_string_equal(env_of(b->envp, "GPUOP_SIM_IMAGE"), "gpuop:1");
    assert_string_equal(env_of(b->envp, "GPUOP_SIM_FLEET"), "/f.yaml"); /* the hardware wins */
    assert_string_equal(env_of(b->envp, "KUBERNETES_SERVICE_HOST"), "10.1.0.1");
    assert_string_equal(env_of(b->envp, "KUBERNETES_SERVICE_PORT"), "6443");
    assert_true(str_has_prefix(env_of(b->envp, "PATH"), "/opt/gpuop-sim/bin:/b:"));
    /* mounts: sim bin, gpuop folder, the three volumeMounts, the service-account token */
    assert_int_equal(b->n_mounts, 6);
    assert_string_equal(b->mounts[0].target, KL_SIM_BIN_MOUNT);
    assert_string_equal(b->mounts[0].source, "/b/sim/images");
    assert_string_equal(b->mounts[1].target, "/b");
    char p[512];
    snprintf(p, sizeof(p), "%s/run/nvidia/validations", root);
    assert_string_equal(b->mounts[3].source, p);
    assert_true(b->mounts[3].read_only);
    assert_false(b->mounts[2].read_only);
    assert_true(b->mounts[4].read_only); /* a configMap is read-only */
    assert_string_equal(b->mounts[5].target, KL_SA_MOUNT);
    char *tok = slurp("%s/var/lib/kubelet/pods/u2/volumes/kubernetes.io~projected/%s/token",
                      "kube-api-access-sim");
    assert_string_equal(tok, "TOKEN");
    free(tok);
    char *ca = slurp("%s/var/lib/kubelet/pods/u2/volumes/kubernetes.io~projected/%s/ca.crt",
                     "kube-api-access-sim");
    assert_string_equal(ca, "CA-FROM-CM");
    free(ca);
    kl_ctr_build_free(b);

    /* the init container: no command, the image's entrypoint */
    assert_int_equal(kl_ctr_build(&in, vols, true, 0, &im, &b, &e), 0);
    assert_string_equal(b->argv[0], "/b/gpuop");
    assert_null(b->argv[1]);
    assert_null(b->workdir);
    kl_ctr_build_free(b);
    kl_image_clear(&im);
    kl_pod_volumes_free(vols);
    json_decref(pod);

    /* a missing key: the kubelet's CreateContainerConfigError text */
    pod = parse("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u3\"},\"spec\":{"
                "\"containers\":[{\"name\":\"c\",\"image\":\"gpuop\",\"env\":[{\"name\":\"X\","
                "\"valueFrom\":{\"configMapKeyRef\":{\"name\":\"cfg\",\"key\":\"zz\"}}}]}]}}");
    in = input(pod, objs);
    assert_int_equal(kl_pod_volumes_setup(&in, &vols, &e), 0);
    assert_int_equal(kl_image_resolve("gpuop", "/b/gpuop", &im, &e), 0);
    assert_int_equal(kl_ctr_build(&in, vols, false, 0, &im, &b, &e), -ENOENT);
    assert_string_equal(err_msg(&e), "couldn't find key zz in ConfigMap ns/cfg");
    kl_image_clear(&im);
    kl_pod_volumes_free(vols);
    json_decref(pod);
    json_decref(objs);
}

static void test_nvidia_visible(void **state)
{
    (void)state;
    const struct kl_mount plugin[] = {
        {"/dev/null", "/var/run/nvidia-container-devices/GPU-1", false},
        {"/n1/var/lib/x", "/data", false},
        {"/dev/null", "/var/run/nvidia-container-devices/GPU-0", false},
    };
    const struct kl_mount all[] = {{"/n1/dev/null", "/var/run/nvidia-container-devices/all", true}};
    const struct kl_mount not_null[] = {
        {"/n1/tmp/empty", "/var/run/nvidia-container-devices/all", false},
        {"/dev/null", "/var/run/nvidia-container-devices/", false},
        {"/dev/null", "/var/run/nvidia-container-devicesX/1", false},
    };
    static const struct {
        const char *value;
        bool privileged;
        int mounts; /* 0 none, 1 plugin, 2 all, 3 not_null */
        const char *want;
    } cases[] = {
        /* an unprivileged container's own devices: none */
        {"all", false, 0, "void"},
        {"1", false, 0, "void"},
        {"GPU-1", false, 3, "void"},
        /* ... a privileged one's: as they are */
        {"all", true, 0, NULL},
        {"0,1", true, 1, "0,1,GPU-1,GPU-0"},
        /* the plugin's volume mounts, whatever the variable says */
        {"/var/run/nvidia-container-devices", false, 1, "GPU-1,GPU-0"},
        {"all", false, 1, "GPU-1,GPU-0"},
        {NULL, false, 2, "all"},
        {"/var/run/nvidia-container-devices", true, 2, "all"},
        /* nothing named: left as it is */
        {NULL, false, 0, NULL},
        {"void", false, 0, NULL},
        {"none", false, 3, NULL},
        {"", false, 0, NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const struct kl_mount *m = cases[i].mounts == 1   ? plugin
                                   : cases[i].mounts == 2 ? all
                                   : cases[i].mounts == 3 ? not_null
                                                          : NULL;
        size_t n = cases[i].mounts == 1   ? ARRAY_SIZE(plugin)
                   : cases[i].mounts == 2 ? ARRAY_SIZE(all)
                   : cases[i].mounts == 3 ? ARRAY_SIZE(not_null)
                                          : 0;
        char *got = kl_nvidia_visible(cases[i].value, cases[i].privileged, m, n, "/n1");
        if (!streq_ptr(got, cases[i].want))
            fail_msg("case %zu: got %s, want %s", i, got ? got : "(null)",
                     cases[i].want ? cases[i].want : "(null)");
        free(got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_images),    cmocka_unit_test(test_expand),
        cmocka_unit_test(test_refs),      cmocka_unit_test(test_volumes),
        cmocka_unit_test(test_container), cmocka_unit_test(test_nvidia_visible),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
