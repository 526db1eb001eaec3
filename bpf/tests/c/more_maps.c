// SPDX-License-Identifier: GPL-2.0
/* Map types beyond the hash and array kinds, one section each: ring buffers (reserve, submit,
 * discard, output, query) and LPM tries updated and matched by the program. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

struct event {
	__u32 len;
	__u8 head[12];
};

/* One record per frame with its length and first 12 bytes, one discarded, one written with
 * bpf_ringbuf_output; XDP_DROP once the ring has no room for another reservation. */
SEC("xdp/ringbuf")
int ringbuf_prog(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct event *e, *gone;
	__u32 len = end - data;

	if (data + 12 > end)
		return XDP_PASS;
	gone = bpf_ringbuf_reserve(&events, 64, 0);
	if (gone)
		bpf_ringbuf_discard(gone, 0);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return XDP_DROP;
	e->len = len;
	__builtin_memcpy(e->head, data, 12);
	bpf_ringbuf_submit(e, 0);
	if (bpf_ringbuf_output(&events, &len, sizeof(len), 0))
		return XDP_ABORTED;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) != 0)
		return XDP_ABORTED;
	return bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) == 4096 ? XDP_PASS : XDP_ABORTED;
}

struct v4_key {
	__u32 prefixlen;
	__u8 addr[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 8);
	__type(key, struct v4_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} routes SEC(".maps");

/* Adds 10.0.0.0/8 -> 1 and 10.1.0.0/16 -> 2, then returns the value of the longest prefix
 * holding the IPv4 destination (XDP_PASS, 2, for 10.1.x.x; XDP_DROP, 1, for the rest of 10/8)
 * or XDP_TX when none does. */
SEC("xdp/lpm")
int lpm_prog(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct v4_key k = { .prefixlen = 8, .addr = { 10, 0, 0, 0 } };
	__u32 v = 1, *found;

	if (data + 34 > end)
		return XDP_ABORTED;
	bpf_map_update_elem(&routes, &k, &v, BPF_ANY);
	k.prefixlen = 16;
	k.addr[1] = 1;
	v = 2;
	bpf_map_update_elem(&routes, &k, &v, BPF_ANY);
	k.prefixlen = 32;
	__builtin_memcpy(k.addr, data + 30, 4);
	found = bpf_map_lookup_elem(&routes, &k);
	return found ? *found : XDP_TX;
}

char _license[] SEC("license") = "GPL";
