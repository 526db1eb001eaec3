// SPDX-License-Identifier: GPL-2.0
/* Sends every frame back out of the port it came in on, destination and source MAC exchanged
 * (the C twin of `onic run --xdp tx`). Frames shorter than an Ethernet header are dropped. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_swap(struct xdp_md *ctx)
{
	unsigned char *p = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	unsigned char tmp;
	int i;

	if ((void *)(p + ETH_HLEN) > end)
		return XDP_DROP;
#pragma unroll
	for (i = 0; i < ETH_ALEN; i++) {
		tmp = p[i];
		p[i] = p[i + ETH_ALEN];
		p[i + ETH_ALEN] = tmp;
	}
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
