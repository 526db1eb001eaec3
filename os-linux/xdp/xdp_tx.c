// SPDX-License-Identifier: GPL-2.0
/* An ICMP echo responder in XDP: an IPv4 echo request is turned into its reply in place
 * (addresses swapped, type 0, checksum adjusted) and sent back out of the port it came in on
 * (XDP_TX); everything else goes to the stack. A ping to the port's address is then answered
 * by the driver's XDP_TX path alone. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Spelled out here: <linux/in.h> and <linux/icmp.h> pull in libc headers. */
#define PROTO_ICMP 1
#define ICMP_ECHOREPLY 0
#define ICMP_ECHO 8

struct icmphdr {
	__u8 type;
	__u8 code;
	__u16 checksum;
	__u32 rest;
};

SEC("xdp")
int xdp_tx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct icmphdr *icmp = (void *)(ip + 1);
	unsigned char mac[ETH_ALEN];
	__u32 addr, sum;

	if ((void *)(icmp + 1) > end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != PROTO_ICMP ||
	    icmp->type != ICMP_ECHO)
		return XDP_PASS;
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	addr = ip->saddr;
	ip->saddr = ip->daddr;
	ip->daddr = addr;
	/* type 8 -> 0: the one's-complement sum grows by 0x0800 (RFC 1624). */
	icmp->type = ICMP_ECHOREPLY;
	sum = (__u32)icmp->checksum + bpf_htons(ICMP_ECHO << 8);
	icmp->checksum = (__u16)(sum + (sum >> 16));
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
