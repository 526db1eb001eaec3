// SPDX-License-Identifier: GPL-2.0
/*
 * onic: AF_XDP zero copy. XDP_SETUP_XSK_POOL binds an XSK buffer pool to a queue index (its DMA
 * mapping, the xdp_rxq_info its frames carry), ndo_xsk_wakeup schedules the queue's NAPI, and
 * the helpers the Rust side calls (os-linux/src/kernel/kos.rs) take frames from the pool, give
 * them back, redirect them, copy them for the stack and move the socket's TX ring. Which queue
 * runs on the pool's frames, and what happens to each frame, is the Rust side's decision
 * (embed/src/port/xsk.rs); os-linux/README.md has the contexts and locks.
 */
#include <linux/bpf.h>
#include <linux/etherdevice.h>
#include <linux/filter.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <net/xdp.h>
#include <net/xdp_sock_drv.h>

#include "onic_compat.h"
#include "onic_glue.h"

/* Why the Rust side refused a switch (onic_rs_xsk_source's *why), in extack's static text. */
static void onic_xsk_refusal(struct netlink_ext_ack *extack, u8 why)
{
	switch (why) {
	case ONIC_XSK_WHY_NOT_BOUND:
		NL_SET_ERR_MSG_MOD(extack, "no XSK pool is bound to the queue");
		break;
	case ONIC_XSK_WHY_CHUNK:
		NL_SET_ERR_MSG_MOD(extack,
				   "UMEM chunk less headroom cannot hold an RX buffer for a full frame (at most 2048 bytes of headroom in a 4 KiB chunk, none in a 2 KiB chunk)");
		break;
	default:
		NL_SET_ERR_MSG_MOD(extack, "the queue could not be restarted on the new buffers");
	}
}

static struct xsk_buff_pool *onic_pool(struct onic_ndev *nd, u16 qid)
{
	return qid < nd->max_queues ? READ_ONCE(nd->qv[qid].xsk_pool) : NULL;
}

/* Switches queue q to the pool's frames (on) or back to its page pool, restarting only that
 * queue when it runs. RTNL held. */
static int onic_xsk_switch(struct onic_ndev *nd, u16 q, bool on, struct netlink_ext_ack *extack)
{
	bool running = netif_running(nd->netdev) && q < nd->open_queues;
	u8 why = ONIC_XSK_WHY_NONE;
	int err;

	if (running)
		onic_queue_quiesce(nd, q);
	err = onic_rs_xsk_source(nd->port, q, on, &why);
	/* Only the NAPI pair (RX and XDP_TX rings) was rebuilt: the stack's TX ring kept its
	 * frames, and BQL its count of them. */
	if (running)
		onic_queue_resume(nd, q, false);
	if (err)
		onic_xsk_refusal(extack, why);
	return err;
}

static void onic_xsk_unbind(struct onic_ndev *nd, u16 q)
{
	struct onic_qv *qv = &nd->qv[q];
	struct xsk_buff_pool *pool = qv->xsk_pool;

	WRITE_ONCE(qv->xsk_pool, NULL);
	xdp_rxq_info_unreg(&qv->xsk_rxq);
	xsk_pool_dma_unmap(pool, 0);
}

static int onic_xsk_enable(struct onic_ndev *nd, struct xsk_buff_pool *pool, u16 q,
			   struct netlink_ext_ack *extack)
{
	struct onic_qv *qv = &nd->qv[q];
	int err;

	if (qv->xsk_pool) {
		NL_SET_ERR_MSG_MOD(extack, "an XSK pool is already bound to this queue");
		return -EBUSY;
	}
	if (xsk_pool_get_chunk_size(pool) > PAGE_SIZE) {
		NL_SET_ERR_MSG_MOD(extack, "UMEM chunks larger than a page are not supported");
		return -EOPNOTSUPP;
	}
	/* The kernel requires a zero-copy pool to be DMA mapped; the model's own memory (sim=1
	 * without sim_dma_api=1) has no DMA device to map it for. The socket falls back to copy
	 * mode unless it asked for zero copy. */
	if (!nd->dma_dev) {
		NL_SET_ERR_MSG_MOD(extack, "zero copy needs the DMA API (a card, or sim_dma_api=1)");
		return -EOPNOTSUPP;
	}
	err = xsk_pool_dma_map(pool, nd->dma_dev, 0);
	if (err) {
		NL_SET_ERR_MSG_MOD(extack, "DMA mapping of the UMEM failed");
		return err;
	}
	err = xdp_rxq_info_reg(&qv->xsk_rxq, nd->netdev, q, qv->napi.napi_id);
	if (!err) {
		err = xdp_rxq_info_reg_mem_model(&qv->xsk_rxq, MEM_TYPE_XSK_BUFF_POOL, NULL);
		if (err)
			xdp_rxq_info_unreg(&qv->xsk_rxq);
	}
	if (err) {
		xsk_pool_dma_unmap(pool, 0);
		return err;
	}
	xsk_pool_set_rxq_info(pool, &qv->xsk_rxq);
	WRITE_ONCE(qv->xsk_pool, pool);
	err = onic_xsk_switch(nd, q, true, extack);
	if (err)
		onic_xsk_unbind(nd, q);
	return err;
}

/* The queue goes back to its page pool first: every frame it held is back in the pool and every
 * TX frame completed before the mapping ends. */
static int onic_xsk_disable(struct onic_ndev *nd, u16 q, struct netlink_ext_ack *extack)
{
	int err;

	if (!nd->qv[q].xsk_pool)
		return 0;
	err = onic_xsk_switch(nd, q, false, extack);
	if (err)
		/* The old pair's frames went back before the new pair failed to start: the pool is
		 * no longer used either way. */
		netdev_warn(nd->netdev, "queue %u: back to the page pool failed (%d)\n", q, err);
	onic_xsk_unbind(nd, q);
	return 0;
}

/* XDP_SETUP_XSK_POOL (RTNL held): pool set to bind, NULL to unbind. */
int onic_xsk_pool_setup(struct onic_ndev *nd, struct xsk_buff_pool *pool, u16 q,
			struct netlink_ext_ack *extack)
{
	if (q >= nd->max_queues || (pool && q >= nd->netdev->real_num_rx_queues)) {
		NL_SET_ERR_MSG_MOD(extack, "queue id beyond the queues in use");
		return -EINVAL;
	}
	return pool ? onic_xsk_enable(nd, pool, q, extack) : onic_xsk_disable(nd, q, extack);
}

/* ndo_xsk_wakeup: process context (sendto, poll, recvfrom), under RCU. Only schedules the
 * queue's NAPI (or marks a running poll to go again); every ring stays its NAPI's. */
int onic_xsk_wakeup(struct net_device *netdev, u32 q, u32 flags)
{
	struct onic_ndev *nd = netdev_priv(netdev);
	struct onic_qv *qv;

	if (!netif_running(netdev) || READ_ONCE(nd->down))
		return -ENETDOWN;
	if (q >= READ_ONCE(nd->open_queues))
		return -EINVAL;
	qv = &nd->qv[q];
	if (!READ_ONCE(qv->xsk_pool))
		return -EINVAL;
	if (!napi_if_scheduled_mark_missed(&qv->napi)) {
		local_bh_disable();
		napi_schedule(&qv->napi);
		local_bh_enable();
	}
	return 0;
}

/* The end of a NAPI poll of a queue with a pool (the TX ring's consumer already moved on as
 * each batch of descriptors was taken): the need_wakeup flags tell the application when only a
 * wakeup brings the driver back: RX when the fill ring ran dry (no interrupt comes for an empty
 * RX ring), TX always (the socket's TX ring is only read in a poll). A socket without need_wakeup never wakes
 * the driver: when the fill ring ran dry the poll must run again (returns true), or the RX ring
 * stays short and the card drops what arrives. */
bool onic_xsk_poll_end(struct onic_qv *qv)
{
	struct xsk_buff_pool *pool = READ_ONCE(qv->xsk_pool);
	bool fill_empty = qv->xsk_fill_empty;

	qv->xsk_fill_empty = false;
	if (!pool)
		return false;
	if (!xsk_uses_need_wakeup(pool))
		return fill_empty;
	if (fill_empty)
		xsk_set_rx_need_wakeup(pool);
	else
		xsk_clear_rx_need_wakeup(pool);
	xsk_set_tx_need_wakeup(pool);
	return false;
}

/* ------------------------------------------------ helpers of the Rust side (NAPI of queue qid) */

/* Bytes of each frame the driver may use (chunk less UMEM headroom), 0 without a pool. */
u32 onic_xsk_room(struct onic_ndev *nd, u16 qid)
{
	struct xsk_buff_pool *pool = onic_pool(nd, qid);

	if (!pool)
		return 0;
	return xsk_pool_get_chunk_size(pool) - (xsk_pool_get_headroom(pool) - XDP_PACKET_HEADROOM);
}

/* Frame xdp of the pool as the driver sees it: the chunk's CPU and device addresses, its
 * bytes (the whole chunk, the UMEM headroom included), its UMEM address and the UMEM headroom. */
static void onic_xsk_rx_describe(struct xsk_buff_pool *pool, struct xdp_buff *xdp,
				 struct onic_xsk_chunk *out)
{
	u32 uh = xsk_pool_get_headroom(pool) - XDP_PACKET_HEADROOM;

	/* data_hard_start is the chunk's start plus the UMEM headroom; the frame DMA address is
	 * the chunk's start itself (xp_init_xskb_dma), already without the headroom. */
	out->virt = (u8 *)xdp->data_hard_start - uh;
	out->dma = xsk_buff_xdp_get_frame_dma(xdp);
	out->len = xsk_pool_get_chunk_size(pool);
	out->addr = (u8 *)xdp->data_hard_start - uh - (u8 *)pool->addrs;
	out->headroom = uh;
}

/* Up to max frames (xsk_buff_alloc_batch, which takes the free list first, then the fill ring):
 * frame i's xdp_buff in xdps[i], its chunk in out[i]. A call may hand out fewer than asked with
 * more to come (a pool whose DMA needs syncs hands out one frame a call), so it is asked again
 * until it hands out none: then the fill ring ran dry, which the need_wakeup protocol hears of at
 * the poll's end. */
u32 onic_xsk_alloc_batch(struct onic_ndev *nd, u16 qid, struct onic_xsk_chunk *out, void **xdps,
			 u32 max)
{
	struct xsk_buff_pool *pool = onic_pool(nd, qid);
	u32 i, n = 0, got;

	if (!pool)
		return 0;
	while (n < max) {
		got = xsk_buff_alloc_batch(pool, (struct xdp_buff **)xdps + n, max - n);
		if (!got) {
			nd->qv[qid].xsk_fill_empty = true;
			break;
		}
		n += got;
	}
	for (i = 0; i < n; i++)
		onic_xsk_rx_describe(pool, xdps[i], &out[i]);
	return n;
}

void onic_xsk_free(void *xdp)
{
	xsk_buff_free(xdp);
}

/* XDP_REDIRECT of a frame of the pool (off: from data_hard_start): into an xskmap the socket's
 * RX ring takes the chunk itself; any other target gets a copy and the chunk goes back to the
 * pool. 0: the frame is no longer the driver's. */
int onic_xsk_redirect(struct onic_ndev *nd, void *prog, void *p, u16 off, u16 len, u8 meta)
{
	struct xdp_buff *xdp = p;

	xdp->data = (u8 *)xdp->data_hard_start + off;
	xdp->data_end = (u8 *)xdp->data + len;
	xdp->data_meta = (u8 *)xdp->data - meta;
	return xdp_do_redirect(nd->netdev, xdp, prog);
}

/* XDP_PASS on a zero-copy queue: the stack gets a copy (frame: meta bytes, then the packet). */
void *onic_rx_copy(struct napi_struct *napi, const u8 *frame, u32 len, u8 meta)
{
	struct sk_buff *skb;

	if (len <= meta)
		return NULL;
	skb = napi_alloc_skb(napi, len);
	if (!skb)
		return NULL;
	skb_put_data(skb, frame, len);
	if (meta) {
		__skb_pull(skb, meta);
		skb_metadata_set(skb, meta);
	}
	return skb;
}

/* Describes a descriptor of the socket's TX ring for the Rust side: UMEM address, length (a runt
 * padded to ETH_ZLEN inside its chunk where the chunk has room), CPU and device address, synced
 * for the device. */
static void onic_xsk_tx_describe(struct xsk_buff_pool *pool, struct xdp_desc d,
				 struct onic_xsk_chunk *out)
{
	u32 chunk = xsk_pool_get_chunk_size(pool);
	u8 *data = xsk_buff_raw_get_data(pool, d.addr);

	/* The padding stays inside the frame's chunk (aligned: the offset in the chunk is the
	 * address's low bits), or inside the UMEM (unaligned). */
	if (d.len < ETH_ZLEN &&
	    (pool->unaligned ? data + ETH_ZLEN <= (u8 *)pool->addrs + pool->addrs_cnt
			     : (d.addr & (chunk - 1)) + ETH_ZLEN <= chunk)) {
		memset(data + d.len, 0, ETH_ZLEN - d.len);
		d.len = ETH_ZLEN;
	}
	out->virt = data;
	out->addr = d.addr;
	out->len = d.len;
	out->headroom = 0;
	out->dma = xsk_buff_raw_get_dma(pool, d.addr);
	xsk_buff_raw_dma_sync_for_device(pool, out->dma, d.len);
}

/* Up to max descriptors of the socket's TX ring (xsk_tx_peek_release_desc_batch: checked, their
 * completions reserved, the ring's consumer moved on), described in out[]; returns how many. */
u32 onic_xsk_tx_take(struct onic_ndev *nd, u16 qid, struct onic_xsk_chunk *out, u32 max)
{
	struct xsk_buff_pool *pool = onic_pool(nd, qid);
	u32 i, n;

	if (!pool || !max)
		return 0;
	n = xsk_tx_peek_release_desc_batch(pool, max);
	for (i = 0; i < n; i++)
		onic_xsk_tx_describe(pool, pool->tx_descs[i], &out[i]);
	return n;
}

/* The device is done with the oldest TX descriptor taken (completions are in ring order). */
void onic_xsk_tx_done(struct onic_ndev *nd, u16 qid)
{
	struct xsk_buff_pool *pool = onic_pool(nd, qid);

	if (pool)
		xsk_tx_completed(pool, 1);
}
