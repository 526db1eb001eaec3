// SPDX-License-Identifier: GPL-2.0
/* Exercises what XDP programs use beyond a verdict, with results a test can predict:
 * - bpf-to-bpf calls (frame_len, note_source and account are functions of their own);
 * - atomics on a map value: add, fetch-add, or, and, xor, xchg, cmpxchg;
 * - maps: an array (totals), a per-CPU array (per_cpu), an LRU hash by IPv4 source (recent);
 * - global data: a .bss counter, a .data word, a .rodata constant;
 * - helpers: adjust_meta (the constant is left in 4 bytes of metadata), adjust_tail (frames
 *   longer than 128 bytes lose their last 4), csum_diff, get_smp_processor_id, trace_printk
 *   (one line, for the first frame).
 * Verdicts: ARP frames are dropped, everything else passes. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct totals {
	__u64 frames;
	__u64 bytes;
	__u64 flags;
	__u64 last_len;
	__u64 csum;
	__u64 swaps;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct totals);
} totals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} per_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} recent SEC(".maps");

__u64 frames_seen;
__u32 long_frames = 0x100;
const volatile __u32 meta_magic = 0x0ca7cafe;

static __noinline __u32 frame_len(struct xdp_md *ctx)
{
	return ctx->data_end - ctx->data;
}

static __noinline void note_source(__u32 saddr)
{
	__u64 one = 1, *n;

	n = bpf_map_lookup_elem(&recent, &saddr);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&recent, &saddr, &one, BPF_NOEXIST);
}

static __noinline int account(__u32 len, __u32 csum)
{
	__u32 zero = 0;
	struct totals *t = bpf_map_lookup_elem(&totals, &zero);
	__u64 *c = bpf_map_lookup_elem(&per_cpu, &zero);
	__u64 old;

	if (!t || !c)
		return -1;
	*c += 1;
	__sync_fetch_and_add(&t->frames, 1);
	old = __sync_fetch_and_add(&t->bytes, len);
	__sync_fetch_and_or(&t->flags, len > 128 ? 2 : 1);
	__sync_fetch_and_and(&t->flags, 0xff);
	__sync_fetch_and_xor(&t->flags, 0x100);
	__sync_lock_test_and_set(&t->last_len, len);
	t->csum = csum;
	if (__sync_val_compare_and_swap(&t->swaps, old / 1000000, old / 1000000 + 1) == old / 1000000)
		return 1;
	return 0;
}

SEC("xdp")
int xdp_features(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u32 len = frame_len(ctx), csum = 0, *meta;

	if ((void *)(ip + 1) <= end && eth->h_proto == bpf_htons(ETH_P_IP)) {
		note_source(ip->saddr);
		csum = bpf_csum_diff(0, 0, (__be32 *)ip, sizeof(*ip), 0);
	}
	account(len, csum);
	if (__sync_fetch_and_add(&frames_seen, 1) == 0)
		bpf_printk("first frame: %u bytes on cpu %u", len, bpf_get_smp_processor_id());
	if ((void *)(eth + 1) <= end && eth->h_proto == bpf_htons(ETH_P_ARP))
		return XDP_DROP;
	if (len > 128) {
		__sync_fetch_and_add(&long_frames, 1);
		if (bpf_xdp_adjust_tail(ctx, -4))
			return XDP_ABORTED;
	}
	if (bpf_xdp_adjust_meta(ctx, -4))
		return XDP_PASS;
	meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 1) > (void *)(long)ctx->data)
		return XDP_PASS;
	*meta = meta_magic;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
