// SPDX-License-Identifier: GPL-2.0
/* Redirects each frame once to the interface registered right after the one it came in on
 * (onicsim0 -> onicsim1: the module registers them in that order, the VM test checks it): the
 * frame leaves through the other port's ndo_xdp_xmit and, over the model's cable, arrives here
 * again. A redirected frame is marked (the byte after the Ethernet header's type, in the ARP
 * hardware-type field's high byte, set to 0xEE), and a marked frame is dropped, so nothing
 * loops. Only ARP frames are redirected; everything else passes. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ONIC_MARK 0xEE

SEC("xdp")
int xdp_redirect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	unsigned char *mark = (unsigned char *)(eth + 1);

	if ((void *)(mark + 1) > end || eth->h_proto != bpf_htons(ETH_P_ARP))
		return XDP_PASS;
	if (*mark == ONIC_MARK)
		return XDP_DROP;
	*mark = ONIC_MARK;
	return bpf_redirect(ctx->ingress_ifindex + 1, 0);
}

char _license[] SEC("license") = "GPL";
