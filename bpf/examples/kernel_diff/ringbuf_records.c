// SPDX-License-Identifier: GPL-2.0
/* The one program of the differential set written in this project (docs/bpf-differential.md,
 * "Ring buffers"): no XDP program of Linux 6.1's selftests and samples or of xdp-tools writes
 * to a BPF_MAP_TYPE_RINGBUF, so this one does, in each way a program can, and the records the
 * kernel's test run leaves in the ring (read back through the ring's mmap) are compared byte for
 * byte with those the engine hands its host.
 *
 * Per frame: a reserved record of the frame's length and first 20 bytes, submitted; a reserved
 * record discarded (no reader sees it); and, for frames of 13 bytes or more, 5 or 7 of the
 * frame's bytes from offset 6 (odd lengths: 7) copied in by bpf_ringbuf_output, a size that is
 * not a multiple of 8. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} records SEC(".maps");

struct head {
	__u32 len;
	__u8 first[20];
};

SEC("xdp")
int ringbuf_records(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 len = end - data;
	struct head *h;

	h = bpf_ringbuf_reserve(&records, sizeof(*h), 0);
	if (!h)
		return XDP_ABORTED;
	h->len = len;
	if (data + sizeof(h->first) <= end)
		__builtin_memcpy(h->first, data, sizeof(h->first));
	else
		__builtin_memset(h->first, 0, sizeof(h->first));
	bpf_ringbuf_submit(h, 0);

	h = bpf_ringbuf_reserve(&records, sizeof(*h), 0);
	if (h) {
		h->len = 0xdead;
		bpf_ringbuf_discard(h, 0);
	}

	/* Through the stack: the kernel gives no helper but a few the packet itself. */
	if (data + 6 + 7 <= end) {
		__u8 copy[8];

		__builtin_memcpy(copy, data + 6, 7);
		bpf_ringbuf_output(&records, copy, (len & 1) ? 7 : 5, 0);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
