// SPDX-License-Identifier: GPL-2.0
/* Frames that leave with metadata: each program puts 4 bytes of metadata in front of the frame
 * (the frame's length, little-endian, so that a reader can tell which frame it went with), then
 * sends it back (meta_tx), redirects it through entry 0 of the devmap ports (meta_redirect), to
 * every entry of it (meta_broadcast), to CPU 1 of the cpumap cpus (meta_cpu) or to the AF_XDP
 * socket of its queue (meta_xsk). A frame whose metadata cannot grow is dropped. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, 4);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct bpf_cpumap_val));
	__uint(max_entries, 4);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, 8);
} xsks SEC(".maps");

/* 0 when the metadata holds the frame's length, -1 when it could not be made. */
static __always_inline int tag(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	void *data, *meta;

	if (bpf_xdp_adjust_meta(ctx, -4))
		return -1;
	data = (void *)(long)ctx->data;
	meta = (void *)(long)ctx->data_meta;
	if (meta + 4 > data)
		return -1;
	*(__u32 *)meta = len;
	return 0;
}

SEC("xdp")
int meta_tx(struct xdp_md *ctx)
{
	return tag(ctx) ? XDP_DROP : XDP_TX;
}

SEC("xdp")
int meta_redirect(struct xdp_md *ctx)
{
	return tag(ctx) ? XDP_DROP : bpf_redirect_map(&ports, 0, XDP_DROP);
}

SEC("xdp")
int meta_broadcast(struct xdp_md *ctx)
{
	return tag(ctx) ? XDP_DROP : bpf_redirect_map(&ports, 0, BPF_F_BROADCAST);
}

SEC("xdp")
int meta_cpu(struct xdp_md *ctx)
{
	return tag(ctx) ? XDP_DROP : bpf_redirect_map(&cpus, 1, XDP_DROP);
}

SEC("xdp")
int meta_xsk(struct xdp_md *ctx)
{
	return tag(ctx) ? XDP_DROP : bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_DROP);
}

char _license[] SEC("license") = "GPL";
