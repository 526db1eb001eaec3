// SPDX-License-Identifier: GPL-2.0
/* Reads the RX hash through the XDP RX-metadata kfunc (a device-bound program, kernels 6.3+) and
 * keeps the last one in a map for the VM test's loader: [0] successful calls, [1] failed calls,
 * [2] last hash, [3] last xdp_rss_hash_type. UDP frames only; everything passes. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* The kernel's enum (include/net/xdp.h), as the kfunc's BTF names it. */
enum xdp_rss_hash_type {
	XDP_RSS_TYPE_NONE = 0,
};

extern int bpf_xdp_metadata_rx_hash(const struct xdp_md *ctx, __u32 *hash,
				    enum xdp_rss_hash_type *rss_type) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} onic_hash SEC(".maps");

static void put(__u32 k, __u64 v, int add)
{
	__u64 *p = bpf_map_lookup_elem(&onic_hash, &k);

	if (p)
		*p = add ? *p + v : v;
}

SEC("xdp")
int xdp_hash(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	enum xdp_rss_hash_type type = XDP_RSS_TYPE_NONE;
	__u32 hash = 0;

	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 ||
	    ip->protocol != 17)
		return XDP_PASS;
	if (bpf_xdp_metadata_rx_hash(ctx, &hash, &type)) {
		put(1, 1, 1);
		return XDP_PASS;
	}
	put(0, 1, 1);
	put(2, hash, 0);
	put(3, type, 0);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
