// SPDX-License-Identifier: GPL-2.0
/*
 * onic: the netdev's queues as the kernel's "netdev" netlink family shows them (6.8 and later):
 * which NAPI instance serves each RX and TX queue (netif_queue_set_napi, while the interface is
 * up), and per-queue statistics (netdev_stat_ops, 6.10 and later) from the core's per-queue
 * counters, the same ones ndo_get_stats64 adds up. On older kernels these are no-ops.
 */
#include <linux/netdevice.h>
#include <net/netdev_queues.h>

#include "onic_compat.h"
#include "onic_glue.h"

#ifdef ONIC_HAVE_QUEUE_STATS
/* The stat callbacks run in process context under RTNL (netdev netlink's qstats-get); the
 * counters are read through their u64_stats blocks, so no other lock is needed. Fields the
 * driver does not count are left as the kernel set them (not reported). */
static void onic_qstats_rx(struct net_device *netdev, int idx, struct netdev_queue_stats_rx *rx)
{
	struct onic_ndev *nd = netdev_priv(netdev);
	struct onic_queue_stats s;

	if (idx < 0 || idx > U16_MAX || onic_rs_queue_stats(nd->port, idx, &s))
		return;
	rx->packets = s.rx_packets;
	rx->bytes = s.rx_bytes;
	rx->alloc_fail = s.rx_alloc_fail;
}

static void onic_qstats_tx(struct net_device *netdev, int idx, struct netdev_queue_stats_tx *tx)
{
	struct onic_ndev *nd = netdev_priv(netdev);
	struct onic_queue_stats s;

	if (idx < 0 || idx > U16_MAX || onic_rs_queue_stats(nd->port, idx, &s))
		return;
	tx->packets = s.tx_packets;
	tx->bytes = s.tx_bytes;
}

/* Base: the queue indices beyond the ones in use (channels reduced with ethtool -L keep their
 * counters in the link statistics), so that base + the queues = ndo_get_stats64. */
static void onic_qstats_base(struct net_device *netdev, struct netdev_queue_stats_rx *rx,
			     struct netdev_queue_stats_tx *tx)
{
	struct onic_ndev *nd = netdev_priv(netdev);
	struct onic_queue_stats s;

	/* The same count for RX and TX: the queues come in pairs (onic_relayout). */
	onic_rs_base_stats(nd->port, netdev->real_num_rx_queues, &s);
	rx->packets = s.rx_packets;
	rx->bytes = s.rx_bytes;
	rx->alloc_fail = s.rx_alloc_fail;
	tx->packets = s.tx_packets;
	tx->bytes = s.tx_bytes;
}

static const struct netdev_stat_ops onic_stat_ops = {
	.get_queue_stats_rx = onic_qstats_rx,
	.get_queue_stats_tx = onic_qstats_tx,
	.get_base_stats = onic_qstats_base,
};
#endif

/* At allocation, before register_netdev. */
void onic_queues_attach(struct onic_ndev *nd)
{
#ifdef ONIC_HAVE_QUEUE_STATS
	nd->netdev->stat_ops = &onic_stat_ops;
#endif
}

/* Queues 0..n-1 (RX and TX of each index) served by their queue vector's NAPI (on), or by none
 * (off). RTNL held: from open, after the NAPI instances are enabled, and from stop, before
 * the queues in use are forgotten. */
void onic_queues_set_napi(struct onic_ndev *nd, u16 n, bool on)
{
#ifdef ONIC_HAVE_QUEUE_NAPI
	u16 q;

	for (q = 0; q < n; q++) {
		struct napi_struct *napi = on ? &nd->qv[q].napi : NULL;

		netif_queue_set_napi(nd->netdev, q, NETDEV_QUEUE_TYPE_RX, napi);
		netif_queue_set_napi(nd->netdev, q, NETDEV_QUEUE_TYPE_TX, napi);
#ifdef ONIC_HAVE_NAPI_IRQ
		/* The queue vector's interrupt (none on the model inside the kernel: irq -1). */
		if (on && nd->qv[q].irq >= 0)
			netif_napi_set_irq(&nd->qv[q].napi, nd->qv[q].irq);
#endif
	}
#endif
}
