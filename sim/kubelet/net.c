/* SPDX-License-Identifier: Apache-2.0 */
/* kl-net: a bridge on the host, one named network namespace per node (made as `ip netns add`
 * makes one) and a veth pair between them, all over rtnetlink with libmnl. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kl-net.h"

#define NETNS_RUN_DIR "/run/netns"
/* what the node's end of its veth is called inside its namespace */
#define NODE_IFNAME "eth0"
/* rtnetlink requests and acknowledgements (libmnl's MNL_SOCKET_BUFFER_SIZE is a sysconf) */
#define NL_BUF 8192

struct kl_net_node {
    char *netns_path;
    char veth[IFNAMSIZ];
};

struct kl_net {
    char bridge[IFNAMSIZ];
    uint32_t net; /* host order */
    unsigned prefix;
    char host_ip[INET_ADDRSTRLEN];
    uint16_t veth_tag; /* from the bridge name, so two bridges' veths never share a name */
    struct kl_net_node *nodes;
    size_t n_nodes;
};

/* ---- rtnetlink -------------------------------------------------------------------------- */

struct nl {
    struct mnl_socket *sock;
    unsigned portid;
    unsigned seq;
};

static void nl_close(struct nl *nl)
{
    if (nl->sock)
        mnl_socket_close(nl->sock);
    nl->sock = NULL;
}

/* A route socket in the calling thread's network namespace. */
static int nl_open(struct nl *nl, struct err *e)
{
    *nl = (struct nl){0};
    nl->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (!nl->sock)
        return err_errno(e, -errno, "netlink socket");
    if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
        int r = -errno;
        nl_close(nl);
        return err_errno(e, r, "netlink bind");
    }
    nl->portid = mnl_socket_get_portid(nl->sock);
    nl->seq = (unsigned)now_ms_mono();
    return 0;
}

/* A request header with room for the message's fixed part (zeroed). */
static struct nlmsghdr *nl_msg(struct nl *nl, char *buf, size_t n, uint16_t type, uint16_t flags,
                               void **ret_extra, size_t extra)
{
    memset(buf, 0, n);
    struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
    h->nlmsg_type = type;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    h->nlmsg_seq = ++nl->seq;
    *ret_extra = mnl_nlmsg_put_extra_header(h, extra);
    return h;
}

/* Sends h and waits for its acknowledgement: 0, or the kernel's negative errno. */
static int nl_call(struct nl *nl, struct nlmsghdr *h)
{
    if (mnl_socket_sendto(nl->sock, h, h->nlmsg_len) < 0)
        return -errno;
    char buf[NL_BUF];
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(nl->sock, buf, sizeof(buf));
        if (n < 0)
            return -errno;
        int r = mnl_cb_run(buf, (size_t)n, h->nlmsg_seq, nl->portid, NULL, NULL);
        if (r < 0)
            return errno ? -errno : -EIO;
        if (r == MNL_CB_STOP)
            return 0;
    }
}

static int link_index(const char *name, unsigned *ret)
{
    unsigned i = if_nametoindex(name);
    if (!i)
        return -errno;
    *ret = i;
    return 0;
}

/* Deletes the link called name; absent is fine. */
static int link_del(struct nl *nl, const char *name)
{
    char buf[NL_BUF];
    struct ifinfomsg *ifm;
    struct nlmsghdr *h = nl_msg(nl, buf, sizeof(buf), RTM_DELLINK, 0, (void **)&ifm, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(h, IFLA_IFNAME, name);
    int r = nl_call(nl, h);
    return r == -ENODEV ? 0 : r;
}

static int link_set(struct nl *nl, unsigned index, bool up, unsigned master)
{
    char buf[NL_BUF];
    struct ifinfomsg *ifm;
    struct nlmsghdr *h = nl_msg(nl, buf, sizeof(buf), RTM_NEWLINK, 0, (void **)&ifm, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    ifm->ifi_index = (int)index;
    if (up) {
        ifm->ifi_flags = IFF_UP;
        ifm->ifi_change = IFF_UP;
    }
    if (master)
        mnl_attr_put_u32(h, IFLA_MASTER, master);
    return nl_call(nl, h);
}

static int bridge_add(struct nl *nl, const char *name)
{
    char buf[NL_BUF];
    struct ifinfomsg *ifm;
    struct nlmsghdr *h = nl_msg(nl, buf, sizeof(buf), RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL,
                                (void **)&ifm, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(h, IFLA_IFNAME, name);
    struct nlattr *info = mnl_attr_nest_start(h, IFLA_LINKINFO);
    mnl_attr_put_strz(h, IFLA_INFO_KIND, "bridge");
    mnl_attr_nest_end(h, info);
    return nl_call(nl, h);
}

/* A veth pair: name on the host, peer (called peer_name) created inside the namespace netns_fd. */
static int veth_add(struct nl *nl, const char *name, const char *peer_name, int netns_fd)
{
    char buf[NL_BUF];
    struct ifinfomsg *ifm;
    struct nlmsghdr *h = nl_msg(nl, buf, sizeof(buf), RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL,
                                (void **)&ifm, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(h, IFLA_IFNAME, name);
    struct nlattr *info = mnl_attr_nest_start(h, IFLA_LINKINFO);
    mnl_attr_put_strz(h, IFLA_INFO_KIND, "veth");
    struct nlattr *data = mnl_attr_nest_start(h, IFLA_INFO_DATA);
    struct nlattr *peer = mnl_attr_nest_start(h, VETH_INFO_PEER);
    /* the peer's attributes follow its own (zeroed) struct ifinfomsg */
    h->nlmsg_len += MNL_ALIGN(sizeof(struct ifinfomsg));
    mnl_attr_put_strz(h, IFLA_IFNAME, peer_name);
    mnl_attr_put_u32(h, IFLA_NET_NS_FD, (uint32_t)netns_fd);
    mnl_attr_nest_end(h, peer);
    mnl_attr_nest_end(h, data);
    mnl_attr_nest_end(h, info);
    return nl_call(nl, h);
}

static int addr_add(struct nl *nl, unsigned index, uint32_t addr, unsigned prefix)
{
    char buf[NL_BUF];
    struct ifaddrmsg *ifa;
    struct nlmsghdr *h = nl_msg(nl, buf, sizeof(buf), RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE,
                                (void **)&ifa, sizeof(*ifa));
    ifa->ifa_family = AF_INET;
    ifa->ifa_prefixlen = (unsigned char)prefix;
    ifa->ifa_scope = RT_SCOPE_UNIVERSE;
    ifa->ifa_index = index;
    uint32_t be = htonl(addr);
    mnl_attr_put_u32(h, IFA_LOCAL, be);
    mnl_attr_put_u32(h, IFA_ADDRESS, be);
    return nl_call(nl, h);
}

static int route_default(struct nl *nl, unsigned index, uint32_t gw)
{
    char buf[NL_BUF];
    struct rtmsg *rtm;
    struct nlmsghdr *h = nl_msg(nl, buf, sizeof(buf), RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE,
                                (void **)&rtm, sizeof(*rtm));
    rtm->rtm_family = AF_INET;
    rtm->rtm_table = RT_TABLE_MAIN;
    rtm->rtm_protocol = RTPROT_BOOT;
    rtm->rtm_scope = RT_SCOPE_UNIVERSE;
    rtm->rtm_type = RTN_UNICAST;
    mnl_attr_put_u32(h, RTA_GATEWAY, htonl(gw));
    mnl_attr_put_u32(h, RTA_OIF, index);
    return nl_call(nl, h);
}

/* ---- named namespaces, as iproute2 makes them ------------------------------------------- */

/* /run/netns exists and is a shared mount point, so a namespace unmounted here is unmounted in
 * every mount namespace (pods' included) and freed. */
static int netns_run_dir(struct err *e)
{
    if (mkdir(NETNS_RUN_DIR, 0755) < 0 && errno != EEXIST)
        return err_errno(e, -errno, "mkdir \"%s\"", NETNS_RUN_DIR);
    bool made = false;
    while (mount("", NETNS_RUN_DIR, "none", MS_SHARED | MS_REC, NULL) < 0) {
        if (errno != EINVAL || made)
            return err_errno(e, -errno, "make \"%s\" a shared mount", NETNS_RUN_DIR);
        if (mount(NETNS_RUN_DIR, NETNS_RUN_DIR, "none", MS_BIND | MS_REC, NULL) < 0)
            return err_errno(e, -errno, "bind-mount \"%s\" onto itself", NETNS_RUN_DIR);
        made = true;
    }
    return 0;
}

static void netns_remove(const char *path)
{
    (void)umount2(path, MNT_DETACH);
    (void)unlink(path);
}

struct netns_job {
    const char *path;
    int fd;                             /* enter: the namespace */
    int (*fn)(void *ud, struct err *e); /* enter: what to run there */
    void *ud;
    int r;
    struct err *e;
};

/* A thread of its own unshares the network namespace and bind-mounts it onto path: the
 * caller's threads stay where they were. */
static void *netns_create_thread(void *arg)
{
    struct netns_job *j = arg;
    if (unshare(CLONE_NEWNET) < 0) {
        j->r = err_errno(j->e, -errno, "unshare(CLONE_NEWNET)");
        return NULL;
    }
    char src[64];
    snprintf(src, sizeof(src), "/proc/self/task/%ld/ns/net", (long)syscall(SYS_gettid));
    if (mount(src, j->path, "none", MS_BIND, NULL) < 0)
        j->r = err_errno(j->e, -errno, "bind-mount \"%s\" onto \"%s\"", src, j->path);
    return NULL;
}

static void *netns_enter_thread(void *arg)
{
    struct netns_job *j = arg;
    if (setns(j->fd, CLONE_NEWNET) < 0) {
        j->r = err_errno(j->e, -errno, "setns \"%s\"", j->path);
        return NULL;
    }
    j->r = j->fn(j->ud, j->e);
    return NULL;
}

static int run_thread(void *(*fn)(void *), struct netns_job *j, struct err *e)
{
    pthread_t t;
    int r = pthread_create(&t, NULL, fn, j);
    if (r)
        return err_set(e, -r, "pthread_create: %s", strerror(r));
    pthread_join(t, NULL);
    return j->r;
}

/* A new namespace at path (an older one there is removed first). */
static int netns_create(const char *path, struct err *e)
{
    netns_remove(path);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
    if (fd < 0)
        return err_errno(e, -errno, "create \"%s\"", path);
    struct netns_job j = {.path = path, .e = e};
    int r = run_thread(netns_create_thread, &j, e);
    if (r < 0)
        (void)unlink(path);
    return r;
}

/* ---- names and addresses ---------------------------------------------------------------- */

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* "kl<tag>-<node>" (the bridge's tag, as its veths carry: two simulated clusters on one machine
 * with the same node names never share a namespace), or when that is longer than a file name may
 * be, its first part and a hash. */
static char *netns_path_for(uint16_t tag, const char *node)
{
    size_t len = strlen(node);
    if (len <= NAME_MAX - 7)
        return xasprintf(NETNS_RUN_DIR "/kl%04x-%s", tag, node);
    return xasprintf(NETNS_RUN_DIR "/kl%04x-%.*s-%08x", tag, NAME_MAX - 16, node, fnv1a(node));
}

static void addr_str(uint32_t a, char *buf, size_t n)
{
    struct in_addr in = {.s_addr = htonl(a)};
    if (!inet_ntop(AF_INET, &in, buf, (socklen_t)n))
        buf[0] = '\0';
}

static int subnet_parse(const char *s, uint32_t *ret_net, unsigned *ret_prefix, struct err *e)
{
    const char *slash = strchr(s, '/');
    unsigned prefix = 0;
    char a[INET_ADDRSTRLEN];
    struct in_addr in;
    if (!slash || (size_t)(slash - s) >= sizeof(a) || parse_uint(slash + 1, &prefix) < 0)
        return err_set(e, -EINVAL, "subnet \"%s\": not an IPv4 CIDR (A.B.C.D/N)", s);
    memcpy(a, s, (size_t)(slash - s));
    a[slash - s] = '\0';
    if (inet_pton(AF_INET, a, &in) != 1)
        return err_set(e, -EINVAL, "subnet \"%s\": not an IPv4 CIDR (A.B.C.D/N)", s);
    if (prefix < 16 || prefix > 28)
        return err_set(e, -EINVAL, "subnet \"%s\": prefix /%u outside /16 to /28", s, prefix);
    uint32_t net = ntohl(in.s_addr);
    uint32_t mask = ~0u << (32 - prefix);
    if (net & ~mask)
        return err_set(e, -EINVAL, "subnet \"%s\": address bits set past the /%u prefix", s,
                       prefix);
    *ret_net = net;
    *ret_prefix = prefix;
    return 0;
}

/* The host's veths named for the bridge with this tag ("klv<tag>-<index>"). */
static void veths_sweep(struct nl *nl, uint16_t tag)
{
    char prefix[IFNAMSIZ];
    snprintf(prefix, sizeof(prefix), "klv%04x-", (unsigned)tag);
    struct if_nameindex *all = if_nameindex();
    if (!all)
        return;
    for (struct if_nameindex *i = all; i->if_index; i++)
        if (str_has_prefix(i->if_name, prefix))
            (void)link_del(nl, i->if_name);
    if_freenameindex(all);
}

/* ---- the module ------------------------------------------------------------------------- */

int kl_net_new(const char *bridge, const char *subnet, struct kl_net **ret, struct err *e)
{
    if (!bridge || !bridge[0] || strlen(bridge) >= IFNAMSIZ || strchr(bridge, '/'))
        return err_set(e, -EINVAL, "bridge \"%s\": not an interface name (1 to 15 bytes)",
                       bridge ? bridge : "");
    uint32_t net = 0;
    unsigned prefix = 0;
    int r = subnet_parse(subnet ? subnet : "", &net, &prefix, e);
    if (r < 0)
        return r;
    r = netns_run_dir(e);
    if (r < 0)
        return r;
    struct nl nl;
    r = nl_open(&nl, e);
    if (r < 0)
        return r;
    /* a bridge of a killed earlier run is removed and made anew; so are its veths, which
     * carry this bridge's tag (their namespaces go when a node of the same name is added) */
    uint16_t tag = (uint16_t)(fnv1a(bridge) & 0xffff);
    veths_sweep(&nl, tag);
    r = link_del(&nl, bridge);
    if (r >= 0)
        r = bridge_add(&nl, bridge);
    if (r < 0) {
        nl_close(&nl);
        return err_set(e, r, "create bridge \"%s\": %s", bridge, strerror(-r));
    }
    unsigned idx = 0;
    r = link_index(bridge, &idx);
    if (r >= 0)
        r = addr_add(&nl, idx, net + 1, prefix);
    if (r >= 0)
        r = link_set(&nl, idx, true, 0);
    if (r < 0) {
        (void)link_del(&nl, bridge);
        nl_close(&nl);
        return err_set(e, r, "set up bridge \"%s\": %s", bridge, strerror(-r));
    }
    nl_close(&nl);
    struct kl_net *n = xcalloc(1, sizeof(*n));
    strlcpy_s(n->bridge, bridge, sizeof(n->bridge));
    n->net = net;
    n->prefix = prefix;
    n->veth_tag = tag;
    addr_str(net + 1, n->host_ip, sizeof(n->host_ip));
    *ret = n;
    return 0;
}

void kl_net_free(struct kl_net *n)
{
    if (!n)
        return;
    struct nl nl;
    struct err e = {0};
    bool have_nl = nl_open(&nl, &e) == 0;
    for (size_t i = 0; i < n->n_nodes; i++) {
        /* deleting one end of a veth deletes both; unmounting frees the namespace */
        if (have_nl && n->nodes[i].veth[0])
            (void)link_del(&nl, n->nodes[i].veth);
        netns_remove(n->nodes[i].netns_path);
        free(n->nodes[i].netns_path);
    }
    if (have_nl) {
        (void)link_del(&nl, n->bridge);
        nl_close(&nl);
    }
    err_clear(&e);
    free(n->nodes);
    free(n);
}

const char *kl_net_host_ip(const struct kl_net *n)
{
    return n->host_ip;
}

struct node_setup {
    uint32_t addr, gw;
    unsigned prefix;
};

/* Inside the node's namespace: loopback up, the veth's end addressed and up, the default route
 * through the bridge. */
static int node_setup_in_ns(void *ud, struct err *e)
{
    struct node_setup *s = ud;
    struct nl nl;
    int r = nl_open(&nl, e);
    if (r < 0)
        return r;
    unsigned lo = 0, eth = 0;
    const char *what = "look up lo";
    r = link_index("lo", &lo);
    if (r >= 0) {
        what = "look up " NODE_IFNAME;
        r = link_index(NODE_IFNAME, &eth);
    }
    if (r >= 0) {
        what = "set lo up";
        r = link_set(&nl, lo, true, 0);
    }
    if (r >= 0) {
        what = "address " NODE_IFNAME;
        r = addr_add(&nl, eth, s->addr, s->prefix);
    }
    if (r >= 0) {
        what = "set " NODE_IFNAME " up";
        r = link_set(&nl, eth, true, 0);
    }
    if (r >= 0) {
        what = "default route";
        r = route_default(&nl, eth, s->gw);
    }
    nl_close(&nl);
    return r < 0 ? err_set(e, r, "%s: %s", what, strerror(-r)) : 0;
}

int kl_net_add_node(struct kl_net *n, const char *node, unsigned index, char **ret_netns_path,
                    char **ret_ip, struct err *e)
{
    uint32_t hosts = (1u << (32 - n->prefix)) - 2; /* without network and broadcast */
    if (!node || !node[0] || strchr(node, '/'))
        return err_set(e, -EINVAL, "node \"%s\": not a usable name", node ? node : "");
    if ((uint64_t)index + 2 > hosts)
        return err_set(e, -ERANGE, "node \"%s\": number %u does not fit the /%u subnet", node,
                       index, n->prefix);
    _cleanup_free_ char *path = netns_path_for(n->veth_tag, node);
    for (size_t i = 0; i < n->n_nodes; i++)
        if (streq_ptr(n->nodes[i].netns_path, path))
            return err_set(e, -EEXIST, "node \"%s\": already added", node);
    struct kl_net_node nn = {0};
    /* index < 2^16 - 2: the subnet is at most a /16 */
    snprintf(nn.veth, sizeof(nn.veth), "klv%04x-%u", n->veth_tag, (unsigned)(uint16_t)index);
    struct nl nl;
    int r = nl_open(&nl, e);
    if (r < 0)
        return err_prefix(e, "node \"%s\"", node);
    /* a veth of a killed earlier run goes first, then its namespace */
    (void)link_del(&nl, nn.veth);
    r = netns_create(path, e);
    if (r < 0) {
        nl_close(&nl);
        return err_prefix(e, "node \"%s\": namespace", node);
    }
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    const char *what = "open namespace";
    unsigned idx = 0, bridx = 0;
    r = fd < 0 ? -errno : 0;
    if (r >= 0) {
        what = "create veth";
        r = veth_add(&nl, nn.veth, NODE_IFNAME, fd);
    }
    if (r >= 0) {
        what = "look up bridge";
        r = link_index(n->bridge, &bridx);
    }
    if (r >= 0) {
        what = "look up veth";
        r = link_index(nn.veth, &idx);
    }
    if (r >= 0) {
        what = "attach veth";
        r = link_set(&nl, idx, true, bridx);
    }
    if (r < 0) {
        err_set(e, r, "node \"%s\": %s \"%s\": %s", node, what, nn.veth, strerror(-r));
        (void)link_del(&nl, nn.veth);
        nl_close(&nl);
        netns_remove(path);
        return r;
    }
    nl_close(&nl);
    struct node_setup s = {.addr = n->net + 2 + index, .gw = n->net + 1, .prefix = n->prefix};
    struct netns_job j = {.path = path, .fd = fd, .fn = node_setup_in_ns, .ud = &s, .e = e};
    r = run_thread(netns_enter_thread, &j, e);
    if (r < 0) {
        struct nl nl2;
        struct err ignored = {0};
        if (nl_open(&nl2, &ignored) == 0) {
            (void)link_del(&nl2, nn.veth);
            nl_close(&nl2);
        }
        netns_remove(path);
        return err_prefix(e, "node \"%s\"", node);
    }
    char ip[INET_ADDRSTRLEN];
    addr_str(s.addr, ip, sizeof(ip));
    nn.netns_path = xstrdup(path);
    n->nodes = xrealloc(n->nodes, (n->n_nodes + 1) * sizeof(*n->nodes));
    n->nodes[n->n_nodes++] = nn;
    *ret_netns_path = steal_ptr(&path);
    *ret_ip = xstrdup(ip);
    return 0;
}
