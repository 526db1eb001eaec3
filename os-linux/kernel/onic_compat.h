/* SPDX-License-Identifier: GPL-2.0 */
/*
 * onic: the differences between the kernels the module builds against (Debian's 6.1 and 6.12,
 * and what lies between). Everything version-dependent is here or next to an #if on one of
 * these macros in the C glue; the Rust side is the same for every kernel.
 */
#ifndef ONIC_COMPAT_H
#define ONIC_COMPAT_H

#include <linux/version.h>
#include <linux/hrtimer.h>
#include <linux/ethtool.h>
#include <linux/netdevice.h>

/* devlink's info_get must name the driver itself before 6.2 (devlink_info_driver_name_put);
 * from 6.2 the core does, and the helper is gone. */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0)
#define ONIC_HAVE_DEVLINK_DRIVER_NAME_PUT 1
#endif

/* ethtool get/set_rxfh take a struct ethtool_rxfh_param since 6.8. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 8, 0)
#define ONIC_HAVE_RXFH_PARAM 1
#endif

/* net_device.xdp_features and xdp_metadata_ops (the RX-metadata kfuncs; the hash callback
 * with its type argument) exist since 6.3. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
#define ONIC_HAVE_XDP_FEATURES 1
#define ONIC_HAVE_XDP_METADATA 1
#endif

/* The standard statistic groups (ethtool_eth_mac_stats, ..., ethtool_pause_stats) carry the
 * MAC they describe (.src: the aggregate, the express or the preemptible MAC of a MAC merge
 * layer) since 6.3; a driver without a MAC merge layer only reports the aggregate. Before, every
 * request is for the one MAC. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
#define onic_stats_src_is_aggregate(s) ((s)->src == ETHTOOL_MAC_STATS_SRC_AGGREGATE)
#else
#define onic_stats_src_is_aggregate(s) true
#endif

/* page_pool_params.napi (the one NAPI that consumes the pool's pages: a page freed in softirq
 * on the CPU that NAPI is scheduled on goes straight back to the pool's lockless cache, not
 * through the ptr_ring) exists since 6.5, but only since 6.8 does page_pool_destroy unbind the
 * NAPI; before that a page freed after the netdev (and the NAPI in it) was gone would read the
 * freed NAPI. So the pool is bound from 6.8, where .netdev (the pool listed under its netdev in
 * netlink) also exists. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 8, 0)
#define ONIC_HAVE_PP_NAPI 1
#endif

/* The netdev netlink family's queue objects: netif_queue_set_napi (which NAPI serves a queue)
 * since 6.8, the per-queue statistics (netdev_stat_ops, qstats-get) since 6.10. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 8, 0)
#define ONIC_HAVE_QUEUE_NAPI 1
#endif
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
#define ONIC_HAVE_QUEUE_STATS 1
#endif

/* netif_napi_set_irq (the netdev netlink family's napi-get shows each NAPI's IRQ) since 6.8,
 * with netif_queue_set_napi. The DIM library (linux/dim.h: net_dim taking its sample by value,
 * dim_update_sample, struct dim with its work item) is the same in 6.1 and 6.12. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 8, 0)
#define ONIC_HAVE_NAPI_IRQ 1
#endif

/* The page_pool header was split into types and helpers in 6.6. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 6, 0)
#include <net/page_pool/helpers.h>
#else
#include <net/page_pool.h>
#endif

/* The lockless queue stop/wake helpers: netif_txq_maybe_stop in both kernels (Debian's 6.1 has
 * the backport); the BQL-reporting wake is __netif_txq_completed_wake in 6.12, and the older
 * __netif_txq_maybe_wake (wake threshold exclusive) after netdev_tx_completed_queue in 6.1.
 * down_cond: the interface is going down, the queue must stay stopped. */
#include <net/netdev_queues.h>
#ifdef netif_txq_completed_wake
#define onic_txq_completed_wake(txq, pkts, bytes, get_desc, start_thrs, down_cond)	\
	__netif_txq_completed_wake(txq, pkts, bytes, get_desc, start_thrs, down_cond)
#else
#define onic_txq_completed_wake(txq, pkts, bytes, get_desc, start_thrs, down_cond)	\
	({									\
		netdev_tx_completed_queue(txq, pkts, bytes);			\
		(pkts) ? __netif_txq_maybe_wake(txq, get_desc, (start_thrs) - 1, down_cond) : -1; \
	})
#endif

/* netif_napi_add lost its weight argument in 6.1. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 1, 0)
#define onic_napi_add(dev, napi, poll) netif_napi_add(dev, napi, poll)
#else
#define onic_napi_add(dev, napi, poll) netif_napi_add(dev, napi, poll, NAPI_POLL_WEIGHT)
#endif

/* hrtimer_setup replaced hrtimer_init + assigning .function in 6.13. */
static inline void onic_hrtimer_setup(struct hrtimer *t, enum hrtimer_restart (*fn)(struct hrtimer *),
				      clockid_t clock, enum hrtimer_mode mode)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
	hrtimer_setup(t, fn, clock, mode);
#else
	hrtimer_init(t, clock, mode);
	t->function = fn;
#endif
}

#endif
