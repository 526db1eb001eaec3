// SPDX-License-Identifier: GPL-2.0
/* Drops IPv4 UDP datagrams to port 53 and passes everything else (the C twin of
 * `onic run --xdp drop-udp`, whose --udp-port defaults to 53). The destination port is read
 * right after the IPv4 header, whatever its length. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define DNS_PORT 53

SEC("xdp")
int xdp_drop_udp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	unsigned char *l4;
	__u16 *dport;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->protocol != 17)
		return XDP_PASS;
	l4 = (unsigned char *)ip + ip->ihl * 4;
	dport = (__u16 *)(l4 + 2);
	if ((void *)(dport + 1) > end)
		return XDP_PASS;
	return *dport == bpf_htons(DNS_PORT) ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
