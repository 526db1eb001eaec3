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

/* One RX queue's OS memory: a page_pool, or (rx_page_pool=0, the reference driver's old memory
 * model, for comparisons) a page allocated and mapped per buffer and freed by whoever ends up
 * with it. */
struct onic_qmem {
	struct page_pool *pp;	/* NULL in the page-per-packet model */
	struct device *dev;	/* the device the DMA API maps for; NULL: the model's own memory */
	struct xdp_rxq_info rxq;
};

/* The kernel xdp_buff of one program run, with what the RX-metadata callbacks report. */
struct onic_xdp_buff {
	struct xdp_buff xdp;
	u32 hash;
	u32 hash_type;
	bool has_hash;
};

void *onic_qmem_new(struct onic_ndev *nd, u16 qid, u32 pages, bool page_pool, int *err)
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

	/* With a DMA device (a card, or the model behind the DMA API) the pool maps pages once and
	 * syncs what the CPU dirtied on recycling. The model's own memory: its device addresses are
	 * not the kernel's, so the Rust side maps each page with it while it holds the page. */
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m) {
		*err = -ENOMEM;
		return NULL;
	}
	m->dev = nd->dma_dev;
	/* A queue about to run on an XSK pool's frames (page_pool false: the port says which
	 * source the pair it builds takes) needs no page_pool: its memory stays the page-per-packet
	 * model, which it never uses. */
	if (onic_rx_page_pool && page_pool) {
		if (m->dev) {
			/* The pool syncs for the device only where a sync does anything. */
			pp.flags = PP_FLAG_DMA_MAP;
			if (!onic_dma_sync_is_noop(m->dev))
				pp.flags |= PP_FLAG_DMA_SYNC_DEV;
			pp.dev = m->dev;
		}
#ifdef ONIC_HAVE_PP_NAPI
		/* The queue's NAPI is the pool's only consumer. Pools are created and destroyed
		 * with that NAPI disabled (open, stop, a queue restart), as page_pool_destroy
		 * requires of a bound pool. */
		pp.napi = &nd->qv[qid].napi;
		pp.netdev = nd->netdev;
#endif
		m->pp = page_pool_create(&pp);
		if (IS_ERR(m->pp)) {
			*err = PTR_ERR(m->pp);
			kfree(m);
			return NULL;
		}
	}
	e = xdp_rxq_info_reg(&m->rxq, nd->netdev, qid, nd->qv[qid].napi.napi_id);
	if (!e) {
		e = m->pp ? xdp_rxq_info_reg_mem_model(&m->rxq, MEM_TYPE_PAGE_POOL, m->pp)
			  : xdp_rxq_info_reg_mem_model(&m->rxq, MEM_TYPE_PAGE_SHARED, NULL);
		if (e)
			xdp_rxq_info_unreg(&m->rxq);
	}
	if (e) {
		if (m->pp)
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
	if (m->pp)
		page_pool_destroy(m->pp);
	kfree(m);
}

/* The page-per-packet model keeps a page's DMA address in page->private while the driver holds
 * it mapped. */
static void onic_page_unmap(struct onic_qmem *m, struct page *page)
{
	if (m->dev)
		dma_unmap_page(m->dev, page_private(page), PAGE_SIZE, DMA_BIDIRECTIONAL);
	set_page_private(page, 0);
}

void *onic_pp_alloc(void *qmem, u8 **virt, u64 *dma)
{
	struct onic_qmem *m = qmem;
	struct page *page;
	dma_addr_t a = 0;

	if (m->pp) {
		page = page_pool_dev_alloc_pages(m->pp);
		if (!page)
			return NULL;
		if (m->dev)
			a = page_pool_get_dma_addr(page);
	} else {
		page = dev_alloc_page();
		if (!page)
			return NULL;
		if (m->dev) {
			a = dma_map_page(m->dev, page, 0, PAGE_SIZE, DMA_BIDIRECTIONAL);
			if (dma_mapping_error(m->dev, a)) {
				put_page(page);
				return NULL;
			}
		}
		set_page_private(page, a);
	}
	*virt = page_address(page);
	*dma = a;
	return page;
}

void onic_pp_put(void *qmem, void *p, u32 dirty, bool direct)
{
	struct onic_qmem *m = qmem;
	struct page *page = p;

	if (m->pp) {
		page_pool_put_page(m->pp, page, dirty, direct);
	} else {
		onic_page_unmap(m, page);
		put_page(page);
	}
}

/* out[11]: alloc fast, slow, slow_high_order, empty, refill, waive; recycle cached,
 * cache_full, ring, ring_full, released_refcnt (Rust: onic_core::stats::PoolStats). */
void onic_pp_stats(void *qmem, u64 *out)
{
#ifdef CONFIG_PAGE_POOL_STATS
	struct onic_qmem *m = qmem;
	struct page_pool_stats s = {};

	if (m->pp && page_pool_get_stats(m->pp, &s)) {
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

void *onic_rx_build(void *qmem, struct napi_struct *napi, u8 *virt, u16 off, u16 len, u8 meta)
{
	struct onic_qmem *m = qmem;
	struct sk_buff *skb = napi_build_skb(virt, PAGE_SIZE);

	if (!skb)
		return NULL;
	skb_reserve(skb, off);
	__skb_put(skb, len);
	if (meta)
		skb_metadata_set(skb, meta);
	if (m->pp)
		/* Freeing the skb gives the page back to its page_pool. */
		skb_mark_for_recycle(skb);
	else
		/* The stack frees the page with the skb; the driver's mapping ends here. */
		onic_page_unmap(m, virt_to_page(virt));
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

/* Frames of other devices' pools: never the direct-recycling variant, which is only for the
 * pool's own NAPI context. */
void onic_xdpf_return(void *f)
{
	xdp_return_frame(f);
}

/* off[3]: data_meta, data, data_end as offsets from hard_start, in and out. frame_sz: the bytes
 * from hard_start the frame lives in (a page, or a UMEM frame's view: its chunk less the UMEM
 * headroom, as the kernel's own zero-copy xdp_buff), so that bpf_xdp_adjust_tail never grows a
 * frame past its chunk. */
u32 onic_xdp_run(void *prog, void *qmem, u8 *hard_start, u32 frame_sz, u32 *off, u32 hash,
		 u32 hash_type, bool has_hash)
{
	struct onic_qmem *m = qmem;
	struct onic_xdp_buff ob;
	u32 act;

	xdp_init_buff(&ob.xdp, frame_sz, &m->rxq);
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

/* Whether the program can call the RX-metadata kfuncs: only a program bound to the device
 * (BPF_F_XDP_DEV_BOUND_ONLY, 6.3+) has them resolved to xdp_metadata_ops; any other gets the
 * kernel's stubs and never reaches onic_xmo_rx_hash. */
bool onic_xdp_prog_reads_meta(void *prog)
{
#ifdef ONIC_HAVE_XDP_METADATA
	return bpf_prog_is_dev_bound(((struct bpf_prog *)prog)->aux);
#else
	return false;
#endif
}

/* 0: the kernel took the frame (its page comes back through xdp_return_frame). The metadata
 * the program left (meta bytes in front of the frame) stays valid, so that a cpumap, devmap or
 * AF_XDP target and the programs there see it. */
int onic_xdp_redirect(void *prog, void *qmem, u8 *hard_start, u16 off, u16 len, u8 meta)
{
	struct onic_qmem *m = qmem;
	struct xdp_buff xdp;
	int err;

	xdp_init_buff(&xdp, PAGE_SIZE, &m->rxq);
	xdp_prepare_buff(&xdp, hard_start, off, len, true);
	xdp.data_meta = xdp.data - meta;
	err = xdp_do_redirect(m->rxq.dev, &xdp, prog);
	if (!err && !m->pp)
		/* The target owns the page now and maps it itself. */
		onic_page_unmap(m, virt_to_page(hard_start));
	return err;
}

void onic_synchronize_net(void)
{
	synchronize_net();
}
