// SPDX-License-Identifier: GPL-2.0
/* Drops every frame (the VM test: pings fail, rx_xdp_drop counts them). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_drop(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";
