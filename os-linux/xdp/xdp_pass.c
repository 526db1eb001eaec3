// SPDX-License-Identifier: GPL-2.0
/* Passes every frame to the stack (attach/swap tests without changing traffic). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
