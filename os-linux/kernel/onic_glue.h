/* SPDX-License-Identifier: GPL-2.0 */
/*
 * onic: the interface between the C glue and the Rust side (libonic_linux, built from
 * os-linux/src). The Rust side owns every decision; the C side owns the kernel objects
 * (pci_dev, net_device, NAPI, IRQs, timers) and reaches the kernel's inline helpers for it.
 */
#ifndef ONIC_GLUE_H
#define ONIC_GLUE_H

#include <linux/dim.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <linux/u64_stats_sync.h>
#include <net/xdp.h>

#include "onic_compat.h"

/* The structs and constants shared with the Rust side (ONIC_MAX_QUEUES, enum onic_xmit,
 * struct onic_poll_result, ...), generated at every module build from their one definition,
 * os-linux/src/abi.rs (cargo xtask kmod, cbindgen), and
 * compile-time checks that each struct's size, alignment and field offsets are rustc's. */
#include "onic_ffi.h"
#include "onic_ffi_layout.h"

#define ONIC_DRV_NAME "onic"
/* Simulation mode: queue indices offered per port, and in use at load. */
#define ONIC_SIM_MAX_QUEUES 8

/* Module parameters the other files read: onic_main.c, onic_netdev.c, onic_qctl.c. */
extern bool onic_rx_page_pool;
extern bool onic_xdp;
extern unsigned int onic_tx_timer_us;

struct onic_ndev;
/* A failed queue reported before the reset work restarts it; true: the reporter recovered it. */
typedef bool (*onic_failure_report_fn)(struct onic_ndev *nd, u16 q, bool rx, const char *why);

/* One queue vector: the NAPI instance of queue index qid, which owns its RX and XDP_TX rings and
 * reclaims its stack TX ring (under that queue's TX lock) and its redirect-in ring (under
 * xmit_lock). os-linux/README.md has the locking rules. */
struct onic_qv {
	struct napi_struct napi;
	struct onic_ndev *nd;
	u16 qid;
	int irq;		/* Linux IRQ number, or -1 (simulation: NAPI is scheduled by the model) */
	spinlock_t xmit_lock;	/* the redirect-in ring: ndo_xdp_xmit and its reclaim */
	/* Bounded-latency TX reclaim: TX completions raise no interrupt (hardware.md §11.2), so while
	 * frames are in flight this timer schedules the NAPI poll that reclaims them. */
	struct hrtimer tx_timer;
	unsigned long timer_armed;	/* bit 0: tx_timer is pending */
	char irq_name[IFNAMSIZ + 8];
	bool quiet;		/* a restart owns the redirect-in ring (read under xmit_lock) */
	/* Whether a TX ring may hold frames the poll has to reclaim: set by whoever queues on
	 * the ring, under the ring's lock, before it arms the timer or kicks NAPI; cleared by the
	 * poll's reclaim under the same lock when it left nothing in flight. The poll reads it
	 * without the lock and skips an idle ring (os-linux/README.md, locking rules). */
	bool stack_busy;	/* the stack TX ring (the TX queue's lock) */
	bool xmit_busy;		/* the redirect-in ring (xmit_lock) */
	/* AF_XDP zero copy (onic_zc.c): the XSK pool bound to this queue index (set and cleared
	 * under RTNL, read by its NAPI and ndo_xsk_wakeup), the xdp_rxq_info its frames carry, and
	 * what this queue's NAPI poll saw of it (written and read by that poll only). */
	struct xsk_buff_pool *xsk_pool;
	struct xdp_rxq_info xsk_rxq;
	bool xsk_fill_empty;	/* an allocation found the fill ring empty */
	/* Adaptive RX moderation (ethtool -C adaptive-rx on): the kernel's DIM state, sampled by
	 * this queue's NAPI poll only; dim.work (onic_dim_work) hands its decision to the Rust side.
	 * dim_on and dim_events are the poll's own. */
	struct dim dim;
	bool dim_on;		/* the last sample found the queue adaptive */
	u16 dim_events;		/* completing polls (one per interrupt), DIM's event counter */
};

/* The netdev's private area. */
struct onic_ndev {
	struct net_device *netdev;
	void *port;		/* Rust: Box<Port> */
	struct device *dma_dev;	/* the device the DMA API maps for; NULL: the model's own memory */
	struct bpf_prog __rcu *xdp_prog;
	bool xdp_xmit_ready;	/* ndo_xdp_xmit may reach the queues (set after open, cleared before stop) */
	bool down;		/* stop has begun: no TX queue may be woken (cleared by open) */
	u16 max_queues;
	u16 open_queues;	/* queue indices started by the last open */
	bool napi_added;
	struct delayed_work link_work;	/* carrier follows the CMAC's link (while up) */
	struct work_struct reset_work;	/* queue restarts (takes RTNL) */
	unsigned long failed;		/* bit q: queue q needs a restart (ring error, TX timeout) */
	unsigned long failed_rx;	/* bit q: ... and it was its RX side (devlink's rx reporter) */
	const char *failed_why[ONIC_MAX_QUEUES];	/* what queue q's failure was, for the report */
	/* Who hears of a failed queue first (devlink's reporters, set and cleared by onic_devlink.c;
	 * NULL without a devlink): the reset work never names devlink itself. */
	onic_failure_report_fn report_failure;
	struct devlink *devlink;	/* onic_devlink.c; NULL without one */
	struct devlink_health_reporter *tx_reporter, *rx_reporter;
	u16 board_vendor, board_device;	/* devlink's board.id: the function's PCI IDs */
	bool removing;			/* unregistering: no restart may be scheduled any more */
	struct onic_qv qv[ONIC_MAX_QUEUES];
};

/* ---- Rust entry points (os-linux/src/kernel/entry.rs) ---- */
void onic_rs_init(bool debug);
const void *onic_rs_sim_new(void);
void onic_rs_sim_free(const void *sim);
void onic_rs_sim_tick(const void *sim, u64 elapsed_ns, void *cookie);
void onic_rs_sim_set_link(const void *sim, u8 port, bool up);
void onic_rs_sim_stall_tx(const void *sim, bool on);
void onic_rs_sim_freeze_cmpt(const void *sim, bool on);
void onic_rs_sim_bad_fcs(const void *sim, u32 frames);
void onic_rs_sim_fec_errors(const void *sim, u32 correctable, u32 uncorrectable);
void *onic_rs_port_new_sim(const void *sim, struct onic_ndev *nd, const struct onic_port_params *p, int *err);
void *onic_rs_port_new_pci(void *dev, struct onic_ndev *nd, void __iomem *bar0, size_t bar0_len,
			   void __iomem *bar2, size_t bar2_len, const struct onic_port_params *p, int *err);
void onic_rs_port_free(void *port);
int onic_rs_open(const void *port);
void onic_rs_stop(const void *port);
int onic_rs_xmit(const void *port, u16 qid, struct sk_buff *skb, struct onic_tx_clean *done);
void onic_rs_tx_flush(const void *port, u16 qid);
u16 onic_rs_tx_free(const void *port, u16 qid);
void onic_rs_tx_clean(const void *port, u16 qid, int budget, struct onic_tx_clean *out);
void onic_rs_xmit_clean(const void *port, u16 qid, struct onic_tx_clean *out);
int onic_rs_restart_queue(const void *port, u16 qid);
int onic_rs_xsk_source(const void *port, u16 qid, bool on, u8 *why);
int onic_rs_invalidate_all_queues(const void *port);
void onic_rs_tx_state(const void *port, u16 qid, struct onic_tx_state *out);
void onic_rs_poll(const void *port, u16 qid, int budget, struct napi_struct *napi,
		  struct bpf_prog *prog, struct onic_poll_result *out);
int onic_rs_xdp_xmit(const void *port, u16 qid, struct xdp_frame **frames, int n, bool flush);
void onic_rs_stats64(const void *port, struct onic_link_stats *out);
bool onic_rs_link_up(const void *port);
bool onic_rs_error_report(const void *port, char *buf, size_t len);
int onic_rs_sset_count(const void *port, u32 sset);
void onic_rs_get_strings(const void *port, u32 sset, u8 *buf);
void onic_rs_get_stats(const void *port, u64 *data, size_t n);
int onic_rs_mac_groups(const void *port, struct onic_mac_groups *out);
int onic_rs_pause_params(const void *port, bool *rx, bool *tx);
int onic_rs_get_fec(const void *port, u32 *configured, u32 *active);
int onic_rs_set_fec(const void *port, u32 bits);
int onic_rs_fec_stats(const void *port, u64 *corrected, u64 *uncorrectable);
bool onic_rs_loopback(const void *port);
int onic_rs_set_loopback(const void *port, bool on);
int onic_rs_set_rx_hash(const void *port, bool on);
int onic_rs_register_test(const void *port);
size_t onic_rs_lb_frame(const u8 *mac, u32 seq, u8 *buf, size_t len);
s64 onic_rs_lb_seq(const u8 *mac, const u8 *buf, size_t len);
void onic_rs_dev_info(const void *port, struct onic_dev_info *out);
int onic_rs_queue_dump(const void *port, u16 qid, struct onic_queue_dump *out);
int onic_rs_queue_stats(const void *port, u16 qid, struct onic_queue_stats *out);
void onic_rs_base_stats(const void *port, u16 active, struct onic_queue_stats *out);
int onic_rs_get_coalesce(const void *port, u32 *usecs, u32 *frames, bool *adaptive);
int onic_rs_set_coalesce(const void *port, u32 usecs, u32 frames, bool adaptive);
int onic_rs_set_rx_level(const void *port, u16 qid, u8 level);
extern const struct onic_rmon_range onic_rs_rmon_ranges[ONIC_RMON_HIST + 1];
int onic_rs_change_mtu(const void *port, u32 mtu);
void onic_rs_mtu_range(const void *port, unsigned int *min, unsigned int *max);
void onic_rs_rss_get(const void *port, u32 *indir, u8 *key);
int onic_rs_rss_set(const void *port, const u32 *indir, const u8 *key);
int onic_rs_rss_reset(const void *port);
void onic_rs_get_layout(const void *port, struct onic_layout *out);
int onic_rs_check_layout(const void *port, u32 queues, u32 tx_ring, u32 rx_ring);
int onic_rs_set_layout(const void *port, u32 queues, u32 tx_ring, u32 rx_ring);
u64 onic_rs_rx_flow_hash(u32 flow_type);
int onic_rs_set_rx_flow_hash(u32 flow_type, u64 fields);

/* ---- C helpers the Rust side calls (os-linux/src/kernel/ffi.rs), in onic_main.c (the context
 * ones in onic_ctx.c) ---- */
void *onic_kmalloc(size_t size);
void onic_kfree(void *p);
void *onic_alloc_pages_exact(size_t size);
void onic_free_pages_exact(void *p, size_t size);
void onic_printk(int level, const u8 *msg, size_t len);
void onic_rust_panic(const u8 *msg, size_t len);
void *onic_lock_new(void);
void onic_lock_free(void *lock);
void onic_lock(void *lock);
void onic_unlock(void *lock);
void onic_ctx_lock(struct mutex *lock);
void onic_ctx_unlock(struct mutex *lock);
void onic_udelay(u32 us);
/* Brackets every call into the Rust side from a context that may not sleep, where the CPU's
 * state does not tell it already (onic_ctx.c). */
void onic_atomic_enter(void);
void onic_atomic_exit(void);
bool onic_may_sleep(void);
bool onic_dma_cut_off(void *dev);
void onic_ndelay(u32 ns);
void *onic_dma_alloc_coherent(void *dev, size_t len, u64 *dma);
void onic_dma_free_coherent(void *dev, size_t len, void *cpu, u64 dma);
void *onic_page_alloc(void);
void onic_page_free(void *cpu);
int onic_dma_map_page(void *dev, void *cpu, int dir, u64 *dma);
void onic_dma_unmap_page(void *dev, u64 dma, int dir);
bool onic_dma_sync_is_noop(void *dev);
void onic_dma_sync(void *dev, u64 dma, size_t off, size_t len, int dir, bool for_cpu);
int onic_dma_map_single(void *dev, u8 *cpu, size_t len, int dir, u64 *dma);
void onic_dma_unmap_single(void *dev, u64 dma, size_t len, int dir);
void *onic_dma_to_virt(struct device *dev, u64 dma);
void onic_sim_irq(void *sim, u8 func, u16 vector);

/* ---- datapath helpers the Rust side calls (os-linux/src/kernel/kos.rs), in onic_dp.c ---- */
void *onic_qmem_new(struct onic_ndev *nd, u16 qid, u32 pages, bool page_pool, int *err);
void onic_qmem_free(void *qmem);
void *onic_pp_alloc(void *qmem, u8 **virt, u64 *dma);
void onic_pp_put(void *qmem, void *page, u32 dirty, bool direct);
void onic_pp_stats(void *qmem, u64 *out);
void *onic_rx_build(void *qmem, struct napi_struct *napi, u8 *virt, u16 off, u16 len, u8 meta);
void onic_rx_deliver(struct napi_struct *napi, void *skb, u16 qid, u32 hash, u8 kind);
u8 *onic_skb_data(void *skb, size_t *len);
void onic_skb_done(void *skb, int budget);
u8 *onic_xdpf_data(void *frame, size_t *len);
void onic_xdpf_return(void *frame);
u32 onic_xdp_run(void *prog, void *qmem, u8 *hard_start, u32 frame_sz, u32 *off, u32 hash,
		 u32 hash_type, bool has_hash);
bool onic_xdp_prog_reads_meta(void *prog);
int onic_xdp_redirect(void *prog, void *qmem, u8 *hard_start, u16 off, u16 len, u8 meta);
void onic_synchronize_net(void);

/* ---- AF_XDP zero copy, in onic_zc.c: the Rust side's helpers (kos.rs), then the glue's ---- */
u32 onic_xsk_room(struct onic_ndev *nd, u16 qid);
u32 onic_xsk_alloc_batch(struct onic_ndev *nd, u16 qid, struct onic_xsk_chunk *out, void **xdps,
			 u32 max);
void onic_xsk_free(void *xdp);
int onic_xsk_redirect(struct onic_ndev *nd, void *prog, void *xdp, u16 off, u16 len, u8 meta);
void *onic_rx_copy(struct napi_struct *napi, const u8 *frame, u32 len, u8 meta);
u32 onic_xsk_tx_take(struct onic_ndev *nd, u16 qid, struct onic_xsk_chunk *out, u32 max);
void onic_xsk_tx_done(struct onic_ndev *nd, u16 qid);
struct xsk_buff_pool;
int onic_xsk_pool_setup(struct onic_ndev *nd, struct xsk_buff_pool *pool, u16 q,
			struct netlink_ext_ack *extack);
int onic_xsk_wakeup(struct net_device *netdev, u32 q, u32 flags);
bool onic_xsk_poll_end(struct onic_qv *qv);
#ifdef ONIC_HAVE_XDP_METADATA
extern const struct xdp_metadata_ops onic_xdp_metadata_ops;
#endif

/* ---- onic_netdev.c ---- */
struct onic_ndev *onic_ndev_alloc(struct device *parent, const char *name, u16 max_queues, u16 queues);
int onic_ndev_register(struct onic_ndev *nd);
void onic_ndev_unregister(struct onic_ndev *nd, bool registered);
void onic_ndev_free(struct onic_ndev *nd);
void onic_restart_queue(struct onic_ndev *nd, u16 q);

/* ---- onic_qctl.c ---- */
enum hrtimer_restart onic_tx_timer_fn(struct hrtimer *t);
void onic_tx_timer_arm(struct onic_qv *qv);
void onic_tx_timer_cancel(struct onic_qv *qv);
void onic_queue_quiesce(struct onic_ndev *nd, u16 q);
void onic_queue_resume(struct onic_ndev *nd, u16 q, bool stack_restarted);

/* ---- onic_queues.c ---- */
void onic_queues_attach(struct onic_ndev *nd);
void onic_queues_set_napi(struct onic_ndev *nd, u16 n, bool on);

/* onic_dim.c: adaptive RX moderation with the kernel's DIM library. */
void onic_dim_init(struct onic_qv *qv);
void onic_dim_sample(struct onic_qv *qv, const struct onic_poll_result *r);
void onic_dim_cancel(struct onic_qv *qv);

/* ---- onic_devlink.c ---- */
void onic_devlink_register(struct onic_ndev *nd, struct device *dev);
void onic_devlink_unregister(struct onic_ndev *nd);

#endif
