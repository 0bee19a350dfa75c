/* SPDX-License-Identifier: Apache-2.0 */
/* The device plugins' XID and ECC policy (gpuhealth.h, "the plugins' policy"). */
#include <ctype.h>
#include <string.h>

#include "gpuhealth.h"

static const uint64_t default_ignored[] = {13, 31, 43, 45, 68, 109};

/* Parses one comma list: sets *all on "all" (and "xids" when accept_xids_word), adds numbers. */
static void parse_xid_list(const char *s, bool accept_xids_word, bool *all, uint64_t *set,
                           size_t *n)
{
    if (!s)
        return;
    const char *p = s;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && isspace((unsigned char)*p))
            p++, len--;
        while (len && isspace((unsigned char)p[len - 1]))
            len--;
        char tok[32];
        if (len > 0 && len < sizeof(tok)) {
            for (size_t i = 0; i < len; i++)
                tok[i] = (char)tolower((unsigned char)p[i]);
            tok[len] = 0;
            uint64_t v;
            bool digits = true;
            for (size_t i = 0; i < len; i++)
                digits = digits && isdigit((unsigned char)tok[i]);
            if (strcmp(tok, "all") == 0 || (accept_xids_word && strcmp(tok, "xids") == 0))
                *all = true;
            else if (digits && parse_u64(tok, &v) == 0 && *n < GH_XID_SET_MAX)
                set[(*n)++] = v;
            /* else: malformed, ignored as NVIDIA's plugin does */
        }
        if (!end)
            break;
        p = end + 1;
    }
}

void gh_policy_init(struct gh_policy *hp, const char *disable_list, const char *enable_list)
{
    memset(hp, 0, sizeof(*hp));
    for (size_t i = 0; i < ARRAY_SIZE(default_ignored); i++)
        hp->ignored[hp->n_ignored++] = default_ignored[i];
    parse_xid_list(disable_list, true, &hp->disable_all, hp->ignored, &hp->n_ignored);
    parse_xid_list(enable_list, false, &hp->enable_all, hp->enabled, &hp->n_enabled);
}

static bool in_set(const uint64_t *set, size_t n, uint64_t v)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == v)
            return true;
    return false;
}

bool gh_policy_xid_critical(const struct gh_policy *hp, uint64_t xid)
{
    if (hp->enable_all || in_set(hp->enabled, hp->n_enabled, xid))
        return true;
    if (hp->disable_all)
        return false;
    return !in_set(hp->ignored, hp->n_ignored, xid);
}

bool gh_policy_event_critical(const struct gh_policy *hp, const struct gpu_event *ev)
{
    if (ev->type & GPU_EVENT_XID)
        return gh_policy_xid_critical(hp, ev->data);
    if (ev->type & GPU_EVENT_ECC_DBE)
        return !hp->disable_all || hp->enable_all;
    return false;
}
