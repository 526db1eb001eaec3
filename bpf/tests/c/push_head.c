// SPDX-License-Identifier: GPL-2.0
/* Grows the frame 16 bytes at the front and sends it back out: the capture shows what the new
 * headroom held (`onic run` zeroes it, as the kernel's test run does, unless --keep-headroom). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int push_head(struct xdp_md *ctx)
{
	if (bpf_xdp_adjust_head(ctx, -16))
		return XDP_ABORTED;
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
