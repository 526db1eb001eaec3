// SPDX-License-Identifier: GPL-2.0
/*
 * onic: the datapath helpers the Rust side calls (os-linux/src/kernel/kos.rs): the queue's
 * page_pool and xdp_rxq_info, packets built in place around pool pages, the XDP program run over
 * a kernel xdp_buff, XDP_REDIRECT, redirected frames, and the per-queue counters behind
 * u64_stats_sync. Each is a thin wrapper of inline kernel API; the decisions are Rust's.
 */
#include <linux/bpf.h>
#include <linux/dma-mapping.h>
#include <linux/etherdevice.h>
#include <linux/filter.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/u64_stats_sync.h>
#include <net/xdp.h>

#include "onic_compat.h"
#include "onic_glue.h"

/* RX buffer layout of the core (os-linux/README.md, docs/deviations.md item 1): the frame
 * starts after 256 bytes of headroom, and the last 320 bytes of the page are left for
 * skb_shared_info, so a frame is at most 3520 bytes. */
#define ONIC_RX_HEADROOM 256
#define ONIC_RX_MAX_LEN (PAGE_SIZE - ONIC_RX_HEADROOM - 320)

/* One RX queue's OS memory. */
struct onic_qmem {
	struct page_pool *pp;
	struct xdp_rxq_info rxq;
	bool dma_mapped;	/* the pool maps its pages (a card), or the Rust side does (the model) */
};

/* The kernel xdp_buff of one program run, with what the RX-metadata callbacks report. */
struct onic_xdp_buff {
	struct xdp_buff xdp;
	u32 hash;
	u32 hash_type;
	bool has_hash;
};

void *onic_qmem_new(struct onic_ndev *nd, u16 qid, u32 pages, int *err)
{
	struct page_pool_params pp = {
		.order = 0,
		.pool_size = pages,
		.nid = NUMA_NO_NODE,
		.dma_dir = DMA_BIDIRECTIONAL,
		.offset = ONIC_RX_HEADROOM,
		.max_len = ONIC_RX_MAX_LEN,
	};
	struct onic_qmem *m;
	int e;

	/* A card: the pool maps pages once and syncs what the CPU dirtied on recycling. The model:
	 * its device addresses are not the kernel's, so the Rust side maps each page with it. */
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m) {
		*err = -ENOMEM;
		return NULL;
	}
	if (nd->dma_dev) {
		pp.flags = PP_FLAG_DMA_MAP | PP_FLAG_DMA_SYNC_DEV;
		pp.dev = nd->dma_dev;
		m->dma_mapped = true;
	}
	m->pp = page_pool_create(&pp);
	if (IS_ERR(m->pp)) {
		*err = PTR_ERR(m->pp);
		kfree(m);
		return NULL;
	}
	e = xdp_rxq_info_reg(&m->rxq, nd->netdev, qid, nd->qv[qid].napi.napi_id);
	if (!e) {
		e = xdp_rxq_info_reg_mem_model(&m->rxq, MEM_TYPE_PAGE_POOL, m->pp);
		if (e)
			xdp_rxq_info_unreg(&m->rxq);
	}
	if (e) {
		page_pool_destroy(m->pp);
		kfree(m);
		*err = e;
		return NULL;
	}
	return m;
}

void onic_qmem_free(void *qmem)
{
	struct onic_qmem *m = qmem;

	/* Unregistering drops the memory model's reference to the pool, destroying drops ours;
	 * pages still with the stack return to it later and the last one frees it. */
	xdp_rxq_info_unreg(&m->rxq);
	page_pool_destroy(m->pp);
	kfree(m);
}

void *onic_pp_alloc(void *qmem, u8 **virt, u64 *dma)
{
	struct onic_qmem *m = qmem;
	struct page *page = page_pool_dev_alloc_pages(m->pp);

	if (!page)
		return NULL;
	*virt = page_address(page);
	*dma = m->dma_mapped ? page_pool_get_dma_addr(page) : 0;
	return page;
}

void onic_pp_put(void *qmem, void *page, u32 dirty, bool direct)
{
	struct onic_qmem *m = qmem;

	page_pool_put_page(m->pp, page, dirty, direct);
}

/* out[11]: alloc fast, slow, slow_high_order, empty, refill, waive; recycle cached,
 * cache_full, ring, ring_full, released_refcnt (Rust: onic_core::pool::PoolStats). */
void onic_pp_stats(void *qmem, u64 *out)
{
#ifdef CONFIG_PAGE_POOL_STATS
	struct onic_qmem *m = qmem;
	struct page_pool_stats s = {};

	if (page_pool_get_stats(m->pp, &s)) {
		out[0] = s.alloc_stats.fast;
		out[1] = s.alloc_stats.slow;
		out[2] = s.alloc_stats.slow_high_order;
		out[3] = s.alloc_stats.empty;
		out[4] = s.alloc_stats.refill;
		out[5] = s.alloc_stats.waive;
		out[6] = s.recycle_stats.cached;
		out[7] = s.recycle_stats.cache_full;
		out[8] = s.recycle_stats.ring;
		out[9] = s.recycle_stats.ring_full;
		out[10] = s.recycle_stats.released_refcnt;
		return;
	}
#endif
	memset(out, 0, 11 * sizeof(u64));
}

void *onic_rx_build(struct napi_struct *napi, u8 *virt, u16 off, u16 len, u8 meta)
{
	struct sk_buff *skb = napi_build_skb(virt, PAGE_SIZE);

	if (!skb)
		return NULL;
	skb_reserve(skb, off);
	__skb_put(skb, len);
	if (meta)
		skb_metadata_set(skb, meta);
	/* Freeing the skb gives the page back to its page_pool. */
	skb_mark_for_recycle(skb);
	return skb;
}

/* kind: 0 none, PKT_HASH_TYPE_L3 (2), PKT_HASH_TYPE_L4 (3). */
void onic_rx_deliver(struct napi_struct *napi, void *skbp, u16 qid, u32 hash, u8 kind)
{
	struct sk_buff *skb = skbp;

	skb->protocol = eth_type_trans(skb, napi->dev);
	skb_record_rx_queue(skb, qid);
	if (kind == PKT_HASH_TYPE_L3 || kind == PKT_HASH_TYPE_L4)
		skb_set_hash(skb, hash, kind);
	napi_gro_receive(napi, skb);
}

u8 *onic_skb_data(void *skbp, size_t *len)
{
	struct sk_buff *skb = skbp;

	*len = skb->len;
	return skb->data;
}

void onic_skb_done(void *skbp, int budget)
{
	if (budget >= 0)
		napi_consume_skb(skbp, budget);
	else
		dev_kfree_skb_any(skbp);
}

u8 *onic_xdpf_data(void *f, size_t *len)
{
	struct xdp_frame *xdpf = f;

	*len = xdpf->len;
	return xdpf->data;
}

void onic_xdpf_return(void *f, bool in_napi)
{
	if (in_napi)
		xdp_return_frame_rx_napi(f);
	else
		xdp_return_frame(f);
}

/* off[3]: data_meta, data, data_end as offsets from the page start, in and out. */
u32 onic_xdp_run(void *prog, void *qmem, u8 *hard_start, u32 *off, u32 hash, u32 hash_type,
		 bool has_hash)
{
	struct onic_qmem *m = qmem;
	struct onic_xdp_buff ob;
	u32 act;

	xdp_init_buff(&ob.xdp, PAGE_SIZE, &m->rxq);
	xdp_prepare_buff(&ob.xdp, hard_start, off[1], off[2] - off[1], true);
	ob.xdp.data_meta = hard_start + off[0];
	ob.hash = hash;
	ob.hash_type = hash_type;
	ob.has_hash = has_hash;
	act = bpf_prog_run_xdp(prog, &ob.xdp);
	off[0] = (u8 *)ob.xdp.data_meta - hard_start;
	off[1] = (u8 *)ob.xdp.data - hard_start;
	off[2] = (u8 *)ob.xdp.data_end - hard_start;
	return act;
}

#ifdef ONIC_HAVE_XDP_METADATA
/* bpf_xdp_metadata_rx_hash(): the shell's hash, computed in software the way the RTL does. */
static int onic_xmo_rx_hash(const struct xdp_md *ctx, u32 *hash, enum xdp_rss_hash_type *type)
{
	const struct onic_xdp_buff *ob = (const void *)ctx;

	if (!ob->has_hash)
		return -ENODATA;
	*hash = ob->hash;
	*type = ob->hash_type;
	return 0;
}

const struct xdp_metadata_ops onic_xdp_metadata_ops = {
	.xmo_rx_hash = onic_xmo_rx_hash,
};
#endif

/* 0: the kernel took the frame (its page comes back through xdp_return_frame). */
int onic_xdp_redirect(void *prog, void *qmem, u8 *hard_start, u16 off, u16 len)
{
	struct onic_qmem *m = qmem;
	struct xdp_buff xdp;

	xdp_init_buff(&xdp, PAGE_SIZE, &m->rxq);
	xdp_prepare_buff(&xdp, hard_start, off, len, false);
	return xdp_do_redirect(m->rxq.dev, &xdp, prog);
}

void onic_qstats_write(struct onic_ndev *nd, u16 qid, const u64 *v, size_t n)
{
	struct onic_qstats *qs;
	size_t i;

	if (qid >= nd->max_queues || n != ONIC_QSTAT_WORDS)
		return;
	qs = &nd->qstats[qid];
	u64_stats_update_begin(&qs->syncp);
	for (i = 0; i < n; i++)
		u64_stats_set(&qs->v[i], v[i]);
	u64_stats_update_end(&qs->syncp);
}

void onic_qstats_read(struct onic_ndev *nd, u16 qid, u64 *out, size_t n)
{
	struct onic_qstats *qs;
	unsigned int start;
	size_t i;

	if (qid >= nd->max_queues || n != ONIC_QSTAT_WORDS) {
		memset(out, 0, n * sizeof(u64));
		return;
	}
	qs = &nd->qstats[qid];
	do {
		start = u64_stats_fetch_begin(&qs->syncp);
		for (i = 0; i < n; i++)
			out[i] = u64_stats_read(&qs->v[i]);
	} while (u64_stats_fetch_retry(&qs->syncp, start));
}

void onic_synchronize_net(void)
{
	synchronize_net();
}
