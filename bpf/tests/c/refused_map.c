// SPDX-License-Identifier: GPL-2.0
/* An object with a map type the engine does not provide (a ring buffer): the whole object is
 * refused, since its maps exist for all of its programs. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

SEC("xdp")
int with_ringbuf(struct xdp_md *ctx)
{
	__u32 *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (e) {
		*e = ctx->rx_queue_index;
		bpf_ringbuf_submit(e, 0);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
