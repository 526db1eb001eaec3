// SPDX-License-Identifier: GPL-2.0
/* Redirects every frame to the interface with index ONIC_REDIRECT_IFINDEX (the build makes one
 * object per target index, since `ip link` cannot fill maps). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifndef ONIC_REDIRECT_IFINDEX
#error "build with -DONIC_REDIRECT_IFINDEX=<ifindex>"
#endif

SEC("xdp")
int xdp_redirect(struct xdp_md *ctx)
{
	return bpf_redirect(ONIC_REDIRECT_IFINDEX, 0);
}

char _license[] SEC("license") = "GPL";
