// SPDX-License-Identifier: GPL-2.0
/*
 * onic: control of one running queue index below the netdev's callbacks: its TX completion
 * timer, and stopping and restarting its three contexts (NAPI, stack TX, redirect-in) around
 * a change of its rings (a queue restart, an AF_XDP pool switch).
 */
#include <linux/hrtimer.h>
#include <linux/moduleparam.h>
#include <linux/netdevice.h>

#include "onic_compat.h"
#include "onic_glue.h"

unsigned int onic_tx_timer_us = 100;
module_param_named(tx_timer_us, onic_tx_timer_us, uint, 0444);
MODULE_PARM_DESC(tx_timer_us, "Longest wait before frames left on a TX ring are reclaimed, in microseconds (default 100)");

/* TX completions raise no interrupt on this device (hardware.md §11.2). Whoever leaves frames on a
 * TX ring (transmit, ndo_xdp_xmit, a poll that could not reclaim them all yet) arms the queue's
 * timer; it schedules the queue's NAPI, which reclaims and re-arms while frames remain. Reclaim
 * latency is therefore bounded by the period, whatever the RX traffic. */
enum hrtimer_restart onic_tx_timer_fn(struct hrtimer *t)
{
	struct onic_qv *qv = container_of(t, struct onic_qv, tx_timer);

	clear_bit(0, &qv->timer_armed);
	napi_schedule(&qv->napi);
	return HRTIMER_NORESTART;
}

void onic_tx_timer_arm(struct onic_qv *qv)
{
	if (!test_and_set_bit(0, &qv->timer_armed))
		hrtimer_start(&qv->tx_timer, ns_to_ktime((u64)onic_tx_timer_us * NSEC_PER_USEC),
			      HRTIMER_MODE_REL_SOFT);
}

void onic_tx_timer_cancel(struct onic_qv *qv)
{
	hrtimer_cancel(&qv->tx_timer);
	clear_bit(0, &qv->timer_armed);
}

/* Stops the three contexts of running queue q (RTNL held): its NAPI, its stack TX queue and its
 * redirect-in ring; the other queues keep running. */
void onic_queue_quiesce(struct onic_ndev *nd, u16 q)
{
	struct netdev_queue *txq = netdev_get_tx_queue(nd->netdev, q);
	struct onic_qv *qv = &nd->qv[q];

	napi_disable(&qv->napi);
	onic_tx_timer_cancel(qv);
	spin_lock_bh(&qv->xmit_lock);
	WRITE_ONCE(qv->quiet, true);
	spin_unlock_bh(&qv->xmit_lock);
	__netif_tx_lock_bh(txq);
	netif_tx_stop_queue(txq);
	__netif_tx_unlock_bh(txq);
}

/* Lets queue q run again after onic_queue_quiesce, with one poll. stack_restarted: its stack TX
 * ring was rebuilt too (BQL starts over); otherwise the frames in flight there are still BQL's. */
void onic_queue_resume(struct onic_ndev *nd, u16 q, bool stack_restarted)
{
	struct netdev_queue *txq = netdev_get_tx_queue(nd->netdev, q);
	struct onic_qv *qv = &nd->qv[q];

	if (stack_restarted)
		netdev_tx_reset_queue(txq);
	WRITE_ONCE(qv->quiet, false);
	netif_tx_wake_queue(txq);
	napi_enable(&qv->napi);
	local_bh_disable();
	napi_schedule(&qv->napi);
	local_bh_enable();
}
