// SPDX-License-Identifier: GPL-2.0
/* An object with a map type the engine does not provide (a queue): the program that uses it is
 * refused, the one that does not loads, as in the kernel. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(value_size, 4);
	__uint(max_entries, 64);
} events SEC(".maps");

SEC("xdp")
int with_queue(struct xdp_md *ctx)
{
	__u32 q = ctx->rx_queue_index;

	bpf_map_push_elem(&events, &q, 0);
	return XDP_PASS;
}

/* Does not use the queue: loads, as the kernel loads it. */
SEC("xdp")
int without_queue(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
