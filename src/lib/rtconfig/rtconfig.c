/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rtconfig's shell: detection, the file I/O around the pure editing cores (rtconfig-containerd.c,
 * rtconfig-crio.c, rtconfig-docker.c), backups, restore, the reload request and the check.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <jansson.h>

#include "rtconfig-internal.h"
#include "tomlx.h"

/* ---- names ------------------------------------------------------------------------------- */

const char *rtconfig_kind_name(enum rtconfig_kind k)
{
    switch (k) {
    case RTCONFIG_CONTAINERD:
        return "containerd";
    case RTCONFIG_CRIO:
        return "cri-o";
    case RTCONFIG_DOCKER:
        return "docker";
    }
    return "unknown";
}

int rtconfig_kind_parse(const char *s, enum rtconfig_kind *ret)
{
    if (!s)
        return -EINVAL;
    /* A containerRuntimeVersion: "containerd://1.7.24", "cri-o://1.30.4", "docker://24.0.7". */
    const char *sep = strstr(s, "://");
    size_t n = sep ? (size_t)(sep - s) : strlen(s);
    static const struct {
        const char *name;
        enum rtconfig_kind k;
    } names[] = {{"containerd", RTCONFIG_CONTAINERD},
                 {"cri-o", RTCONFIG_CRIO},
                 {"crio", RTCONFIG_CRIO},
                 {"docker", RTCONFIG_DOCKER}};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (strlen(names[i].name) == n && strncmp(s, names[i].name, n) == 0) {
            *ret = names[i].k;
            return 0;
        }
    return -EINVAL;
}

const char *rtconfig_restart_mode_name(enum rtconfig_restart_mode m)
{
    switch (m) {
    case RTCONFIG_RESTART_NONE:
        return "none";
    case RTCONFIG_RESTART_SIGNAL:
        return "signal";
    case RTCONFIG_RESTART_SYSTEMD:
        return "systemd";
    }
    return "unknown";
}

int rtconfig_restart_mode_parse(const char *s, enum rtconfig_restart_mode *ret)
{
    for (int m = RTCONFIG_RESTART_NONE; m <= RTCONFIG_RESTART_SYSTEMD; m++)
        if (s && strcmp(s, rtconfig_restart_mode_name((enum rtconfig_restart_mode)m)) == 0) {
            *ret = (enum rtconfig_restart_mode)m;
            return 0;
        }
    return -EINVAL;
}

const char *rtconfig_config_path(enum rtconfig_kind k, const struct rtconfig_options *o)
{
    if (o && o->config_path)
        return o->config_path;
    switch (k) {
    case RTCONFIG_CONTAINERD:
        return RTCONFIG_CONTAINERD_CONFIG;
    case RTCONFIG_CRIO:
        return RTCONFIG_CRIO_CONFIG;
    case RTCONFIG_DOCKER:
        return RTCONFIG_DOCKER_CONFIG;
    }
    return RTCONFIG_CONTAINERD_CONFIG;
}

const char *rtconfig_dropin_path(enum rtconfig_kind k, const struct rtconfig_options *o)
{
    if (k == RTCONFIG_DOCKER)
        return NULL;
    if (o && o->dropin_path)
        return o->dropin_path;
    return k == RTCONFIG_CONTAINERD ? RTCONFIG_CONTAINERD_DROPIN : RTCONFIG_CRIO_DROPIN;
}

/* ---- paths and files --------------------------------------------------------------------- */

static char *under(const char *root, const char *path)
{
    if (!root || !*root || strcmp(root, "/") == 0)
        return xstrdup(path);
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    return xasprintf("%.*s%s%s", (int)n, root, path[0] == '/' ? "" : "/", path);
}

/* Reads path; a missing file is *ret = NULL and 0. */
static int read_opt(const char *path, char **ret, size_t *ret_len, struct err *e)
{
    *ret = NULL;
    *ret_len = 0;
    int r = file_read_all(path, RTCONFIG_CONFIG_MAX, ret, ret_len, e);
    if (r == -ENOENT) {
        err_clear(e);
        return 0;
    }
    return r;
}

static char *backup_name(const char *root, const struct rtconfig_options *o, const char *path,
                         const char *suffix)
{
    _cleanup_free_ char *flat = xstrdup(path[0] == '/' ? path + 1 : path);
    for (char *p = flat; *p; p++)
        if (*p == '/')
            *p = '_';
    _cleanup_free_ char *dir = under(root, o->state_dir ? o->state_dir : RTCONFIG_STATE_DIR);
    return xasprintf("%s/%s.%s", dir, flat, suffix);
}

struct rtconfig_write {
    const char *path; /* host path */
    struct sbuf text;
};

/* Writes content to host path (under root) unless it is there already; the first time a file
 * is touched its original is kept (or its absence recorded). */
static int write_one(const char *root, const struct rtconfig_options *o, const char *path,
                     const char *data, size_t len, bool *changed, struct err *e)
{
    _cleanup_free_ char *full = under(root, path);
    _cleanup_free_ char *cur = NULL;
    size_t cur_len;
    int r = read_opt(full, &cur, &cur_len, e);
    if (r < 0)
        return r;
    if (cur && cur_len == len && memcmp(cur, data, len) == 0)
        return 0;

    _cleanup_free_ char *orig = backup_name(root, o, path, "orig");
    _cleanup_free_ char *absent = backup_name(root, o, path, "absent");
    if (access(orig, F_OK) != 0 && access(absent, F_OK) != 0) {
        _cleanup_free_ char *dir = xstrdup(orig);
        *strrchr(dir, '/') = '\0';
        r = mkdir_p(dir, 0700);
        if (r < 0)
            return err_errno(e, r, "create \"%s\"", dir);
        r = cur ? file_write_atomic(orig, cur, cur_len, 0600, e)
                : file_write_atomic(absent, "", 0, 0600, e);
        if (r < 0)
            return err_prefix(e, "back up \"%s\"", full);
    }
    unsigned mode = 0644;
    struct stat st;
    if (cur && stat(full, &st) == 0)
        mode = st.st_mode & 07777;
    _cleanup_free_ char *dir = xstrdup(full);
    *strrchr(dir, '/') = '\0';
    r = mkdir_p(dir, 0755);
    if (r < 0)
        return err_errno(e, r, "create \"%s\"", dir);
    r = file_write_atomic(full, data, len, mode, e);
    if (r < 0)
        return r;
    *changed = true;
    return 0;
}

static int restore_one(const char *root, const struct rtconfig_options *o, const char *path,
                       bool *changed, struct err *e)
{
    _cleanup_free_ char *full = under(root, path);
    _cleanup_free_ char *orig = backup_name(root, o, path, "orig");
    _cleanup_free_ char *absent = backup_name(root, o, path, "absent");
    _cleanup_free_ char *data = NULL;
    size_t len;
    int r = read_opt(orig, &data, &len, e);
    if (r < 0)
        return r;
    if (data) {
        _cleanup_free_ char *cur = NULL;
        size_t cur_len;
        r = read_opt(full, &cur, &cur_len, e);
        if (r < 0)
            return r;
        if (!cur || cur_len != len || memcmp(cur, data, len) != 0) {
            struct stat st;
            unsigned mode = cur && stat(full, &st) == 0 ? st.st_mode & 07777 : 0644;
            r = file_write_atomic(full, data, len, mode, e);
            if (r < 0)
                return r;
            *changed = true;
        }
        if (unlink(orig) < 0 && errno != ENOENT)
            return err_errno(e, -errno, "remove \"%s\"", orig);
        return 0;
    }
    if (access(absent, F_OK) == 0) {
        if (unlink(full) == 0)
            *changed = true;
        else if (errno != ENOENT)
            return err_errno(e, -errno, "remove \"%s\"", full);
        if (unlink(absent) < 0 && errno != ENOENT)
            return err_errno(e, -errno, "remove \"%s\"", absent);
    }
    return 0;
}

/* ---- detection ---------------------------------------------------------------------------- */

static bool exists_under(const char *root, const char *path)
{
    _cleanup_free_ char *full = under(root, path);
    return access(full, F_OK) == 0;
}

static const char *const sockets[][3] = {
    [RTCONFIG_CONTAINERD] = {"/run/containerd/containerd.sock",
                             "/var/run/containerd/containerd.sock"},
    [RTCONFIG_CRIO] = {"/run/crio/crio.sock", "/var/run/crio/crio.sock"},
    [RTCONFIG_DOCKER] = {"/run/docker.sock", "/var/run/docker.sock"},
};
static const char *const configs[][3] = {
    [RTCONFIG_CONTAINERD] = {RTCONFIG_CONTAINERD_CONFIG},
    [RTCONFIG_CRIO] = {RTCONFIG_CRIO_CONFIG, "/etc/crio/crio.conf.d"},
    [RTCONFIG_DOCKER] = {RTCONFIG_DOCKER_CONFIG},
};

int rtconfig_detect(const char *host_root, const char *node_runtime_version, const char *want,
                    enum rtconfig_kind *ret, struct err *e)
{
    enum rtconfig_kind w = RTCONFIG_CONTAINERD, k = RTCONFIG_CONTAINERD;
    if (want && rtconfig_kind_parse(want, &w) < 0)
        return err_set(e, -EINVAL,
                       "unknown container runtime \"%s\" (the policy's default "
                       "runtime): want containerd, cri-o or docker",
                       want);
    if (node_runtime_version && *node_runtime_version) {
        if (rtconfig_kind_parse(node_runtime_version, &k) < 0)
            return err_set(e, -EINVAL,
                           "unknown container runtime \"%s\" (the node's "
                           "containerRuntimeVersion): want containerd, cri-o or docker",
                           node_runtime_version);
    } else {
        /* Sockets first (what runs), then config files (what is installed). */
        bool found[3] = {0};
        int nfound = 0;
        for (int pass = 0; pass < 2 && nfound == 0; pass++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                    const char *p = pass == 0 ? sockets[i][j] : configs[i][j];
                    if (p && !found[i] && exists_under(host_root, p)) {
                        found[i] = true;
                        nfound++;
                    }
                }
        if (nfound == 0)
            return err_set(e, -ENOENT,
                           "no container runtime found under \"%s\" (no containerd, "
                           "CRI-O or docker socket or config)",
                           host_root ? host_root : "/");
        if (want && found[w]) {
            k = w;
        } else if (nfound > 1) {
            return err_set(e, -EINVAL,
                           "more than one container runtime under \"%s\" (%s%s%s) "
                           "and the node does not say which it uses",
                           host_root ? host_root : "/", found[0] ? "containerd " : "",
                           found[1] ? "cri-o " : "", found[2] ? "docker" : "");
        } else {
            k = found[0] ? RTCONFIG_CONTAINERD : found[1] ? RTCONFIG_CRIO : RTCONFIG_DOCKER;
        }
    }
    if (want && k != w)
        return err_set(
            e, -EINVAL,
            "the node runs %s%s%s%s but the policy's default runtime is "
            "%s: not configuring %s for GPUs",
            rtconfig_kind_name(k), node_runtime_version ? " (containerRuntimeVersion " : "",
            node_runtime_version ? node_runtime_version : "", node_runtime_version ? ")" : "",
            rtconfig_kind_name(w), rtconfig_kind_name(k));
    *ret = k;
    return 0;
}

/* ---- reload ------------------------------------------------------------------------------- */

static int peer_pid(const char *path, pid_t *ret)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strlcpy_s(sa.sun_path, path, sizeof(sa.sun_path));
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    struct ucred cr;
    socklen_t n = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &n) < 0)
        return -errno;
    if (cr.pid <= 0)
        return -ESRCH;
    *ret = cr.pid;
    return 0;
}

static int run_systemctl(const char *unit)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        execlp("systemctl", "systemctl", "restart", unit, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -errno;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* Tells the runtime to load its config, as o->restart_mode says, and records the request. */
int rtconfig_reload(const char *root, enum rtconfig_kind k, const struct rtconfig_options *o,
                    const char *why, struct err *e)
{
    static const char *const units[] = {[RTCONFIG_CONTAINERD] = "containerd",
                                        [RTCONFIG_CRIO] = "crio",
                                        [RTCONFIG_DOCKER] = "docker"};
    int r = 0;
    char result[160] = "recorded";
    if (o->restart_mode == RTCONFIG_RESTART_SIGNAL) {
        pid_t pid = 0;
        r = -ENOENT;
        for (int j = 0; j < 2 && r < 0; j++) {
            _cleanup_free_ char *sock = under(root, sockets[k][j]);
            r = peer_pid(sock, &pid);
        }
        if (r == 0 && kill(pid, SIGHUP) < 0)
            r = -errno;
        if (r == 0)
            snprintf(result, sizeof(result), "sighup pid=%d", (int)pid);
        else
            snprintf(result, sizeof(result), "failed error=\"%s\"", strerror(-r));
    } else if (o->restart_mode == RTCONFIG_RESTART_SYSTEMD) {
        r = run_systemctl(units[k]);
        snprintf(result, sizeof(result), r == 0 ? "restarted unit=%s" : "failed unit=%s", units[k]);
    }
    _cleanup_free_ char *dir = under(root, o->state_dir ? o->state_dir : RTCONFIG_STATE_DIR);
    _cleanup_free_ char *log = xasprintf("%s/reload.log", dir);
    char ts[40];
    time_rfc3339(now_ms_real(), ts, sizeof(ts));
    if (mkdir_p(dir, 0755) == 0) {
        _cleanup_close_ int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0)
            dprintf(fd, "%s runtime=%s action=%s mode=%s result=%s\n", ts, rtconfig_kind_name(k),
                    why, rtconfig_restart_mode_name(o->restart_mode), result);
    }
    if (r < 0)
        return err_errno(e, r, "tell %s to reload (%s)", rtconfig_kind_name(k),
                         rtconfig_restart_mode_name(o->restart_mode));
    return 0;
}

/* ---- configure, restore ------------------------------------------------------------------- */

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* CRI-O's drop-in dir: regular, visible files in name order, ours left out. */
static int crio_dropins(const char *root, const struct rtconfig_options *o, char ***ret,
                        size_t *ret_n, struct err *e)
{
    const char *ours = rtconfig_dropin_path(RTCONFIG_CRIO, o);
    _cleanup_free_ char *ddir = xstrdup(ours);
    *strrchr(ddir, '/') = '\0';
    _cleanup_free_ char *full = under(root, ddir);
    *ret = NULL;
    *ret_n = 0;
    _cleanup_(closedirp) DIR *d = opendir(full);
    if (!d)
        return errno == ENOENT ? 0 : err_errno(e, -errno, "open \"%s\"", full);
    char **v = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || n >= 256)
            continue;
        char *p = xasprintf("%s/%s", ddir, de->d_name);
        if (strcmp(p, ours) == 0) {
            free(p);
            continue;
        }
        v = xrealloc(v, (n + 1) * sizeof(char *));
        v[n++] = p;
    }
    if (n)
        qsort(v, n, sizeof(char *), name_cmp);
    *ret = v;
    *ret_n = n;
    return 0;
}

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* The config files of k in force, read (NULL data for one that does not exist). */
struct rtconfig_inputs {
    char *paths[258];
    char *data[258];
    struct rtconfig_text text[258];
    size_t n;
};

static void inputs_free(struct rtconfig_inputs *in)
{
    for (size_t i = 0; i < in->n; i++) {
        free(in->paths[i]);
        free(in->data[i]);
    }
    in->n = 0;
}

static int inputs_add(const char *root, struct rtconfig_inputs *in, const char *path, struct err *e)
{
    if (in->n >= ARRAY_SIZE(in->paths))
        return err_set(e, -E2BIG, "too many config files");
    _cleanup_free_ char *full = under(root, path);
    size_t len;
    int r = read_opt(full, &in->data[in->n], &len, e);
    if (r < 0)
        return r;
    in->paths[in->n] = xstrdup(full);
    in->text[in->n] = (struct rtconfig_text){in->data[in->n], len};
    in->n++;
    return 0;
}

int rtconfig_prepare(enum rtconfig_kind k, struct err *e)
{
    return k == RTCONFIG_DOCKER ? 0 : tomlx_open(e);
}

int rtconfig_configure(const char *host_root, enum rtconfig_kind k,
                       const struct rtconfig_options *o, bool *ret_changed, struct err *e)
{
    struct rtconfig_inputs in = {0};
    struct sbuf out[2];
    const char *out_path[2] = {NULL, NULL};
    sbuf_init(&out[0], RTCONFIG_CONFIG_MAX);
    sbuf_init(&out[1], RTCONFIG_CONFIG_MAX);
    int r;
    const char *cfg = rtconfig_config_path(k, o);

    if (!o || !o->runtime_name || !o->runtime_path || !*o->runtime_name || !*o->runtime_path) {
        r = err_set(e, -EINVAL, "the runtime handler's name and path are required");
        goto out;
    }
    if (k == RTCONFIG_CONTAINERD) {
        r = inputs_add(host_root, &in, cfg, e);
        if (r == 0)
            r = rtconfig_containerd_edit(in.text[0], o, &out[0], &out[1], e);
        if (r < 0) {
            err_prefix(e, "%s", in.n ? in.paths[0] : cfg);
            goto out;
        }
        out_path[0] = cfg;
        out_path[1] = rtconfig_dropin_path(k, o);
    } else if (k == RTCONFIG_CRIO) {
        char **dropins;
        size_t nd;
        r = crio_dropins(host_root, o, &dropins, &nd, e);
        if (r < 0)
            goto out;
        r = inputs_add(host_root, &in, cfg, e);
        for (size_t i = 0; i < nd && r == 0; i++)
            r = inputs_add(host_root, &in, dropins[i], e);
        strv_free(dropins, nd);
        size_t bad = 0;
        if (r == 0)
            r = rtconfig_crio_edit(in.text, in.n, o, &out[1], &bad, e);
        if (r < 0) {
            err_prefix(e, "%s", bad < in.n ? in.paths[bad] : cfg);
            goto out;
        }
        out_path[1] = rtconfig_dropin_path(k, o);
    } else {
        r = inputs_add(host_root, &in, cfg, e);
        if (r == 0)
            r = rtconfig_docker_edit(in.text[0], o, &out[0], e);
        if (r < 0) {
            err_prefix(e, "%s", in.n ? in.paths[0] : cfg);
            goto out;
        }
        out_path[0] = cfg;
    }

    /* Everything parsed and edited: now write (the drop-in first, so the main file never
     * imports a file that is not there). */
    bool changed = false;
    for (int i = 1; i >= 0 && r == 0; i--)
        if (out_path[i])
            r = write_one(host_root, o, out_path[i], out[i].data ? out[i].data : "", out[i].len,
                          &changed, e);
    if (r == 0 && changed)
        r = rtconfig_reload(host_root, k, o, "configure", e);
    if (r == 0 && ret_changed)
        *ret_changed = changed;
out:
    inputs_free(&in);
    sbuf_free(&out[0]);
    sbuf_free(&out[1]);
    return r;
}

int rtconfig_restore(const char *host_root, enum rtconfig_kind k, const struct rtconfig_options *o,
                     struct err *e)
{
    bool changed = false;
    /* The main file first, so it never imports a drop-in that is gone. */
    int r = 0;
    if (k != RTCONFIG_CRIO)
        r = restore_one(host_root, o, rtconfig_config_path(k, o), &changed, e);
    if (r == 0 && rtconfig_dropin_path(k, o))
        r = restore_one(host_root, o, rtconfig_dropin_path(k, o), &changed, e);
    if (r == 0 && changed)
        r = rtconfig_reload(host_root, k, o, "restore", e);
    return r;
}

/* ---- check -------------------------------------------------------------------------------- */

static int check_containerd(const char *root, const struct rtconfig_options *o, struct err *e)
{
    const char *cfg = rtconfig_config_path(RTCONFIG_CONTAINERD, o);
    _cleanup_free_ char *full = under(root, cfg);
    _cleanup_free_ char *data = NULL;
    size_t len;
    int r = read_opt(full, &data, &len, e);
    if (r < 0)
        return r;
    if (!data)
        return err_set(e, -ENOENT, "%s: not there", full);
    _cleanup_(tomlx_freep) struct tomlx *m = NULL;
    if (tomlx_parse(data, len, &m, NULL, e) < 0)
        return err_prefix(e, "%s", full);
    int version;
    if (rtconfig_containerd_version(m, &version, e) < 0)
        return err_prefix(e, "%s", full);
    const char *plugin = rtconfig_containerd_plugin(version);
    /* containerd replaces a plugin section with the last imported file's that names it. */
    const struct tomlx *in_force =
        tomlx_type_at(m, TP("plugins", plugin)) == TOMLX_TABLE ? m : NULL;
    _cleanup_(tomlx_freep) struct tomlx *last = NULL;
    _cleanup_free_ char *from = xstrdup(full);
    int n = tomlx_str_array_len(m, TP("imports"));
    for (int i = 0; i < n; i++) {
        _cleanup_free_ char *imp = NULL;
        if (tomlx_str_array_get(m, TP("imports"), (size_t)i, &imp) < 0 || imp[0] != '/' ||
            strpbrk(imp, "*?["))
            continue;
        _cleanup_free_ char *ifull = under(root, imp);
        _cleanup_free_ char *idata = NULL;
        size_t ilen;
        if (read_opt(ifull, &idata, &ilen, e) < 0 || !idata) {
            err_clear(e);
            continue;
        }
        _cleanup_(tomlx_freep) struct tomlx *t = NULL;
        if (tomlx_parse(idata, ilen, &t, NULL, e) < 0)
            return err_prefix(e, "%s", ifull);
        if (tomlx_type_at(t, TP("plugins", plugin)) == TOMLX_TABLE) {
            tomlx_free(last);
            last = steal_ptr(&t);
            in_force = last;
            free(from);
            from = xstrdup(ifull);
        }
    }
    if (!in_force)
        return err_set(e, -ENOENT, "%s: no plugins.\"%s\" section", full, plugin);
    _cleanup_free_ char *bin = NULL;
    if (tomlx_get_str(in_force,
                      TP("plugins", plugin, "containerd", "runtimes", o->runtime_name, "options",
                         "BinaryName"),
                      &bin) < 0)
        return err_set(e, -ENOENT, "%s: no %s runtime with a BinaryName", from, o->runtime_name);
    if (strcmp(bin, o->runtime_path) != 0)
        return err_set(e, -ENOENT, "%s: the %s runtime runs \"%s\", not \"%s\"", from,
                       o->runtime_name, bin, o->runtime_path);
    bool cdi = false;
    if (o->enable_cdi &&
        (tomlx_get_bool(in_force, TP("plugins", plugin, "enable_cdi"), &cdi) < 0 || !cdi))
        return err_set(e, -ENOENT, "%s: CDI is not enabled (plugins.\"%s\".enable_cdi)", from,
                       plugin);
    return 0;
}

static int check_crio(const char *root, const struct rtconfig_options *o, struct err *e)
{
    struct rtconfig_inputs in = {0};
    char **dropins = NULL;
    size_t nd = 0;
    int r = crio_dropins(root, o, &dropins, &nd, e);
    if (r == 0)
        r = inputs_add(root, &in, rtconfig_config_path(RTCONFIG_CRIO, o), e);
    for (size_t i = 0; i < nd && r == 0; i++)
        r = inputs_add(root, &in, dropins[i], e);
    if (r == 0)
        r = inputs_add(root, &in, rtconfig_dropin_path(RTCONFIG_CRIO, o), e);
    strv_free(dropins, nd);
    char *path = NULL;
    for (size_t i = 0; i < in.n && r == 0; i++) {
        if (!in.data[i])
            continue;
        _cleanup_(tomlx_freep) struct tomlx *t = NULL;
        r = tomlx_parse(in.text[i].data, in.text[i].len, &t, NULL, e);
        if (r < 0) {
            err_prefix(e, "%s", in.paths[i]);
            break;
        }
        char *p = NULL;
        if (tomlx_get_str(t, TP("crio", "runtime", "runtimes", o->runtime_name, "runtime_path"),
                          &p) == 0) {
            free(path);
            path = p;
        }
    }
    if (r == 0 && !path)
        r = err_set(e, -ENOENT, "CRI-O under \"%s\": no %s runtime", root ? root : "/",
                    o->runtime_name);
    else if (r == 0 && strcmp(path, o->runtime_path) != 0)
        r = err_set(e, -ENOENT, "CRI-O: the %s runtime runs \"%s\", not \"%s\"", o->runtime_name,
                    path, o->runtime_path);
    free(path);
    inputs_free(&in);
    return r;
}

static int check_docker(const char *root, const struct rtconfig_options *o, struct err *e)
{
    _cleanup_free_ char *full = under(root, rtconfig_config_path(RTCONFIG_DOCKER, o));
    _cleanup_free_ char *data = NULL;
    size_t len;
    int r = read_opt(full, &data, &len, e);
    if (r < 0)
        return r;
    if (!data)
        return err_set(e, -ENOENT, "%s: not there", full);
    json_error_t je;
    json_t *doc = json_loadb(data, len, 0, &je);
    if (!doc)
        return err_set(e, -EINVAL, "%s: line %d, column %d: %s", full, je.line, je.column, je.text);
    const char *path = json_string_value(json_object_get(
        json_object_get(json_object_get(doc, "runtimes"), o->runtime_name), "path"));
    if (!path)
        r = err_set(e, -ENOENT, "%s: no runtimes.%s.path", full, o->runtime_name);
    else if (strcmp(path, o->runtime_path) != 0)
        r = err_set(e, -ENOENT, "%s: the %s runtime runs \"%s\", not \"%s\"", full, o->runtime_name,
                    path, o->runtime_path);
    else if (o->enable_cdi &&
             !json_is_true(json_object_get(json_object_get(doc, "features"), "cdi")))
        r = err_set(e, -ENOENT, "%s: CDI is not enabled (features.cdi)", full);
    json_decref(doc);
    return r;
}

int rtconfig_check(const char *host_root, enum rtconfig_kind k, const struct rtconfig_options *o,
                   struct err *e)
{
    switch (k) {
    case RTCONFIG_CONTAINERD:
        return check_containerd(host_root, o, e);
    case RTCONFIG_CRIO:
        return check_crio(host_root, o, e);
    case RTCONFIG_DOCKER:
        return check_docker(host_root, o, e);
    }
    return err_set(e, -EINVAL, "unknown runtime");
}
