// SPDX-License-Identifier: GPL-2.0
/* Programs the engine must refuse at load, each in its own section: a helper it does not provide,
 * an extern the kernel would resolve, and a CO-RE relocation. (A map type it does not provide is
 * in refused_map.c: maps belong to the whole object.) */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern __u32 LINUX_KERNEL_VERSION __kconfig;

struct hidden {
	int a;
	int b;
} __attribute__((preserve_access_index));

SEC("xdp/helper")
int helper(struct xdp_md *ctx)
{
	return bpf_get_numa_node_id() > 0 ? XDP_PASS : XDP_DROP;
}

SEC("xdp/kconfig")
int kconfig(struct xdp_md *ctx)
{
	return LINUX_KERNEL_VERSION > 0 ? XDP_PASS : XDP_DROP;
}

SEC("xdp/core")
int core(struct xdp_md *ctx)
{
	struct hidden *h = (void *)(long)ctx->data;

	return __builtin_preserve_access_index(h->b) ? XDP_PASS : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
