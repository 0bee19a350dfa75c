/* SPDX-License-Identifier: Apache-2.0 */
/* The spec builders of the pod workers (kl-pod-plan.h): image to program, volumes, env, argv. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kl-pod-plan.h"
#include "kobj.h"

#define OBJ_FILE_MAX   (4u << 20)
#define ENV_MAX        4096
#define STR_LIMIT      (1u << 20)
#define DEFAULT_MODE   0644
#define SA_VOLUME_NAME "kube-api-access-sim"
#define STD_PATH       "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* ---- images ------------------------------------------------------------------------------- */

char *kl_image_normalise(const char *image)
{
    const char *slash = strchr(image, '/');
    _cleanup_free_ char *full = NULL;
    if (!slash)
        full = xasprintf("docker.io/library/%s", image);
    else {
        size_t first = (size_t)(slash - image);
        bool registry = memchr(image, '.', first) || memchr(image, ':', first) ||
                        (first == 9 && strncmp(image, "localhost", 9) == 0);
        full = registry ? xstrdup(image) : xasprintf("docker.io/%s", image);
    }
    const char *last = strrchr(full, '/');
    if (!strchr(last, ':') && !strchr(full, '@'))
        return xasprintf("%s:latest", full);
    return steal_ptr(&full);
}

/* The repository of a normalised reference: without its tag or digest. */
static char *image_repository(const char *ref)
{
    char *r = xstrdup(ref);
    char *at = strchr(r, '@');
    if (at)
        *at = '\0';
    char *last = strrchr(r, '/');
    char *colon = strrchr(last ? last : r, ':');
    if (colon)
        *colon = '\0';
    return r;
}

void kl_image_clear(struct kl_image *im)
{
    if (!im)
        return;
    free(im->ref);
    free(im->image_id);
    free(im->entrypoint);
    free(im->command_name);
    *im = (struct kl_image){0};
}

/* A stable digest for a reference (the simulation has no registry: the same name, the same
 * digest). 64 hex digits of a 64-bit FNV-1a over the name, salted per block. */
static void fake_digest(const char *s, char out[65])
{
    for (int blk = 0; blk < 4; blk++) {
        uint64_t h = 1469598103934665603ULL ^ (uint64_t)blk;
        for (const char *p = s; *p; p++) {
            h ^= (unsigned char)*p;
            h *= 1099511628211ULL;
        }
        snprintf(out + blk * 16, 17, "%016llx", (unsigned long long)h);
    }
}

int kl_image_resolve(const char *image, const char *gpuop_exe, struct kl_image *ret, struct err *e)
{
    if (!image || !image[0])
        return err_set(e, -EINVAL, "no image");
    _cleanup_free_ char *ref = kl_image_normalise(image);
    _cleanup_free_ char *repo = image_repository(ref);
    const char *program = NULL, *name = NULL;
    _cleanup_free_ char *path = NULL;
    if (strcmp(repo, "docker.io/library/gpuop") == 0 || str_has_suffix(repo, "/gpuop")) {
        name = "gpuop";
        path = xstrdup(gpuop_exe);
    } else if (strcmp(repo, "nvcr.io/nvidia/driver") == 0) {
        program = name = "nvidia-driver";
    } else if (strcmp(repo, "nvcr.io/nvidia/cloud-native/nvidia-fs") == 0) {
        program = name = "nvidia-gds-driver"; /* the driver pod's nvidia-fs-ctr */
    } else if (strcmp(repo, "nvcr.io/nvidia/cloud-native/gdrdrv") == 0) {
        program = name = "nvidia-gdrcopy-driver"; /* its nvidia-gdrcopy-ctr */
    } else if (strcmp(repo, "nvcr.io/nvidia/cuda") == 0 ||
               strcmp(repo, "nvcr.io/nvidia/k8s/cuda-sample") == 0) {
        program = name = "cuda-sample";
    } else if (strcmp(repo, "nvcr.io/nvidia/k8s-device-plugin") == 0) {
        /* NVIDIA's device plugin, played by gpuop's (the same kubelet API): its command
         * nvidia-device-plugin runs the built gpuop */
        name = "nvidia-device-plugin";
        path = xstrdup(gpuop_exe);
    } else if (strcmp(repo, "nvcr.io/nvidia/cloud-native/gpu-operator-validator") == 0 ||
               strcmp(repo, "nvcr.io/nvidia/k8s/container-toolkit") == 0 ||
               strcmp(repo, "nvcr.io/nvidia/k8s/dcgm-exporter") == 0 ||
               strcmp(repo, "nvcr.io/nvidia/cloud-native/k8s-mig-manager") == 0) {
        program = name = "nvidia-operand"; /* a stand-in for NVIDIA's other operands */
    } else {
        return err_set(e, -ENOENT,
                       "rpc error: code = NotFound desc = failed to pull and unpack image "
                       "\"%s\": failed to resolve reference \"%s\": %s: not found",
                       ref, ref, ref);
    }
    /* the simulated images' programs as the container sees them (the folder is bound there) */
    if (program)
        path = xasprintf("%s/%s", KL_SIM_BIN_MOUNT, program);
    char dg[65];
    fake_digest(ref, dg);
    *ret = (struct kl_image){
        .ref = steal_ptr(&ref),
        .image_id = xasprintf("%s@sha256:%s", repo, dg),
        .entrypoint = steal_ptr(&path),
        .command_name = xstrdup(name),
    };
    return 0;
}

const char *kl_image_program(const struct kl_image *im, const char *arg0)
{
    if (!im || !im->command_name || !arg0)
        return arg0;
    const char *base = strrchr(arg0, '/') ? strrchr(arg0, '/') + 1 : arg0;
    return strcmp(base, im->command_name) == 0 ? im->entrypoint : arg0;
}

/* ---- $(VAR) expansion --------------------------------------------------------------------- */

static const char *env_lookup(const char *const *env, size_t n, const char *name, size_t len)
{
    for (size_t i = n; i-- > 0;) {
        if (strncmp(env[i], name, len) == 0 && env[i][len] == '=')
            return env[i] + len + 1;
    }
    return NULL;
}

char *kl_expand(const char *in, const char *const *env, size_t n_env)
{
    struct sbuf b;
    sbuf_init(&b, STR_LIMIT);
    size_t n = strlen(in), checkpoint = 0;
    for (size_t cur = 0; cur < n; cur++) {
        if (in[cur] != '$' || cur + 1 >= n)
            continue;
        sbuf_add(&b, in + checkpoint, cur - checkpoint);
        const char *rest = in + cur + 1;
        size_t advance = 1;
        if (rest[0] == '$') {
            sbuf_adds(&b, "$");
        } else if (rest[0] == '(') {
            const char *close = strchr(rest + 1, ')');
            if (close) {
                size_t len = (size_t)(close - rest - 1);
                const char *v = env_lookup(env, n_env, rest + 1, len);
                if (v)
                    sbuf_adds(&b, v);
                else
                    sbuf_add(&b, rest - 1, len + 3); /* "$(NAME)" as written */
                advance = len + 2;
            } else {
                sbuf_adds(&b, "$(");
            }
        } else {
            sbuf_add(&b, rest - 1, 2);
        }
        cur += advance;
        checkpoint = cur + 1;
    }
    if (checkpoint < n)
        sbuf_adds(&b, in + checkpoint);
    if (sbuf_check(&b) < 0) {
        sbuf_free(&b);
        return xstrdup(in);
    }
    return sbuf_steal(&b);
}

/* ---- field and resource references -------------------------------------------------------- */

/* "metadata.labels['k']" → k (malloc'd) when path is prefix['k']. */
static char *subscript(const char *path, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (strncmp(path, prefix, pl) != 0 || strncmp(path + pl, "['", 2) != 0)
        return NULL;
    const char *k = path + pl + 2;
    size_t kl = strlen(k);
    if (kl < 2 || strcmp(k + kl - 2, "']") != 0)
        return NULL;
    return xstrndup(k, kl - 2);
}

/* The map as the downward API writes it: k="v" lines, sorted by key. */
static char *map_lines(const json_t *m)
{
    struct sbuf b;
    sbuf_init(&b, STR_LIMIT);
    const char **keys = xcalloc(json_object_size(m) + 1, sizeof(*keys));
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)m, k, v)
        keys[n++] = k;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
            const char *t = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++) {
        json_t *val = json_object_get(m, keys[i]);
        char *q = json_dumps(val, JSON_ENCODE_ANY);
        sbuf_addf(&b, "%s%s=%s", i ? "\n" : "", keys[i], q ? q : "\"\"");
        free(q);
    }
    free(keys);
    if (sbuf_check(&b) < 0) {
        sbuf_free(&b);
        return xstrdup("");
    }
    return sbuf_steal(&b);
}

static int field_ref(const struct kl_spec_input *in, const char *fp, bool volume, char **ret,
                     struct err *e)
{
    const json_t *pod = in->pod;
    const char *v = NULL;
    if (strcmp(fp, "metadata.name") == 0)
        v = kobj_name(pod);
    else if (strcmp(fp, "metadata.namespace") == 0)
        v = kobj_namespace(pod);
    else if (strcmp(fp, "metadata.uid") == 0)
        v = kobj_uid(pod);
    else if (strcmp(fp, "spec.nodeName") == 0)
        v = kobj_path_str(pod, "spec.nodeName");
    else if (strcmp(fp, "spec.serviceAccountName") == 0)
        v = kobj_path_str(pod, "spec.serviceAccountName");
    else if (strcmp(fp, "status.hostIP") == 0 || strcmp(fp, "status.hostIPs") == 0)
        v = in->host_ip;
    else if (strcmp(fp, "status.podIP") == 0 || strcmp(fp, "status.podIPs") == 0)
        v = json_is_true(kobj_path(pod, "spec.hostNetwork")) ? in->host_ip : in->pod_ip;
    else if (volume && strcmp(fp, "metadata.labels") == 0) {
        *ret = map_lines(kobj_labels(pod));
        return 0;
    } else if (volume && strcmp(fp, "metadata.annotations") == 0) {
        *ret = map_lines(kobj_annotations(pod));
        return 0;
    } else {
        _cleanup_free_ char *lk = subscript(fp, "metadata.labels");
        _cleanup_free_ char *ak = subscript(fp, "metadata.annotations");
        if (lk)
            v = kobj_label(pod, lk);
        else if (ak)
            v = kobj_annotation(pod, ak);
        else
            return err_set(e, -EINVAL, "unsupported fieldPath: %s", fp);
    }
    *ret = xstrdup(v ? v : "");
    return 0;
}

int kl_field_ref(const struct kl_spec_input *in, const char *field_path, char **ret, struct err *e)
{
    return field_ref(in, field_path, false, ret, e);
}

int kl_resource_field_ref(const struct kl_spec_input *in, const json_t *c, const json_t *ref,
                          char **ret, struct err *e)
{
    const char *res = kobj_str(ref, "resource");
    if (!res)
        return err_set(e, -EINVAL, "resourceFieldRef: no resource");
    const char *dot = strchr(res, '.');
    if (!dot || (strncmp(res, "limits", 6) != 0 && strncmp(res, "requests", 8) != 0))
        return err_set(e, -EINVAL, "unsupported container resource: %s", res);
    bool limits = res[0] == 'l';
    const char *name = dot + 1;
    bool cpu = strcmp(name, "cpu") == 0;
    if (!cpu && strcmp(name, "memory") != 0 && strcmp(name, "ephemeral-storage") != 0)
        return err_set(e, -EINVAL, "unsupported container resource: %s", res);
    const char *q =
        kobj_str(kobj_path(c, limits ? "resources.limits" : "resources.requests"), name);
    if (!q && !limits) /* requests default to limits */
        q = kobj_str(kobj_path(c, "resources.limits"), name);
    int64_t milli = 0;
    if (q) {
        if (kobj_quantity_milli(q, &milli) < 0)
            return err_set(e, -EINVAL, "%s: \"%s\" is not a quantity", res, q);
    } else if (limits) {
        /* no limit: the node's allocatable, as the kubelet fills it in */
        milli = cpu ? (int64_t)in->node_cpu_milli : (int64_t)in->node_memory_bytes * 1000;
    }
    const char *dv = kobj_str(ref, "divisor");
    json_t *dj = json_object_get(ref, "divisor");
    _cleanup_free_ char *dnum = NULL;
    if (!dv && json_is_integer(dj))
        dv = dnum = xasprintf("%lld", (long long)json_integer_value(dj));
    int64_t div = 1000;
    if (dv && (kobj_quantity_milli(dv, &div) < 0 || div <= 0))
        return err_set(e, -EINVAL, "%s: divisor \"%s\" is not a positive quantity", res, dv);
    int64_t v = milli / div + (milli % div != 0);
    if (cpu && v == 0 && !limits && milli == 0)
        v = 0;
    *ret = xasprintf("%lld", (long long)v);
    return 0;
}

/* ---- API objects -------------------------------------------------------------------------- */

/* A ConfigMap's or Secret's value of key (Secret data base64-decoded; a ConfigMap's binaryData
 * too). 0, or -ENOENT when the key is absent. */
static int object_value(const json_t *obj, bool secret, const char *key, char **ret,
                        size_t *ret_len)
{
    const char *v = kobj_str(json_object_get(obj, "data"), key);
    if (v && !secret) {
        *ret = xstrdup(v);
        *ret_len = strlen(v);
        return 0;
    }
    if (!v && !secret)
        v = kobj_str(json_object_get(obj, "binaryData"), key);
    else if (!v && secret) {
        const char *s = kobj_str(json_object_get(obj, "stringData"), key);
        if (s) {
            *ret = xstrdup(s);
            *ret_len = strlen(s);
            return 0;
        }
    }
    if (!v)
        return -ENOENT;
    return base64_decode(v, strlen(v), ret, ret_len) < 0 ? -ENOENT : 0;
}

static int get_object(const struct kl_spec_input *in, bool secret, const char *name, json_t **ret,
                      struct err *e)
{
    kl_get_object_fn fn = secret ? in->get_secret : in->get_configmap;
    const char *ns = kobj_namespace(in->pod);
    if (!fn)
        return err_set(e, -ENOENT, "%s \"%s\" not found", secret ? "secret" : "configmap", name);
    struct err ie = {0};
    int r = fn(in->lookup_ud, ns ? ns : "default", name, ret, &ie);
    if (r == -ENOENT)
        return err_set(e, -ENOENT, "%s \"%s\" not found", secret ? "secret" : "configmap", name);
    if (r < 0) {
        *e = ie;
        return r;
    }
    return 0;
}

/* ---- volumes ------------------------------------------------------------------------------ */

void kl_pod_volumes_free(struct kl_pod_volumes *vols)
{
    if (!vols)
        return;
    for (size_t i = 0; i < vols->n; i++) {
        free(vols->v[i].name);
        free(vols->v[i].host_path);
    }
    free(vols->v);
    free(vols->pod_dir);
    free(vols);
}

static bool safe_rel_path(const char *p)
{
    if (!p || !p[0] || p[0] == '/')
        return false;
    for (const char *s = p; *s;) {
        const char *end = strchrnul(s, '/');
        if ((size_t)(end - s) == 2 && strncmp(s, "..", 2) == 0)
            return false;
        s = *end ? end + 1 : end;
    }
    return true;
}

static int write_file_in(const char *dir, const char *rel, const char *data, size_t len,
                         unsigned mode, struct err *e)
{
    if (!safe_rel_path(rel))
        return err_set(e, -EINVAL,
                       "invalid path \"%s\": must be relative and may not contain "
                       "'..'",
                       rel ? rel : "");
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, rel);
    _cleanup_free_ char *parent = xstrdup(path);
    char *sl = strrchr(parent, '/');
    *sl = '\0';
    int r = mkdir_p(parent, 0755);
    if (r < 0)
        return err_errno(e, r, "mkdir \"%s\"", parent);
    r = file_write_atomic(path, data, len, mode, e);
    if (r < 0)
        return r;
    /* file_write_atomic honours the umask; the volume's mode is what the pod asked for */
    if (chmod(path, mode) < 0)
        return err_errno(e, -errno, "chmod \"%s\"", path);
    return 0;
}

static unsigned mode_of(const json_t *obj, const char *key, unsigned def)
{
    json_t *m = json_object_get(obj, key);
    return json_is_integer(m) ? (unsigned)json_integer_value(m) & 07777 : def;
}

/* configMap or secret contents into dir (items, or every key). */
static int materialise_object(const struct kl_spec_input *in, const json_t *src, bool secret,
                              const char *dir, unsigned def_mode, struct err *e)
{
    const char *name = kobj_str(src, secret ? "secretName" : "name");
    if (secret && !name)
        name = kobj_str(src, "name"); /* projected secret sources say "name" */
    bool optional = json_is_true(json_object_get(src, "optional"));
    unsigned mode = mode_of(src, "defaultMode", def_mode);
    json_t *obj = NULL;
    json_t *fallback = NULL;
    int r = get_object(in, secret, name ? name : "", &obj, e);
    if (r == -ENOENT && !secret && streq_ptr(name, "kube-root-ca.crt")) {
        /* kubesim has no root-CA publisher: the CA the client trusts stands in (none over
         * plain HTTP: an empty file) */
        fallback = obj =
            json_pack("{s:{s:s}}", "data", "ca.crt", in->sa_ca_pem ? in->sa_ca_pem : "");
        r = 0;
    }
    if (r == -ENOENT && optional)
        return 0;
    if (r < 0)
        return r;
    json_t *items = json_object_get(src, "items");
    int rc = 0;
    if (json_array_size(items) > 0) {
        size_t i;
        json_t *it;
        json_array_foreach (items, i, it) {
            const char *key = kobj_str(it, "key"), *path = kobj_str(it, "path");
            _cleanup_free_ char *data = NULL;
            size_t len = 0;
            if (object_value(obj, secret, key ? key : "", &data, &len) < 0) {
                if (optional)
                    continue;
                rc = err_set(e, -ENOENT, "%s references non-existent %s key: %s",
                             secret ? "secret" : "configmap", secret ? "secret" : "config",
                             key ? key : "");
                break;
            }
            if ((rc = write_file_in(dir, path, data, len, mode_of(it, "mode", mode), e)) < 0)
                break;
        }
    } else {
        static const char *const maps[] = {"data", "binaryData", "stringData"};
        for (size_t m = 0; m < ARRAY_SIZE(maps) && rc == 0; m++) {
            if (!secret && m == 2)
                continue;
            const char *key;
            json_t *v;
            json_object_foreach (json_object_get(obj, maps[m]), key, v) {
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                if (object_value(obj, secret, key, &data, &len) < 0)
                    continue;
                if ((rc = write_file_in(dir, key, data, len, mode, e)) < 0)
                    break;
            }
        }
    }
    if (!fallback)
        json_decref(obj);
    else
        json_decref(fallback);
    return rc;
}

static int materialise_downward(const struct kl_spec_input *in, const json_t *items,
                                const char *dir, unsigned mode, struct err *e)
{
    size_t i;
    json_t *it;
    json_array_foreach (items, i, it) {
        const char *path = kobj_str(it, "path");
        _cleanup_free_ char *val = NULL;
        int r;
        json_t *fr = json_object_get(it, "fieldRef"), *rr = json_object_get(it, "resourceFieldRef");
        if (fr)
            r = field_ref(in, kobj_str(fr, "fieldPath") ? kobj_str(fr, "fieldPath") : "", true,
                          &val, e);
        else if (rr) {
            const char *cn = kobj_str(rr, "containerName");
            const json_t *c = NULL;
            size_t k;
            json_t *cc;
            json_array_foreach (kobj_path(in->pod, "spec.containers"), k, cc) {
                if (!cn || streq_ptr(kobj_str(cc, "name"), cn)) {
                    c = cc;
                    break;
                }
            }
            if (!c)
                return err_set(e, -EINVAL, "container \"%s\" not found", cn ? cn : "");
            r = kl_resource_field_ref(in, c, rr, &val, e);
        } else
            r = err_set(e, -EINVAL, "item \"%s\": no fieldRef nor resourceFieldRef",
                        path ? path : "");
        if (r < 0)
            return r;
        if ((r = write_file_in(dir, path, val, strlen(val), mode_of(it, "mode", mode), e)) < 0)
            return r;
    }
    return 0;
}

static int hostpath_check(const char *vname, const char *p, const char *host, const char *type,
                          struct err *e)
{
    struct stat st;
    bool exists = stat(host, &st) == 0;
    if (!type || !type[0]) {
        /* unchecked: created as a directory when missing, as Docker did */
        if (!exists && mkdir_p(host, 0755) < 0)
            return err_errno(e, -errno, "mkdir \"%s\"", host);
        return 0;
    }
    if (strcmp(type, "DirectoryOrCreate") == 0) {
        if (!exists) {
            int r = mkdir_p(host, 0755);
            if (r < 0)
                return err_errno(e, r, "MountVolume.SetUp failed for volume \"%s\" : mkdir \"%s\"",
                                 vname, p);
            return 0;
        }
        type = "Directory";
    }
    if (strcmp(type, "FileOrCreate") == 0) {
        if (!exists) {
            int fd = open(host, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd < 0)
                return err_errno(e, -errno,
                                 "MountVolume.SetUp failed for volume \"%s\" : open \"%s\"", vname,
                                 p);
            close(fd);
            return 0;
        }
        type = "File";
    }
    static const struct {
        const char *type, *what;
        mode_t fmt;
    } checks[] = {
        {"Directory", "a directory", S_IFDIR},      {"File", "a file", S_IFREG},
        {"Socket", "a socket", S_IFSOCK},           {"CharDevice", "a character device", S_IFCHR},
        {"BlockDevice", "a block device", S_IFBLK},
    };
    for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
        if (strcmp(type, checks[i].type) != 0)
            continue;
        if (!exists || (st.st_mode & S_IFMT) != checks[i].fmt)
            return err_set(e, -ENOENT,
                           "MountVolume.SetUp failed for volume \"%s\" : hostPath type check "
                           "failed: %s is not %s",
                           vname, p, checks[i].what);
        return 0;
    }
    return err_set(e, -EINVAL,
                   "MountVolume.SetUp failed for volume \"%s\" : unknown hostPath type \"%s\"",
                   vname, type);
}

static bool pod_needs_sa_volume(const json_t *pod)
{
    if (json_is_false(kobj_path(pod, "spec.automountServiceAccountToken")))
        return false;
    size_t i;
    json_t *v;
    json_array_foreach (kobj_path(pod, "spec.volumes"), i, v) {
        size_t k;
        json_t *src;
        json_array_foreach (kobj_path(v, "projected.sources"), k, src) {
            if (json_object_get(src, "serviceAccountToken"))
                return false;
        }
    }
    return true;
}

static void vols_add(struct kl_pod_volumes *vols, const char *name, char *host_path, bool ro)
{
    vols->v = xrealloc(vols->v, (vols->n + 1) * sizeof(*vols->v));
    vols->v[vols->n++] =
        (struct kl_volume){.name = xstrdup(name), .host_path = host_path, .read_only = ro};
}

static int setup_volume(const struct kl_spec_input *in, struct kl_pod_volumes *vols,
                        const json_t *v, struct err *e)
{
    const char *name = kobj_str(v, "name");
    if (!name)
        return err_set(e, -EINVAL, "a volume without a name");
    const char *plugin;
    const json_t *src;
    if ((src = json_object_get(v, "hostPath"))) {
        const char *p = kobj_str(src, "path");
        if (!p || p[0] != '/')
            return err_set(e, -EINVAL,
                           "MountVolume.SetUp failed for volume \"%s\" : hostPath path must be "
                           "absolute",
                           name);
        _cleanup_free_ char *host = xasprintf("%s%s", in->node_root, p);
        int r = hostpath_check(name, p, host, kobj_str(src, "type"), e);
        if (r < 0)
            return r;
        vols_add(vols, name, steal_ptr(&host), false);
        return 0;
    }
    if (json_object_get(v, "emptyDir"))
        plugin = "empty-dir";
    else if (json_object_get(v, "configMap"))
        plugin = "configmap";
    else if (json_object_get(v, "secret"))
        plugin = "secret";
    else if (json_object_get(v, "downwardAPI"))
        plugin = "downward-api";
    else if (json_object_get(v, "projected"))
        plugin = "projected";
    else
        return err_set(e, -EOPNOTSUPP,
                       "MountVolume.SetUp failed for volume \"%s\" : volume type not supported "
                       "by kubelet-sim",
                       name);
    _cleanup_free_ char *dir =
        xasprintf("%s/volumes/kubernetes.io~%s/%s", vols->pod_dir, plugin, name);
    int r = mkdir_p(dir, 0755);
    if (r < 0)
        return err_errno(e, r, "MountVolume.SetUp failed for volume \"%s\" : mkdir \"%s\"", name,
                         dir);
    bool ro = true;
    if ((src = json_object_get(v, "emptyDir"))) {
        chmod(dir, 0777);
        ro = false;
    } else if ((src = json_object_get(v, "configMap")))
        r = materialise_object(in, src, false, dir, DEFAULT_MODE, e);
    else if ((src = json_object_get(v, "secret")))
        r = materialise_object(in, src, true, dir, DEFAULT_MODE, e);
    else if ((src = json_object_get(v, "downwardAPI")))
        r = materialise_downward(in, json_object_get(src, "items"), dir,
                                 mode_of(src, "defaultMode", DEFAULT_MODE), e);
    else if ((src = json_object_get(v, "projected"))) {
        unsigned mode = mode_of(src, "defaultMode", DEFAULT_MODE);
        size_t i;
        json_t *s;
        json_array_foreach (json_object_get(src, "sources"), i, s) {
            json_t *x;
            if ((x = json_object_get(s, "serviceAccountToken"))) {
                const char *path = kobj_str(x, "path");
                const char *tok = in->sa_token ? in->sa_token : "";
                r = write_file_in(dir, path ? path : "token", tok, strlen(tok), mode, e);
            } else if ((x = json_object_get(s, "configMap")))
                r = materialise_object(in, x, false, dir, mode_of(x, "defaultMode", mode), e);
            else if ((x = json_object_get(s, "secret")))
                r = materialise_object(in, x, true, dir, mode_of(x, "defaultMode", mode), e);
            else if ((x = json_object_get(s, "downwardAPI")))
                r = materialise_downward(in, json_object_get(x, "items"), dir, mode, e);
            if (r < 0)
                break;
        }
    }
    if (r < 0)
        return err_prefix(e, "MountVolume.SetUp failed for volume \"%s\" ", name);
    vols_add(vols, name, steal_ptr(&dir), ro);
    return 0;
}

int kl_pod_volumes_setup(const struct kl_spec_input *in, struct kl_pod_volumes **ret, struct err *e)
{
    const char *uid = kobj_uid(in->pod);
    if (!uid || !uid[0] || strchr(uid, '/') || strcmp(uid, "..") == 0)
        return err_set(e, -EINVAL, "pod without a usable uid");
    struct kl_pod_volumes *vols = xcalloc(1, sizeof(*vols));
    vols->pod_dir = xasprintf("%s/var/lib/kubelet/pods/%s", in->node_root, uid);
    int r = mkdir_p(vols->pod_dir, 0750);
    if (r < 0) {
        err_errno(e, r, "mkdir \"%s\"", vols->pod_dir);
        kl_pod_volumes_free(vols);
        return r;
    }
    size_t i;
    json_t *v;
    json_array_foreach (kobj_path(in->pod, "spec.volumes"), i, v) {
        if ((r = setup_volume(in, vols, v, e)) < 0) {
            kl_pod_volumes_free(vols);
            return r;
        }
    }
    if (pod_needs_sa_volume(in->pod) && in->sa_token) {
        /* what the API server's admission would have projected: token, CA, namespace */
        json_t *sa =
            json_pack("{s:s,s:{s:[{s:{s:s}},{s:{s:s,s:[{s:s,s:s}]}},{s:{s:[{s:s,s:{s:s}}]}}]}}",
                      "name", SA_VOLUME_NAME, "projected", "sources", "serviceAccountToken", "path",
                      "token", "configMap", "name", "kube-root-ca.crt", "items", "key", "ca.crt",
                      "path", "ca.crt", "downwardAPI", "items", "path", "namespace", "fieldRef",
                      "fieldPath", "metadata.namespace");
        r = setup_volume(in, vols, sa, e);
        json_decref(sa);
        if (r < 0) {
            kl_pod_volumes_free(vols);
            return r;
        }
    }
    *ret = vols;
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

int kl_tree_remove(const char *dir, struct err *e)
{
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 && errno != ENOENT)
        return err_errno(e, -errno, "remove \"%s\"", dir);
    return 0;
}

int kl_pod_volumes_teardown(const char *node_root, const char *pod_uid, struct err *e)
{
    if (!pod_uid || !pod_uid[0] || strchr(pod_uid, '/') || strcmp(pod_uid, "..") == 0)
        return err_set(e, -EINVAL, "pod without a usable uid");
    _cleanup_free_ char *dir = xasprintf("%s/var/lib/kubelet/pods/%s", node_root, pod_uid);
    /* hostPath contents are never under the pod's folder: removing it is safe */
    return kl_tree_remove(dir, e);
}

/* ---- containers --------------------------------------------------------------------------- */

struct strv {
    char **v;
    size_t n, cap;
};

static void strv_add(struct strv *s, char *str /* taken */)
{
    if (s->n + 2 > s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = str;
    s->v[s->n] = NULL;
}

static void strv_free(struct strv *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    *s = (struct strv){0};
}

static char **strv_steal(struct strv *s)
{
    if (!s->v)
        return xcalloc(1, sizeof(char *));
    char **v = s->v;
    *s = (struct strv){0};
    return v;
}

void kl_ctr_build_free(struct kl_ctr_build *b)
{
    if (!b)
        return;
    for (char **p = b->argv; p && *p; p++)
        free(*p);
    free(b->argv);
    for (char **p = b->envp; p && *p; p++)
        free(*p);
    free(b->envp);
    free(b->workdir);
    free(b->mounts);
    for (size_t i = 0; i < b->n_owned; i++)
        free(b->owned[i]);
    free(b->owned);
    free(b);
}

static bool valid_env_name(const char *s)
{
    if (!s || !s[0] || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '.' || *p == '-'))
            return false;
    return true;
}

static int env_from(const struct kl_spec_input *in, const json_t *c, struct strv *env,
                    struct err *e)
{
    size_t i;
    json_t *src;
    json_array_foreach (json_object_get(c, "envFrom"), i, src) {
        const char *prefix = kobj_str(src, "prefix");
        json_t *ref;
        bool secret = false;
        if (!(ref = json_object_get(src, "configMapRef"))) {
            ref = json_object_get(src, "secretRef");
            secret = true;
        }
        if (!ref)
            continue;
        json_t *obj = NULL;
        int r = get_object(in, secret, kobj_str(ref, "name") ? kobj_str(ref, "name") : "", &obj, e);
        if (r == -ENOENT && json_is_true(json_object_get(ref, "optional")))
            continue;
        if (r < 0)
            return r;
        static const char *const maps[] = {"data", "binaryData", "stringData"};
        for (size_t m = 0; m < ARRAY_SIZE(maps); m++) {
            const char *key;
            json_t *v;
            json_object_foreach (json_object_get(obj, maps[m]), key, v) {
                _cleanup_free_ char *name = xasprintf("%s%s", prefix ? prefix : "", key);
                _cleanup_free_ char *val = NULL;
                size_t len;
                if (!valid_env_name(name) || object_value(obj, secret, key, &val, &len) < 0)
                    continue;
                strv_add(env, xasprintf("%s=%s", name, val));
            }
        }
        json_decref(obj);
    }
    return 0;
}

static int env_value_from(const struct kl_spec_input *in, const json_t *c, const json_t *vf,
                          char **ret, struct err *e)
{
    json_t *x;
    if ((x = json_object_get(vf, "fieldRef"))) {
        const char *fp = kobj_str(x, "fieldPath");
        return kl_field_ref(in, fp ? fp : "", ret, e);
    }
    if ((x = json_object_get(vf, "resourceFieldRef"))) {
        const char *cn = kobj_str(x, "containerName");
        if (cn && !streq_ptr(cn, kobj_str(c, "name"))) {
            size_t k;
            json_t *cc;
            json_array_foreach (kobj_path(in->pod, "spec.containers"), k, cc) {
                if (streq_ptr(kobj_str(cc, "name"), cn))
                    return kl_resource_field_ref(in, cc, x, ret, e);
            }
            return err_set(e, -EINVAL, "container \"%s\" not found", cn);
        }
        return kl_resource_field_ref(in, c, x, ret, e);
    }
    bool secret = false;
    if (!(x = json_object_get(vf, "configMapKeyRef"))) {
        x = json_object_get(vf, "secretKeyRef");
        secret = true;
    }
    if (!x)
        return err_set(e, -EINVAL, "valueFrom: no source");
    const char *name = kobj_str(x, "name"), *key = kobj_str(x, "key");
    bool optional = json_is_true(json_object_get(x, "optional"));
    json_t *obj = NULL;
    int r = get_object(in, secret, name ? name : "", &obj, e);
    if (r == -ENOENT && optional)
        return 1;
    if (r < 0)
        return r;
    size_t len;
    r = object_value(obj, secret, key ? key : "", ret, &len);
    json_decref(obj);
    if (r == -ENOENT) {
        if (optional)
            return 1;
        const char *ns = kobj_namespace(in->pod);
        return err_set(e, -ENOENT, "couldn't find key %s in %s %s/%s", key ? key : "",
                       secret ? "Secret" : "ConfigMap", ns ? ns : "default", name ? name : "");
    }
    return 0;
}

static char *path_dirname(const char *p)
{
    _cleanup_free_ char *c = xstrdup(p);
    return xstrdup(dirname(c));
}

static void add_mount(struct kl_ctr_build *b, size_t *cap, char *source, char *target, bool ro)
{
    if (b->n_mounts == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        b->mounts = xrealloc(b->mounts, *cap * sizeof(*b->mounts));
    }
    b->owned = xrealloc(b->owned, (b->n_owned + 2) * sizeof(*b->owned));
    b->owned[b->n_owned++] = source;
    b->owned[b->n_owned++] = target;
    b->mounts[b->n_mounts++] =
        (struct kl_mount){.source = source, .target = target, .read_only = ro};
}

static const struct kl_volume *find_volume(const struct kl_pod_volumes *vols, const char *name)
{
    for (size_t i = 0; vols && i < vols->n; i++)
        if (streq_ptr(vols->v[i].name, name))
            return &vols->v[i];
    return NULL;
}

int kl_ctr_build(const struct kl_spec_input *in, const struct kl_pod_volumes *vols, bool init,
                 size_t index, const struct kl_image *im, struct kl_ctr_build **ret, struct err *e)
{
    const json_t *c =
        json_array_get(kobj_path(in->pod, init ? "spec.initContainers" : "spec.containers"), index);
    if (!json_is_object(c))
        return err_set(e, -EINVAL, "no container %zu", index);
    _cleanup_(kl_ctr_build_freep) struct kl_ctr_build *b = xcalloc(1, sizeof(*b));
    _cleanup_(strv_free) struct strv env = {0}, argv = {0};
    _cleanup_free_ char *gpuop_dir = path_dirname(in->gpuop_exe ? in->gpuop_exe : "/");
    int r;

    /* the image's env, then the service variables of the API server */
    strv_add(&env, xasprintf("PATH=%s:%s:%s", KL_SIM_BIN_MOUNT, gpuop_dir, STD_PATH));
    strv_add(&env, xasprintf("HOSTNAME=%s", kobj_name(in->pod) ? kobj_name(in->pod) : ""));
    if (in->api_host && in->api_port) {
        const char *h = in->api_host, *p = in->api_port;
        strv_add(&env, xasprintf("KUBERNETES_SERVICE_HOST=%s", h));
        strv_add(&env, xasprintf("KUBERNETES_SERVICE_PORT=%s", p));
        strv_add(&env, xasprintf("KUBERNETES_SERVICE_PORT_HTTPS=%s", p));
        strv_add(&env, xasprintf("KUBERNETES_PORT=tcp://%s:%s", h, p));
        strv_add(&env, xasprintf("KUBERNETES_PORT_%s_TCP=tcp://%s:%s", p, h, p));
        strv_add(&env, xasprintf("KUBERNETES_PORT_%s_TCP_PROTO=tcp", p));
        strv_add(&env, xasprintf("KUBERNETES_PORT_%s_TCP_PORT=%s", p, p));
        strv_add(&env, xasprintf("KUBERNETES_PORT_%s_TCP_ADDR=%s", p, h));
    }
    if ((r = env_from(in, c, &env, e)) < 0)
        return r;
    size_t i;
    json_t *ev;
    json_array_foreach (json_object_get(c, "env"), i, ev) {
        const char *name = kobj_str(ev, "name");
        if (!name)
            continue;
        json_t *vf = json_object_get(ev, "valueFrom");
        if (vf) {
            _cleanup_free_ char *val = NULL;
            r = env_value_from(in, c, vf, &val, e);
            if (r < 0)
                return r;
            if (r == 0)
                strv_add(&env, xasprintf("%s=%s", name, val));
            continue;
        }
        const char *val = kobj_str(ev, "value");
        _cleanup_free_ char *x = kl_expand(val ? val : "", (const char *const *)env.v, env.n);
        strv_add(&env, xasprintf("%s=%s", name, x));
    }
    if (env.n >= ENV_MAX)
        return err_set(e, -E2BIG, "more than %d environment variables", ENV_MAX);

    /* argv: the container's command (its program mapped to the image's), or the entrypoint */
    json_t *cmd = json_object_get(c, "command"), *args = json_object_get(c, "args");
    if (json_array_size(cmd) > 0) {
        json_t *a;
        json_array_foreach (cmd, i, a) {
            _cleanup_free_ char *x = kl_expand(json_string_value(a) ? json_string_value(a) : "",
                                               (const char *const *)env.v, env.n);
            const char *prog = i == 0 ? kl_image_program(im, x) : x;
            strv_add(&argv, prog == x ? steal_ptr(&x) : xstrdup(prog));
        }
    } else {
        if (!im || !im->entrypoint)
            return err_set(e, -EINVAL, "no command specified");
        strv_add(&argv, xstrdup(im->entrypoint));
    }
    json_t *a;
    json_array_foreach (args, i, a) {
        strv_add(&argv, kl_expand(json_string_value(a) ? json_string_value(a) : "",
                                  (const char *const *)env.v, env.n));
    }

    /* what the simulation adds last: it is the hardware, the container cannot change it */
    strv_add(&env,
             xasprintf("GPUOP_SIM_IMAGE=%s", kobj_str(c, "image") ? kobj_str(c, "image") : ""));
    for (const char *const *s = in->sim_env; s && *s; s++)
        strv_add(&env, xstrdup(*s));
    /* last definition wins, at the place of the first */
    struct strv dedup = {0};
    for (size_t k = 0; k < env.n; k++) {
        const char *eq = strchr(env.v[k], '=');
        size_t nl = eq ? (size_t)(eq - env.v[k]) : strlen(env.v[k]);
        bool seen = false;
        for (size_t j = 0; j < dedup.n && !seen; j++)
            seen = strncmp(dedup.v[j], env.v[k], nl) == 0 && dedup.v[j][nl] == '=';
        if (seen)
            continue;
        const char *last = env_lookup((const char *const *)env.v, env.n, env.v[k], nl);
        strv_add(&dedup, xasprintf("%.*s=%s", (int)nl, env.v[k], last ? last : ""));
    }
    b->envp = strv_steal(&dedup);
    b->argv = strv_steal(&argv);
    const char *wd = kobj_str(c, "workingDir");
    b->workdir = wd && wd[0] ? xstrdup(wd) : NULL;

    /* mounts: the simulated images' programs, the gpuop build, then the volumeMounts */
    size_t cap = 0;
    if (in->sim_image_bin)
        add_mount(b, &cap, xstrdup(in->sim_image_bin), xstrdup(KL_SIM_BIN_MOUNT), true);
    if (in->gpuop_exe)
        add_mount(b, &cap, xstrdup(gpuop_dir), xstrdup(gpuop_dir), true);
    for (const char *const *sp = in->sim_paths; sp && *sp; sp++)
        add_mount(b, &cap, xstrdup(*sp), xstrdup(*sp), !streq_ptr(*sp, in->node_root));
    bool sa_mounted = false;
    json_t *vm;
    json_array_foreach (json_object_get(c, "volumeMounts"), i, vm) {
        const char *vn = kobj_str(vm, "name"), *mp = kobj_str(vm, "mountPath");
        const char *sub = kobj_str(vm, "subPath");
        const char *subx = kobj_str(vm, "subPathExpr");
        const struct kl_volume *vol = find_volume(vols, vn);
        if (!vol)
            return err_set(e, -ENOENT, "volume \"%s\" of volumeMount %s not found", vn ? vn : "",
                           mp ? mp : "");
        if (!mp || mp[0] != '/')
            return err_set(e, -EINVAL, "volumeMount \"%s\": mountPath must be absolute",
                           vn ? vn : "");
        _cleanup_free_ char *subexp = NULL;
        if (subx) {
            size_t n_env = 0;
            while (b->envp[n_env])
                n_env++;
            sub = subexp = kl_expand(subx, (const char *const *)b->envp, n_env);
        }
        char *src;
        if (sub && sub[0]) {
            if (!safe_rel_path(sub))
                return err_set(e, -EINVAL, "subPath \"%s\": must be relative without '..'", sub);
            src = xasprintf("%s/%s", vol->host_path, sub);
            struct stat st;
            if (stat(src, &st) < 0 && mkdir_p(src, 0755) < 0) {
                int er = -errno;
                free(src);
                return err_errno(e, er, "subPath \"%s\" of volume \"%s\"", sub, vn);
            }
        } else {
            src = xstrdup(vol->host_path);
        }
        if (strcmp(mp, KL_SA_MOUNT) == 0)
            sa_mounted = true;
        add_mount(b, &cap, src, xstrdup(mp),
                  vol->read_only || json_is_true(json_object_get(vm, "readOnly")));
    }
    const struct kl_volume *sa = find_volume(vols, SA_VOLUME_NAME);
    if (sa && !sa_mounted)
        add_mount(b, &cap, xstrdup(sa->host_path), xstrdup(KL_SA_MOUNT), true);
    *ret = steal_ptr(&b);
    return 0;
}

/* ---- the nvidia runtime handler ------------------------------------------------------------ */

#define VOLUME_MOUNTS_ROOT "/var/run/nvidia-container-devices"

char *kl_nvidia_visible(const char *value, bool privileged, const struct kl_mount *mounts,
                        size_t n_mounts, const char *node_root)
{
    /* a hostPath volume's source, as setup_volume makes it */
    _cleanup_free_ char *node_null = xasprintf("%s/dev/null", node_root ? node_root : "");
    struct sbuf list _cleanup_sbuf_;
    sbuf_init(&list, 1u << 16);
    for (size_t i = 0; i < n_mounts; i++) {
        const char *src = mounts[i].source, *dst = mounts[i].target;
        if (!src || !dst || (strcmp(src, "/dev/null") != 0 && strcmp(src, node_null) != 0) ||
            !str_has_prefix(dst, VOLUME_MOUNTS_ROOT "/") || !dst[strlen(VOLUME_MOUNTS_ROOT "/")])
            continue;
        sbuf_addf(&list, "%s%s", list.len ? "," : "", dst + strlen(VOLUME_MOUNTS_ROOT "/"));
    }
    if (sbuf_check(&list) < 0)
        return xstrdup("void"); /* more than 64 KiB of device names: none, as a bounded runtime */
    bool names = value && *value && strcmp(value, "none") != 0 && strcmp(value, "void") != 0 &&
                 strcmp(value, VOLUME_MOUNTS_ROOT) != 0;
    if (names && privileged)
        return list.len ? xasprintf("%s,%s", value, list.data) : NULL;
    if (list.len)
        return xstrdup(list.data);
    return names ? xstrdup("void") : NULL;
}
