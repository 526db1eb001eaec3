// SPDX-License-Identifier: GPL-2.0
/* Two programs redirecting through maps the loader fills:
 * - xdp_redirect_map: every frame to the interface in entry 0 of the devmap tx_port (the C twin
 *   of `onic run --xdp redirect` once tx_port[0] holds the other port's ifindex); frames meet
 *   XDP_DROP when the entry is missing;
 * - xdp_to_xsk (section xdp/xsk): UDP frames to the AF_XDP socket of their RX queue in the
 *   xskmap xsks, everything else (and UDP on a queue without a socket) to the stack. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

SEC("xdp")
int xdp_redirect_map(struct xdp_md *ctx)
{
	return bpf_redirect_map(&tx_port, 0, XDP_DROP);
}

SEC("xdp/xsk")
int xdp_to_xsk(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->protocol != 17)
		return XDP_PASS;
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
