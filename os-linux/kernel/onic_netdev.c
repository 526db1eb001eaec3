// SPDX-License-Identifier: GPL-2.0
/*
 * onic: the net_device, its NAPI instances, net_device_ops and ethtool_ops. Every callback is a
 * trampoline into the Rust side (onic_rs_*) plus the kernel bookkeeping only C can do (queue
 * stop/wake, NAPI scheduling and completion, skb handling). The serialization each Rust call
 * relies on is named at the call.
 */
#include <linux/bpf.h>
#include <linux/etherdevice.h>
#include <linux/ethtool.h>
#include <linux/filter.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/random.h>
#include <linux/rtnetlink.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <net/xdp.h>

#include "onic_compat.h"
#include "onic_glue.h"

static struct onic_ndev *nd_of(struct net_device *netdev)
{
	return netdev_priv(netdev);
}

bool onic_xdp = true;
module_param_named(xdp, onic_xdp, bool, 0444);
MODULE_PARM_DESC(xdp, "Native XDP (ndo_bpf, ndo_xdp_xmit; default on); 0: generic XDP only");

/* ---------------------------------------------------------------- recovery */

/* A ring of queue q found the device's view of it impossible or stalled (the core's error
 * state): the queue asks for nothing more until a restart, which needs process context. */
static void onic_queue_failed(struct onic_ndev *nd, u16 q, bool rx, const char *why)
{
	if (READ_ONCE(nd->removing))
		return;
	if (!test_bit(q, &nd->failed)) {
		WRITE_ONCE(nd->failed_why[q], why);
		if (rx)
			set_bit(q, &nd->failed_rx);
	}
	if (!test_and_set_bit(q, &nd->failed)) {
		netdev_err(nd->netdev, "queue %u: %s; restarting the queue\n", q, why);
		schedule_work(&nd->reset_work);
	}
}

/* ---------------------------------------------------------------- NAPI */

/* Reclaims queue q's stack TX ring under its TX lock (the only other user is ndo_start_xmit):
 * BQL completion and the race-free wake pattern. Returns whether frames are still in flight.
 * An idle ring is skipped without the lock: a transmit this poll does not see yet has armed the
 * timer after marking the ring, so a poll that does see the mark follows (locking rules). */
static bool onic_poll_stack_tx(struct onic_qv *qv, int budget)
{
	struct onic_ndev *nd = qv->nd;
	u16 q = qv->qid;
	struct netdev_queue *txq = netdev_get_tx_queue(nd->netdev, q);
	struct onic_tx_clean c;

	if (!READ_ONCE(qv->stack_busy))
		return false;
	/* Netpoll (budget 0) may run while this CPU holds the lock already, in transmit. */
	if (!budget) {
		if (!__netif_tx_trylock(txq))
			return true;
	} else {
		__netif_tx_lock(txq, smp_processor_id());
	}
	onic_rs_tx_clean(nd->port, q, budget, &c);
	onic_txq_completed_wake(txq, c.packets, c.bytes, onic_rs_tx_free(nd->port, q), c.wake_at,
				READ_ONCE(nd->down));
	if (!c.in_flight)
		WRITE_ONCE(qv->stack_busy, false);
	__netif_tx_unlock(txq);
	if (c.error)
		onic_queue_failed(nd, q, false, "TX ring error");
	return c.in_flight > 0;
}

/* NAPI: one poll of queue index q, in softirq (or busy polling or threaded NAPI with bottom halves
 * off, or netpoll with interrupts off: the Rust side sees it may not sleep, onic_ctx.c). Locks
 * are held only around the two reclaims, never while frames go to the stack, to a redirect
 * target or through xdp_do_flush (os-linux/README.md). */
static int onic_poll(struct napi_struct *napi, int budget)
{
	struct onic_qv *qv = container_of(napi, struct onic_qv, napi);
	struct onic_ndev *nd = qv->nd;
	struct onic_poll_result r;
	struct onic_tx_clean xc;
	bool pending, again;

	pending = onic_poll_stack_tx(qv, budget);
	if (!budget)
		return 0;
	if (READ_ONCE(qv->xmit_busy)) {
		spin_lock(&qv->xmit_lock);
		onic_rs_xmit_clean(nd->port, qv->qid, &xc);
		if (!xc.in_flight)
			WRITE_ONCE(qv->xmit_busy, false);
		spin_unlock(&qv->xmit_lock);
		pending |= xc.in_flight > 0;
		if (xc.error)
			onic_queue_failed(nd, qv->qid, false, "redirect-in ring error");
	}
	/* The program stays alive for this poll even if ndo_bpf swaps it meanwhile (the old one is
	 * freed after a grace period). NAPI's disabled bottom halves would hold that grace period
	 * off too, but the read-side section is said explicitly so that PROVE_RCU can check it; the
	 * redirects' flush belongs to the same section. */
	rcu_read_lock();
	onic_rs_poll(nd->port, qv->qid, budget, napi, rcu_dereference(nd->xdp_prog), &r);
	if (r.redirected)
		xdp_do_flush();
	rcu_read_unlock();
	/* Calls out only for a queue with an XSK pool (or a fill-empty mark left to clear). */
	again = (READ_ONCE(qv->xsk_pool) || qv->xsk_fill_empty) && onic_xsk_poll_end(qv);
	if (r.error)
		onic_queue_failed(nd, qv->qid, true, "RX or XDP_TX ring error");
	pending |= r.tx_pending;
	if (r.done < budget && !r.more && !again) {
		/* DIM's sample: only for an adaptive queue, or one that just stopped being. */
		if (r.adaptive || qv->dim_on)
			onic_dim_sample(qv, &r);
		if (napi_complete_done(napi, r.done) && pending)
			onic_tx_timer_arm(qv);
		return r.done;
	}
	return budget;
}

/* ---------------------------------------------------------------- link */

#define ONIC_LINK_POLL (HZ / 2)

/* Carrier follows the CMAC's link state (hardware.md §10.3), read every half second while the
 * interface is up (the shell raises no link interrupt the driver uses). */
static void onic_link_work(struct work_struct *w)
{
	struct onic_ndev *nd = container_of(to_delayed_work(w), struct onic_ndev, link_work);
	struct net_device *netdev = nd->netdev;
	bool up = onic_rs_link_up(nd->port);

	if (up && !netif_carrier_ok(netdev)) {
		netif_carrier_on(netdev);
		netdev_info(netdev, "link up, 100 Gb/s\n");
	} else if (!up && netif_carrier_ok(netdev)) {
		netif_carrier_off(netdev);
		netdev_info(netdev, "link down\n");
	}
	schedule_delayed_work(&nd->link_work, ONIC_LINK_POLL);
}

/* ---------------------------------------------------------------- net_device_ops */

/* A teardown whose invalidations did not complete cut the function off from memory (bus
 * mastering off, onic_dma_cut_off) before its pages went back: the card may still hold live
 * contexts naming them. It may reach memory again only once every queue context of the function
 * is invalidated; until the card completes that, the interface cannot come up. */
static int onic_dma_back_on(struct onic_ndev *nd)
{
	struct pci_dev *pdev;
	int err;

	if (!nd->dma_dev || !dev_is_pci(nd->dma_dev))
		return 0;
	pdev = to_pci_dev(nd->dma_dev);
	if (pdev->is_busmaster)
		return 0;
	err = onic_rs_invalidate_all_queues(nd->port);
	if (err) {
		netdev_err(nd->netdev, "the card still does not complete context commands (%d): its DMA stays off\n", err);
		return -EIO;
	}
	pci_set_master(pdev);
	netdev_info(nd->netdev, "every queue context invalidated: the card's DMA is on again\n");
	return 0;
}

static int onic_open(struct net_device *netdev)
{
	struct onic_ndev *nd = nd_of(netdev);
	u16 q, n = netdev->real_num_rx_queues;
	int err;

	/* RTNL held, NAPI disabled, TX not started. */
	err = onic_dma_back_on(nd);
	if (err)
		return err;
	err = onic_rs_open(nd->port);
	if (err)
		return err;
	/* Fresh rings: restarts asked for the old ones are moot. */
	nd->failed = 0;
	nd->failed_rx = 0;
	nd->open_queues = n;
	for (q = 0; q < n; q++) {
		netdev_tx_reset_queue(netdev_get_tx_queue(netdev, q));
		napi_enable(&nd->qv[q].napi);
	}
	onic_queues_set_napi(nd, n, true);
	WRITE_ONCE(nd->down, false);
	netif_tx_start_all_queues(netdev);
	WRITE_ONCE(nd->xdp_xmit_ready, true);
	/* The first link check now: carrier is set before open returns if the link is up. */
	netif_carrier_off(netdev);
	mod_delayed_work(system_wq, &nd->link_work, 0);
	/* An interrupt raised before napi_enable found NAPI disabled and was lost, while the
	 * device's arm was consumed: poll every queue once, which re-arms it. */
	for (q = 0; q < n; q++) {
		local_bh_disable();
		napi_schedule(&nd->qv[q].napi);
		local_bh_enable();
	}
	return 0;
}

static int onic_stop(struct net_device *netdev)
{
	struct onic_ndev *nd = nd_of(netdev);
	u16 q;

	/* The link work takes no lock the caller holds (RTNL), so waiting for it is safe. */
	cancel_delayed_work_sync(&nd->link_work);
	netif_carrier_off(netdev);
	/* Other devices' redirects (ndo_xdp_xmit) run in their NAPI polls, under RCU: after the
	 * grace period none can reach the queues any more. */
	WRITE_ONCE(nd->xdp_xmit_ready, false);
	synchronize_net();
	/* A NAPI poll still running may reclaim and would wake a queue netif_tx_disable just
	 * stopped, letting transmit reach rings that are being torn down (and BQL count frames
	 * its reset then forgets). The flag is read under the same TX lock netif_tx_disable
	 * takes, so every wake after that sees it. */
	WRITE_ONCE(nd->down, true);
	netif_tx_disable(netdev);
	for (q = 0; q < nd->open_queues; q++) {
		napi_disable(&nd->qv[q].napi);
		onic_tx_timer_cancel(&nd->qv[q]);
		onic_dim_cancel(&nd->qv[q]);
	}
	/* RTNL held, NAPI disabled, TX stopped, timers stopped. */
	onic_rs_stop(nd->port);
	for (q = 0; q < nd->open_queues; q++)
		netdev_tx_reset_queue(netdev_get_tx_queue(netdev, q));
	onic_queues_set_napi(nd, nd->open_queues, false);
	nd->open_queues = 0;
	return 0;
}

/* Transmit: the TX queue's lock held, bottom halves off (or netpoll, interrupts off): the Rust
 * side sees it may not sleep (onic_ctx.c). */
static netdev_tx_t onic_start_xmit(struct sk_buff *skb, struct net_device *netdev)
{
	struct onic_ndev *nd = nd_of(netdev);
	u16 q = skb_get_queue_mapping(skb);
	struct netdev_queue *txq = netdev_get_tx_queue(netdev, q);
	struct onic_tx_clean c;
	unsigned int len;
	int r;

	/* One H2C descriptor per frame (hardware.md §7.1): linear data, at least ETH_ZLEN bytes (the MAC
	 * appends the FCS). skb_put_padto frees the skb when it fails. */
	if (skb_put_padto(skb, ETH_ZLEN)) {
		dev_core_stats_tx_dropped_inc(netdev);
		return NETDEV_TX_OK;
	}
	if (skb_linearize(skb)) {
		dev_core_stats_tx_dropped_inc(netdev);
		dev_kfree_skb_any(skb);
		return NETDEV_TX_OK;
	}
	len = skb->len;
	/* The core holds this TX queue's lock: the stack TX ring is ours. The Rust side reclaims
	 * first (its counts complete BQL), then queues without a doorbell. */
	r = onic_rs_xmit(nd->port, q, skb, &c);
	onic_txq_completed_wake(txq, c.packets, c.bytes, c.free, c.wake_at, READ_ONCE(nd->down));
	if (c.error)
		onic_queue_failed(nd, q, false, "TX ring error");
	switch (r) {
	case ONIC_XMIT_OK:
	case ONIC_XMIT_OK_STOP:
		/* Marked before the timer is armed (a fully ordered test_and_set_bit): the poll the
		 * timer brings sees the mark. */
		WRITE_ONCE(nd->qv[q].stack_busy, true);
		/* BQL decides, with xmit_more, whether this is the end of a batch. */
		if (__netdev_tx_sent_queue(txq, len, netdev_xmit_more()))
			onic_rs_tx_flush(nd->port, q);
		netif_txq_maybe_stop(txq, onic_rs_tx_free(nd->port, q), 1, c.wake_at);
		onic_tx_timer_arm(&nd->qv[q]);
		return NETDEV_TX_OK;
	case ONIC_XMIT_BUSY:
		/* Not reached while the stop above works; kept as the kernel's contract. */
		WRITE_ONCE(nd->qv[q].stack_busy, true);
		onic_rs_tx_flush(nd->port, q);
		netif_tx_stop_queue(txq);
		onic_tx_timer_arm(&nd->qv[q]);
		return NETDEV_TX_BUSY;
	default:
		/* Not queued (mapping failed, bad length, queue down): the kernel's per-CPU core
		 * counter, which get_stats64 readers see added to the driver's. */
		dev_core_stats_tx_dropped_inc(netdev);
		dev_kfree_skb_any(skb);
		return NETDEV_TX_OK;
	}
}

/* The watchdog found TX queue q stopped for watchdog_timeo: report the ring and restart the
 * queue from process context (the watchdog holds every TX lock, in softirq context). */
static void onic_tx_timeout(struct net_device *netdev, unsigned int q)
{
	struct onic_ndev *nd = nd_of(netdev);
	struct onic_tx_state st;

	onic_atomic_enter();
	onic_rs_tx_state(nd->port, q, &st);
	onic_atomic_exit();
	netdev_err(netdev,
		   "TX queue %u timed out: %u in flight, %u free, next_to_clean %u next_to_use %u, device cidx %u%s\n",
		   q, st.in_flight, st.free, st.next_to_clean, st.next_to_use, st.device_cidx,
		   st.error ? ", ring in error" : "");
	onic_queue_failed(nd, q, false, "TX timeout");
}

/* Restarts queue q in place (RTNL held): its NAPI, its stack TX queue and its redirect-in ring
 * are quiesced, the core's restarts return every buffer and page and program the contexts
 * again, then the queue runs again. Should the device refuse, the whole interface is restarted,
 * and closed if even that fails. */
void onic_restart_queue(struct onic_ndev *nd, u16 q)
{
	struct net_device *netdev = nd->netdev;
	int err;

	onic_queue_quiesce(nd, q);
	err = onic_rs_restart_queue(nd->port, q);
	onic_queue_resume(nd, q, true);
	if (!err) {
		netdev_info(netdev, "queue %u restarted\n", q);
		return;
	}
	netdev_err(netdev, "queue %u: restart failed (%d); restarting the interface\n", q, err);
	onic_stop(netdev);
	err = onic_open(netdev);
	if (err) {
		netdev_err(netdev, "interface restart failed: %d\n", err);
		dev_close(netdev);
	}
}

/* Each failed queue is reported first to whoever registered as the netdev's failure reporter
 * (devlink's tx or rx reporter, onic_devlink.c), without RTNL (devlink takes its instance lock,
 * then the reporter's callbacks RTNL): its dump records the queue, its recover restarts it.
 * Should nobody recover it (no devlink, auto-recovery off, or aborted because the reporter is
 * still in error), the queue is restarted here all the same. */
static void onic_reset_work(struct work_struct *w)
{
	struct onic_ndev *nd = container_of(w, struct onic_ndev, reset_work);
	u16 q;

	for (q = 0; q < nd->max_queues; q++) {
		onic_failure_report_fn report;
		bool rx;

		if (!test_and_clear_bit(q, &nd->failed))
			continue;
		rx = test_and_clear_bit(q, &nd->failed_rx);
		report = smp_load_acquire(&nd->report_failure);
		if (report && report(nd, q, rx, READ_ONCE(nd->failed_why[q])))
			continue;
		rtnl_lock();
		/* A queue that stop/open replaced meanwhile starts fresh. */
		if (netif_running(nd->netdev) && q < nd->open_queues)
			onic_restart_queue(nd, q);
		rtnl_unlock();
	}
}

/* XDP_SETUP_PROG: attach, detach or swap a program without touching the queues: the next poll
 * of each queue runs whichever program it finds (hardware.md §12.5; the reference driver resets the
 * interface when the first program comes or the last one goes). The kernel's reference moves
 * into the netdev; the one replaced is dropped after the polls that may still run it. */
static int onic_bpf(struct net_device *netdev, struct netdev_bpf *bpf)
{
	struct onic_ndev *nd = nd_of(netdev);
	struct bpf_prog *old;

	switch (bpf->command) {
	case XDP_SETUP_PROG:
		/* RTNL held. Every frame fits one page (MTU at most 1500), so any MTU works. */
		old = rcu_replace_pointer(nd->xdp_prog, bpf->prog, lockdep_rtnl_is_held());
		if (old)
			bpf_prog_put(old);
		return 0;
	case XDP_SETUP_XSK_POOL:
		/* RTNL held: zero copy on one queue index (onic_zc.c). */
		return onic_xsk_pool_setup(nd, bpf->xsk.pool, bpf->xsk.queue_id, bpf->extack);
	default:
		return -EINVAL;
	}
}

/* ndo_xdp_xmit: frames other devices (or this one) redirected here. The kernel's contract: the
 * return value is how many of frames[] were taken, the rest stay the caller's to free. They go
 * on the redirect-in ring of queue index cpu % queues, under its xmit lock, never on the stack's
 * rings; the queue's NAPI is kicked to reclaim them. May run inside this port's own NAPI poll
 * (a redirect to self flushed from xdp_do_redirect), which holds no lock at that point. */
static int onic_xdp_xmit(struct net_device *netdev, int n, struct xdp_frame **frames, u32 flags)
{
	struct onic_ndev *nd = nd_of(netdev);
	struct onic_qv *qv;
	u16 nq;
	int sent;

	if (unlikely(flags & ~XDP_XMIT_FLAGS_MASK))
		return -EINVAL;
	nq = READ_ONCE(nd->open_queues);
	if (!READ_ONCE(nd->xdp_xmit_ready) || !nq)
		return -ENETDOWN;
	qv = &nd->qv[smp_processor_id() % nq];
	spin_lock(&qv->xmit_lock);
	/* A restart of the queue owns the ring: the frames stay the caller's. */
	onic_atomic_enter();
	sent = READ_ONCE(qv->quiet) ? -ENETDOWN
				   : onic_rs_xdp_xmit(nd->port, qv->qid, frames, n, flags & XDP_XMIT_FLUSH);
	onic_atomic_exit();
	/* Marked before the kick (napi_schedule's fully ordered state change): the poll it brings
	 * sees the mark. */
	if (sent > 0)
		WRITE_ONCE(qv->xmit_busy, true);
	spin_unlock(&qv->xmit_lock);
	if (sent > 0)
		napi_schedule(&qv->napi);
	return sent;
}

static void onic_get_stats64(struct net_device *netdev, struct rtnl_link_stats64 *s)
{
	struct onic_link_stats ls;

	/* May be called under RCU or a spinlock (dev_get_stats). */
	onic_atomic_enter();
	onic_rs_stats64(nd_of(netdev)->port, &ls);
	onic_atomic_exit();
	s->rx_packets = ls.rx_packets;
	s->rx_bytes = ls.rx_bytes;
	s->rx_dropped = ls.rx_dropped;
	s->rx_errors = ls.rx_errors;
	s->tx_packets = ls.tx_packets;
	s->tx_bytes = ls.tx_bytes;
	s->tx_dropped = ls.tx_dropped;
	s->tx_errors = ls.tx_errors;
	s->rx_missed_errors = ls.rx_missed_errors;
}

static int onic_change_mtu(struct net_device *netdev, int mtu)
{
	int err;

	if (mtu < 0)
		return -EINVAL;
	err = onic_rs_change_mtu(nd_of(netdev)->port, mtu);
	if (err)
		return err;
	WRITE_ONCE(netdev->mtu, mtu);
	return 0;
}

/* -K (RTNL): the CMAC's near-end loopback follows NETIF_F_LOOPBACK; the packets' hash (and the
 * RX-metadata hash programs read) follows NETIF_F_RXHASH. */
static int onic_set_features(struct net_device *netdev, netdev_features_t features)
{
	netdev_features_t changed = netdev->features ^ features;
	void *port = nd_of(netdev)->port;
	int err;

	if (changed & NETIF_F_LOOPBACK) {
		err = onic_rs_set_loopback(port, !!(features & NETIF_F_LOOPBACK));
		if (err)
			return err;
	}
	if (changed & NETIF_F_RXHASH)
		return onic_rs_set_rx_hash(port, !!(features & NETIF_F_RXHASH));
	return 0;
}

#define ONIC_NETDEV_OPS							\
	.ndo_open = onic_open,							\
	.ndo_set_features = onic_set_features,					\
	.ndo_stop = onic_stop,							\
	.ndo_start_xmit = onic_start_xmit,					\
	.ndo_tx_timeout = onic_tx_timeout,					\
	.ndo_get_stats64 = onic_get_stats64,					\
	.ndo_change_mtu = onic_change_mtu,					\
	/* The shell has no MAC filter (hardware.md §13.1): the address lives in the netdev only. */ \
	.ndo_set_mac_address = eth_mac_addr,					\
	.ndo_validate_addr = eth_validate_addr

static const struct net_device_ops onic_netdev_ops = {
	ONIC_NETDEV_OPS,
	.ndo_bpf = onic_bpf,
	.ndo_xdp_xmit = onic_xdp_xmit,
	.ndo_xsk_wakeup = onic_xsk_wakeup,
};

/* xdp=0: no native XDP at all (only the kernel's generic XDP), for comparisons. */
static const struct net_device_ops onic_netdev_ops_no_xdp = {
	ONIC_NETDEV_OPS,
};

/* ---------------------------------------------------------------- ethtool_ops */

static void onic_get_drvinfo(struct net_device *netdev, struct ethtool_drvinfo *info)
{
	struct device *parent = netdev->dev.parent;

	strscpy(info->driver, ONIC_DRV_NAME, sizeof(info->driver));
	strscpy(info->bus_info, parent ? dev_name(parent) : "sim", sizeof(info->bus_info));
}

static u32 onic_get_link(struct net_device *netdev)
{
	return onic_rs_link_up(nd_of(netdev)->port);
}

static int onic_get_link_ksettings(struct net_device *netdev, struct ethtool_link_ksettings *ks)
{
	/* The CMAC runs 100GBASE-R4 over a QSFP28 cage; no autonegotiation (hardware.md §10). */
	ethtool_link_ksettings_zero_link_mode(ks, supported);
	ethtool_link_ksettings_add_link_mode(ks, supported, 100000baseCR4_Full);
	ethtool_link_ksettings_add_link_mode(ks, supported, FIBRE);
	ethtool_link_ksettings_zero_link_mode(ks, advertising);
	ks->base.port = PORT_FIBRE;
	ks->base.autoneg = AUTONEG_DISABLE;
	if (netif_running(netdev) && netif_carrier_ok(netdev)) {
		ks->base.speed = SPEED_100000;
		ks->base.duplex = DUPLEX_FULL;
	} else {
		ks->base.speed = SPEED_UNKNOWN;
		ks->base.duplex = DUPLEX_UNKNOWN;
	}
	return 0;
}

static int onic_get_sset_count(struct net_device *netdev, int sset)
{
	return onic_rs_sset_count(nd_of(netdev)->port, sset);
}

static void onic_get_strings(struct net_device *netdev, u32 sset, u8 *buf)
{
	onic_rs_get_strings(nd_of(netdev)->port, sset, buf);
}

static void onic_get_ethtool_stats(struct net_device *netdev, struct ethtool_stats *stats, u64 *data)
{
	onic_rs_get_stats(nd_of(netdev)->port, data, stats->n_stats);
}

/* The standard statistic groups: the Rust side reads the CMAC once per call (one TICK) and fills
 * every group; each callback copies its own. A counter the CMAC does not have arrives as
 * ONIC_STAT_NOT_SET, which is the kernel's "not reported" (ETHTOOL_STAT_NOT_SET), so a field is
 * copied as it is. */
static_assert(ONIC_STAT_NOT_SET == ETHTOOL_STAT_NOT_SET);
static_assert(ONIC_RMON_HIST == ETHTOOL_RMON_HIST_MAX);
static_assert(sizeof(struct onic_rmon_range) == sizeof(struct ethtool_rmon_hist_range));
static_assert(offsetof(struct onic_rmon_range, low) == offsetof(struct ethtool_rmon_hist_range, low));
static_assert(offsetof(struct onic_rmon_range, high) == offsetof(struct ethtool_rmon_hist_range, high));

static bool onic_mac_groups(struct net_device *netdev, struct onic_mac_groups *g)
{
	return onic_rs_mac_groups(nd_of(netdev)->port, g) == 0;
}

static void onic_get_eth_mac_stats(struct net_device *netdev, struct ethtool_eth_mac_stats *s)
{
	struct onic_mac_groups g;

	if (!onic_stats_src_is_aggregate(s) || !onic_mac_groups(netdev, &g))
		return;
	s->FramesTransmittedOK = g.frames_transmitted_ok;
	s->FramesReceivedOK = g.frames_received_ok;
	s->FrameCheckSequenceErrors = g.frame_check_sequence_errors;
	s->OctetsTransmittedOK = g.octets_transmitted_ok;
	s->OctetsReceivedOK = g.octets_received_ok;
	s->MulticastFramesXmittedOK = g.multicast_frames_xmitted_ok;
	s->BroadcastFramesXmittedOK = g.broadcast_frames_xmitted_ok;
	s->MulticastFramesReceivedOK = g.multicast_frames_received_ok;
	s->BroadcastFramesReceivedOK = g.broadcast_frames_received_ok;
	s->InRangeLengthErrors = g.in_range_length_errors;
	s->FrameTooLongErrors = g.frame_too_long_errors;
}

static void onic_get_eth_phy_stats(struct net_device *netdev, struct ethtool_eth_phy_stats *s)
{
	struct onic_mac_groups g;

	if (!onic_stats_src_is_aggregate(s) || !onic_mac_groups(netdev, &g))
		return;
	s->SymbolErrorDuringCarrier = g.symbol_error_during_carrier;
}

static void onic_get_eth_ctrl_stats(struct net_device *netdev, struct ethtool_eth_ctrl_stats *s)
{
	struct onic_mac_groups g;

	if (!onic_stats_src_is_aggregate(s) || !onic_mac_groups(netdev, &g))
		return;
	s->MACControlFramesTransmitted = g.mac_control_frames_transmitted;
	s->MACControlFramesReceived = g.mac_control_frames_received;
}

static void onic_get_rmon_stats(struct net_device *netdev, struct ethtool_rmon_stats *s,
				const struct ethtool_rmon_hist_range **ranges)
{
	struct onic_mac_groups g;
	int i;

	if (!onic_stats_src_is_aggregate(s) || !onic_mac_groups(netdev, &g))
		return;
	s->undersize_pkts = g.undersize_pkts;
	s->oversize_pkts = g.oversize_pkts;
	s->fragments = g.fragments;
	s->jabbers = g.jabbers;
	for (i = 0; i < ONIC_RMON_HIST; i++) {
		s->hist[i] = g.hist[i];
		s->hist_tx[i] = g.hist_tx[i];
	}
	*ranges = (const struct ethtool_rmon_hist_range *)onic_rs_rmon_ranges;
}

static void onic_get_pause_stats(struct net_device *netdev, struct ethtool_pause_stats *s)
{
	struct onic_mac_groups g;

	if (!onic_stats_src_is_aggregate(s) || !onic_mac_groups(netdev, &g))
		return;
	s->tx_pause_frames = g.tx_pause_frames;
	s->rx_pause_frames = g.rx_pause_frames;
}

/* Pause as the CMAC is configured (global pause enables, hardware.md §10.2); no autonegotiation,
 * and no set_pauseparam: the enables are the shell's bring-up values. */
static void onic_get_pauseparam(struct net_device *netdev, struct ethtool_pauseparam *p)
{
	bool rx = false, tx = false;

	if (onic_rs_pause_params(nd_of(netdev)->port, &rx, &tx))
		return;
	p->autoneg = AUTONEG_DISABLE;
	p->rx_pause = rx;
	p->tx_pause = tx;
}

/* FEC (RTNL): RS-FEC on or off on the port's CMAC, auto = RS (the Rust side's FecMode). The
 * other end must run the same or the link stays down. */
static int onic_get_fecparam(struct net_device *netdev, struct ethtool_fecparam *fp)
{
	u32 configured, active;
	int err = onic_rs_get_fec(nd_of(netdev)->port, &configured, &active);

	if (err)
		return err;
	fp->fec = configured;
	fp->active_fec = active;
	return 0;
}

static int onic_set_fecparam(struct net_device *netdev, struct ethtool_fecparam *fp)
{
	return onic_rs_set_fec(nd_of(netdev)->port, fp->fec);
}

/* The RS-FEC decoder's codeword counters (one TICK); no per-lane split, no bit count: the
 * kernel leaves those at ETHTOOL_STAT_NOT_SET. */
static void onic_get_fec_stats(struct net_device *netdev, struct ethtool_fec_stats *s)
{
	u64 corrected, uncorrectable;

	if (onic_rs_fec_stats(nd_of(netdev)->port, &corrected, &uncorrectable))
		return;
	s->corrected_blocks.total = corrected;
	s->uncorrectable_blocks.total = uncorrectable;
}

/* ---- ethtool -t. The register test (online) is the Rust side's. The loopback test (offline)
 * puts the CMAC in near-end loopback, sends ONIC_LB_FRAMES frames of the core's format out of
 * the stack's TX path and waits for each to come back through RX, NAPI and the stack to a
 * packet handler bound to this netdev and the test's EtherType, which checks them byte for byte
 * (the Rust side's onic_rs_lb_seq). While it runs nothing leaves the port and nothing from the
 * line arrives; the loopback setting is put back afterwards. */
#define ONIC_LB_FRAMES 8
#define ONIC_LB_TIMEOUT_MS 5000

struct onic_lb {
	struct packet_type pt;
	unsigned long seen;	/* bit i: frame i came back */
	atomic_t bad;		/* frames of the test's EtherType that were not one of ours */
	struct completion all;
};

/* Packet handler (NAPI context of the receiving queue). */
static int onic_lb_rcv(struct sk_buff *skb, struct net_device *dev, struct packet_type *pt,
		       struct net_device *orig)
{
	struct onic_lb *lb = container_of(pt, struct onic_lb, pt);
	s64 seq = -1;

	if (!skb_linearize(skb) && skb_mac_header_was_set(skb))
		seq = onic_rs_lb_seq(dev->dev_addr, skb_mac_header(skb),
				     skb->len + (skb->data - skb_mac_header(skb)));
	if (seq >= 0 && seq < ONIC_LB_FRAMES && !test_and_set_bit(seq, &lb->seen)) {
		if (bitmap_weight(&lb->seen, ONIC_LB_FRAMES) == ONIC_LB_FRAMES)
			complete(&lb->all);
	} else {
		atomic_inc(&lb->bad);
	}
	consume_skb(skb);
	return NET_RX_SUCCESS;
}

/* Returns 0 for a pass, else the number of frames that did not come back intact (or an errno
 * for a test that could not run). RTNL held (ethtool). */
static u64 onic_lb_test(struct onic_ndev *nd)
{
	struct net_device *netdev = nd->netdev;
	bool was = onic_rs_loopback(nd->port);
	struct onic_lb *lb;
	u64 missing;
	u32 i;
	int err;

	if (!netif_running(netdev))
		return ENETDOWN;
	lb = kzalloc(sizeof(*lb), GFP_KERNEL);
	if (!lb)
		return ENOMEM;
	init_completion(&lb->all);
	lb->pt.type = htons(ONIC_LB_ETHERTYPE);
	lb->pt.dev = netdev;
	lb->pt.func = onic_lb_rcv;
	err = onic_rs_set_loopback(nd->port, true);
	if (err) {
		kfree(lb);
		return -err;
	}
	dev_add_pack(&lb->pt);
	for (i = 0; i < ONIC_LB_FRAMES; i++) {
		struct sk_buff *skb = alloc_skb(ONIC_LB_FRAME_LEN, GFP_KERNEL);

		if (!skb)
			break;
		onic_rs_lb_frame(netdev->dev_addr, i, skb_put(skb, ONIC_LB_FRAME_LEN), ONIC_LB_FRAME_LEN);
		skb->dev = netdev;
		skb->protocol = htons(ONIC_LB_ETHERTYPE);
		skb_reset_mac_header(skb);
		skb_set_network_header(skb, ETH_HLEN);
		dev_queue_xmit(skb);
	}
	wait_for_completion_timeout(&lb->all, msecs_to_jiffies(ONIC_LB_TIMEOUT_MS));
	/* After this no handler runs any more (it waits for the readers), so lb can go. */
	dev_remove_pack(&lb->pt);
	onic_rs_set_loopback(nd->port, was);
	missing = ONIC_LB_FRAMES - bitmap_weight(&lb->seen, ONIC_LB_FRAMES);
	netdev_info(netdev, "loopback test: %u of %u frames back intact, %d others\n",
		    (unsigned int)(ONIC_LB_FRAMES - missing), ONIC_LB_FRAMES, atomic_read(&lb->bad));
	missing += atomic_read(&lb->bad);
	kfree(lb);
	return missing;
}

static void onic_self_test(struct net_device *netdev, struct ethtool_test *t, u64 *data)
{
	struct onic_ndev *nd = nd_of(netdev);
	int err;

	memset(data, 0, ONIC_SELF_TESTS * sizeof(*data));
	err = onic_rs_register_test(nd->port);
	data[ONIC_TEST_REGISTERS] = err ? -err : 0;
	if (t->flags & ETH_TEST_FL_OFFLINE)
		data[ONIC_TEST_LOOPBACK] = onic_lb_test(nd);
	if (data[ONIC_TEST_REGISTERS] || data[ONIC_TEST_LOOPBACK])
		t->flags |= ETH_TEST_FL_FAILED;
}

/* Interrupt moderation: RX only. The QDMA raises no TX completion interrupt (hardware.md §11.2;
 * TX is reclaimed by transmit, the poll and the tx_timer_us timer), so the kernel refuses the
 * tx-* parameters (supported_coalesce_params). adaptive-rx hands each RX queue to DIM
 * (onic_dim.c); rx-usecs and rx-frames stay the fixed setting that adaptive-rx off restores. */
static int onic_get_coalesce(struct net_device *netdev, struct ethtool_coalesce *ec,
			     struct kernel_ethtool_coalesce *kec, struct netlink_ext_ack *extack)
{
	u32 usecs, frames;
	bool adaptive;
	int err = onic_rs_get_coalesce(nd_of(netdev)->port, &usecs, &frames, &adaptive);

	if (err)
		return err;
	ec->rx_coalesce_usecs = usecs;
	ec->rx_max_coalesced_frames = frames;
	ec->use_adaptive_rx_coalesce = adaptive;
	return 0;
}

static int onic_set_coalesce(struct net_device *netdev, struct ethtool_coalesce *ec,
			     struct kernel_ethtool_coalesce *kec, struct netlink_ext_ack *extack)
{
	int err = onic_rs_set_coalesce(nd_of(netdev)->port, ec->rx_coalesce_usecs,
				       ec->rx_max_coalesced_frames, ec->use_adaptive_rx_coalesce);

	if (err)
		NL_SET_ERR_MSG_MOD(extack, "rx-usecs 0-20 and rx-frames 2-192 (the QDMA's completion timer and count tables)");
	return err;
}

static int onic_get_rxnfc(struct net_device *netdev, struct ethtool_rxnfc *cmd, u32 *rule_locs)
{
	switch (cmd->cmd) {
	case ETHTOOL_GRXRINGS:
		cmd->data = netdev->real_num_rx_queues;
		return 0;
	case ETHTOOL_GRXFH:
		cmd->data = onic_rs_rx_flow_hash(cmd->flow_type);
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

/* ethtool -N rx-flow-hash: the shell's hash input is fixed in the RTL, so only a request for
 * exactly the fields it hashes is accepted (the core's rule), anything else -EOPNOTSUPP. */
static int onic_set_rxnfc(struct net_device *netdev, struct ethtool_rxnfc *cmd)
{
	if (cmd->cmd != ETHTOOL_SRXFH)
		return -EOPNOTSUPP;
	return onic_rs_set_rx_flow_hash(cmd->flow_type, cmd->data);
}

static u32 onic_get_rxfh_indir_size(struct net_device *netdev)
{
	return 128; /* Rust port::RSS_INDIR_SIZE, hardware.md §9.1 */
}

static u32 onic_get_rxfh_key_size(struct net_device *netdev)
{
	return 40; /* Rust port::RSS_KEY_SIZE, hardware.md §9.1 */
}

#ifdef ONIC_HAVE_RXFH_PARAM
static int onic_get_rxfh(struct net_device *netdev, struct ethtool_rxfh_param *p)
{
	p->hfunc = ETH_RSS_HASH_TOP;
	onic_rs_rss_get(nd_of(netdev)->port, p->indir, p->key);
	return 0;
}

static int onic_set_rxfh(struct net_device *netdev, struct ethtool_rxfh_param *p,
			 struct netlink_ext_ack *extack)
{
	if (p->hfunc != ETH_RSS_HASH_NO_CHANGE && p->hfunc != ETH_RSS_HASH_TOP)
		return -EOPNOTSUPP;
	return onic_rs_rss_set(nd_of(netdev)->port, p->indir, p->key);
}
#else
static int onic_get_rxfh(struct net_device *netdev, u32 *indir, u8 *key, u8 *hfunc)
{
	if (hfunc)
		*hfunc = ETH_RSS_HASH_TOP;
	onic_rs_rss_get(nd_of(netdev)->port, indir, key);
	return 0;
}

static int onic_set_rxfh(struct net_device *netdev, const u32 *indir, const u8 *key, const u8 hfunc)
{
	if (hfunc != ETH_RSS_HASH_NO_CHANGE && hfunc != ETH_RSS_HASH_TOP)
		return -EOPNOTSUPP;
	return onic_rs_rss_set(nd_of(netdev)->port, indir, key);
}
#endif

/* Applies a new queue count / ring sizes: checked first (nothing changes on a bad value), then
 * the interface is stopped, reconfigured and opened again if it was running. */
static int onic_relayout(struct net_device *netdev, u32 queues, u32 tx_ring, u32 rx_ring)
{
	struct onic_ndev *nd = nd_of(netdev);
	bool running = netif_running(netdev);
	int err;

	/* A table the user did not set follows the queue count. The kernel says which it is:
	 * IFF_RXFH_CONFIGURED is clear before any -X and after `ethtool -X default`, which hands the
	 * driver the kernel's default spread as if it were a table of the user's. */
	if (!netif_is_rxfh_configured(netdev)) {
		err = onic_rs_rss_reset(nd->port);
		if (err)
			return err;
	}
	err = onic_rs_check_layout(nd->port, queues, tx_ring, rx_ring);
	if (err)
		return err;
	if (running)
		onic_stop(netdev);
	err = onic_rs_set_layout(nd->port, queues, tx_ring, rx_ring);
	if (!err) {
		netif_set_real_num_tx_queues(netdev, queues);
		netif_set_real_num_rx_queues(netdev, queues);
	}
	if (running) {
		int err2 = onic_open(netdev);

		if (err2) {
			netdev_err(netdev, "reopen after reconfiguration failed: %d\n", err2);
			dev_close(netdev);
			return err ? err : err2;
		}
	}
	return err;
}

static void onic_get_channels(struct net_device *netdev, struct ethtool_channels *ch)
{
	struct onic_layout l;

	onic_rs_get_layout(nd_of(netdev)->port, &l);
	ch->max_combined = l.max_queues;
	ch->combined_count = l.queues;
}

static int onic_set_channels(struct net_device *netdev, struct ethtool_channels *ch)
{
	struct onic_layout l;

	if (ch->rx_count || ch->tx_count || ch->other_count)
		return -EINVAL;
	onic_rs_get_layout(nd_of(netdev)->port, &l);
	return onic_relayout(netdev, ch->combined_count, l.tx_ring, l.rx_ring);
}

static void onic_get_ringparam(struct net_device *netdev, struct ethtool_ringparam *r,
			       struct kernel_ethtool_ringparam *kr, struct netlink_ext_ack *extack)
{
	struct onic_layout l;

	onic_rs_get_layout(nd_of(netdev)->port, &l);
	r->rx_max_pending = l.max_ring;
	r->tx_max_pending = l.max_ring;
	r->rx_pending = l.rx_ring;
	r->tx_pending = l.tx_ring;
}

static int onic_set_ringparam(struct net_device *netdev, struct ethtool_ringparam *r,
			      struct kernel_ethtool_ringparam *kr, struct netlink_ext_ack *extack)
{
	struct onic_layout l;

	if (r->rx_mini_pending || r->rx_jumbo_pending)
		return -EINVAL;
	onic_rs_get_layout(nd_of(netdev)->port, &l);
	return onic_relayout(netdev, l.queues, r->tx_pending, r->rx_pending);
}

static const struct ethtool_ops onic_ethtool_ops = {
	.supported_coalesce_params = ETHTOOL_COALESCE_RX_USECS | ETHTOOL_COALESCE_RX_MAX_FRAMES |
				     ETHTOOL_COALESCE_USE_ADAPTIVE_RX,
	.get_coalesce = onic_get_coalesce,
	.set_coalesce = onic_set_coalesce,
	.get_drvinfo = onic_get_drvinfo,
	.get_link = onic_get_link,
	.get_link_ksettings = onic_get_link_ksettings,
	.get_sset_count = onic_get_sset_count,
	.get_strings = onic_get_strings,
	.get_ethtool_stats = onic_get_ethtool_stats,
	.get_eth_mac_stats = onic_get_eth_mac_stats,
	.get_eth_phy_stats = onic_get_eth_phy_stats,
	.get_eth_ctrl_stats = onic_get_eth_ctrl_stats,
	.get_rmon_stats = onic_get_rmon_stats,
	.get_pause_stats = onic_get_pause_stats,
	.get_pauseparam = onic_get_pauseparam,
	.get_fecparam = onic_get_fecparam,
	.set_fecparam = onic_set_fecparam,
	.get_fec_stats = onic_get_fec_stats,
	.self_test = onic_self_test,
	.get_rxnfc = onic_get_rxnfc,
	.set_rxnfc = onic_set_rxnfc,
	.get_rxfh_indir_size = onic_get_rxfh_indir_size,
	.get_rxfh_key_size = onic_get_rxfh_key_size,
	.get_rxfh = onic_get_rxfh,
	.set_rxfh = onic_set_rxfh,
	.get_channels = onic_get_channels,
	.set_channels = onic_set_channels,
	.get_ringparam = onic_get_ringparam,
	.set_ringparam = onic_set_ringparam,
};

/* ---------------------------------------------------------------- lifetime */

struct onic_ndev *onic_ndev_alloc(struct device *parent, const char *name, u16 max_queues, u16 queues)
{
	struct net_device *netdev;
	struct onic_ndev *nd;
	u8 mac[ETH_ALEN] = { 0x00, 0x0a, 0x35 };
	u16 q;

	if (!max_queues || max_queues > ONIC_MAX_QUEUES || !queues || queues > max_queues)
		return NULL;
	netdev = alloc_etherdev_mqs(sizeof(*nd), max_queues, max_queues);
	if (!netdev)
		return NULL;
	if (parent)
		SET_NETDEV_DEV(netdev, parent);
	strscpy(netdev->name, name, sizeof(netdev->name));
	nd = netdev_priv(netdev);
	nd->netdev = netdev;
	nd->dma_dev = parent;
	nd->max_queues = max_queues;
	for (q = 0; q < max_queues; q++) {
		struct onic_qv *qv = &nd->qv[q];

		qv->nd = nd;
		qv->qid = q;
		qv->irq = -1;
		spin_lock_init(&qv->xmit_lock);
		onic_hrtimer_setup(&qv->tx_timer, onic_tx_timer_fn, CLOCK_MONOTONIC, HRTIMER_MODE_REL_SOFT);
		onic_dim_init(qv);
	}
	nd->down = true;
	INIT_DELAYED_WORK(&nd->link_work, onic_link_work);
	INIT_WORK(&nd->reset_work, onic_reset_work);
	netdev->netdev_ops = onic_xdp ? &onic_netdev_ops : &onic_netdev_ops_no_xdp;
	netdev->watchdog_timeo = 5 * HZ;
	netdev->ethtool_ops = &onic_ethtool_ops;
	onic_queues_attach(nd);
	netdev->priv_flags |= IFF_LIVE_ADDR_CHANGE;
	netdev->hw_features |= NETIF_F_LOOPBACK | NETIF_F_RXHASH;
	/* The port hashes from bring-up (the shell's hash, computed as the RTL does). */
	netdev->features |= NETIF_F_RXHASH;
#ifdef ONIC_HAVE_XDP_FEATURES
	if (onic_xdp)
		netdev->xdp_features = NETDEV_XDP_ACT_BASIC | NETDEV_XDP_ACT_REDIRECT |
				       NETDEV_XDP_ACT_NDO_XMIT |
				       /* zero copy maps the UMEM through the DMA API (onic_zc.c) */
				       (nd->dma_dev ? NETDEV_XDP_ACT_XSK_ZEROCOPY : 0);
#endif
#ifdef ONIC_HAVE_XDP_METADATA
	if (onic_xdp)
		netdev->xdp_metadata_ops = &onic_xdp_metadata_ops;
#endif
	/* 00:0A:35 (the reference driver's OUI) and three random bytes, hardware.md §13.1. */
	get_random_bytes(mac + 3, 3);
	eth_hw_addr_set(netdev, mac);
	netif_set_real_num_tx_queues(netdev, queues);
	netif_set_real_num_rx_queues(netdev, queues);
	return nd;
}

int onic_ndev_register(struct onic_ndev *nd)
{
	u16 q;
	int err;

	/* The MTU bounds are the core's (a frame fits one C2H buffer and the shell's largest frame). */
	onic_rs_mtu_range(nd->port, &nd->netdev->min_mtu, &nd->netdev->max_mtu);
	/* The CMAC may have been left in loopback (the master PF's bring-up resets its own port's
	 * CMAC, another function's is as it was): -k shows what it is. */
	if (onic_rs_loopback(nd->port))
		nd->netdev->features |= NETIF_F_LOOPBACK;
	for (q = 0; q < nd->max_queues; q++)
		onic_napi_add(nd->netdev, &nd->qv[q].napi, onic_poll);
	nd->napi_added = true;
	err = register_netdev(nd->netdev);
	if (err)
		return err;
	netif_carrier_off(nd->netdev);
	return 0;
}

/* Unregisters (which runs ndo_stop) and removes the NAPI instances; the reset work is cancelled
 * when this returns, so the devlink instance can go next (onic_devlink_unregister). */
void onic_ndev_unregister(struct onic_ndev *nd, bool registered)
{
	u16 q;

	if (registered) {
		/* From here no failure schedules a restart. unregister_netdev runs ndo_stop, whose
		 * NAPI polls and TX watchdog may still have scheduled one before they stopped: it is
		 * cancelled (or waited for: it takes RTNL, not held here) only after that, while the
		 * netdev is still allocated. A restart that ran meanwhile found the interface down. */
		WRITE_ONCE(nd->removing, true);
		unregister_netdev(nd->netdev);
		cancel_work_sync(&nd->reset_work);
	}
	/* ndo_stop waited for the DIM work of the queues it stopped; a queue a channel change
	 * left unused may still have one. */
	for (q = 0; q < nd->max_queues; q++)
		onic_dim_cancel(&nd->qv[q]);
	if (nd->napi_added)
		for (q = 0; q < nd->max_queues; q++)
			netif_napi_del(&nd->qv[q].napi);
	nd->napi_added = false;
}

/* Frees the Rust port (the function's teardown, hardware.md §13.5) and the netdev. */
void onic_ndev_free(struct onic_ndev *nd)
{
	if (nd->port)
		onic_rs_port_free(nd->port);
	free_netdev(nd->netdev);
}
