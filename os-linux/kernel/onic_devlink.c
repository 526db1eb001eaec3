// SPDX-License-Identifier: GPL-2.0
/*
 * onic: devlink, one instance per function (its PCI function, or in simulation the platform
 * device onic-sim.<f>): `devlink dev info` (driver, the shell's build stamp and the port's CMAC
 * version, the board's PCI IDs) and two health reporters, "tx" and "rx", for the queue
 * failures the driver already recovers from (a TX timeout or TX ring error; a frozen completion
 * ring, bad lengths or another RX ring error). Reporting, dumping, diagnosing and recovering go
 * through the Rust side; the locking is in os-linux/README.md.
 *
 * Lock order: the devlink instance lock, then RTNL. devlink holds its lock around the recover
 * and (6.12) dump and diagnose callbacks, also when they run from devlink_health_report; so the reset work
 * reports without RTNL, and the callbacks take RTNL themselves.
 */
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <net/devlink.h>

#include "onic_compat.h"
#include "onic_glue.h"

struct onic_dl {
	struct onic_ndev *nd;
	/* The last failure reported per queue, TX ([0]) and RX ([1]) side, for diagnose: the
	 * driver's static descriptions (onic_queue_failed), NULL before any. */
	const char *last_why[2][ONIC_MAX_QUEUES];
};

/* A report's context: the queue, and whether the reporter's recover restarted it. */
struct onic_health_ctx {
	u16 q;
	bool recovered;
};

static int onic_dl_info_get(struct devlink *dl, struct devlink_info_req *req,
			    struct netlink_ext_ack *extack)
{
	struct onic_ndev *nd = ((struct onic_dl *)devlink_priv(dl))->nd;
	struct onic_dev_info info;
	char buf[32];
	int err;

#ifdef ONIC_HAVE_DEVLINK_DRIVER_NAME_PUT
	err = devlink_info_driver_name_put(req, ONIC_DRV_NAME);
	if (err)
		return err;
#endif
	snprintf(buf, sizeof(buf), "%04x:%04x", nd->board_vendor, nd->board_device);
	err = devlink_info_version_fixed_put(req, DEVLINK_INFO_VERSION_GENERIC_BOARD_ID, buf);
	if (err)
		return err;
	onic_rs_dev_info(nd->port, &info);
	/* BUILD_STATUS: MMDDhhmm unless the build set it (hardware.md §2.2). */
	snprintf(buf, sizeof(buf), "%08x", info.shell_build);
	err = devlink_info_version_running_put(req, "fw.shell.build", buf);
	if (err)
		return err;
	/* CORE_VERSION: 0x301 is the CMAC 3.1 of the shell (hardware.md §10.1). */
	snprintf(buf, sizeof(buf), "%u.%u", (info.cmac_version >> 8) & 0xff, info.cmac_version & 0xff);
	return devlink_info_version_running_put(req, "fw.cmac", buf);
}

static const struct devlink_ops onic_dl_ops = {
	.info_get = onic_dl_info_get,
};

/* Queue q's H2C side: the device's contexts, the driver's view of the stack's TX ring (read
 * under the queue's TX lock) and the health counters. RTNL held. */
static void onic_put_h2c(struct devlink_fmsg *fmsg, struct onic_ndev *nd, u16 q,
			 const struct onic_queue_dump *d)
{
	struct netdev_queue *txq = netdev_get_tx_queue(nd->netdev, q);
	struct onic_tx_state st;

	devlink_fmsg_pair_nest_start(fmsg, "h2c");
	devlink_fmsg_obj_nest_start(fmsg);
	devlink_fmsg_u32_pair_put(fmsg, "sw_pidx", d->tx_pidx);
	devlink_fmsg_u32_pair_put(fmsg, "sw_qen", d->tx_qen);
	devlink_fmsg_u32_pair_put(fmsg, "sw_err", d->tx_err);
	devlink_fmsg_u32_pair_put(fmsg, "hw_cidx", d->tx_cidx);
	devlink_fmsg_u32_pair_put(fmsg, "hw_desc_pending", d->tx_desc_pending);
	__netif_tx_lock_bh(txq);
	onic_atomic_enter();
	onic_rs_tx_state(nd->port, q, &st);
	onic_atomic_exit();
	__netif_tx_unlock_bh(txq);
	devlink_fmsg_u32_pair_put(fmsg, "ring_next_to_clean", st.next_to_clean);
	devlink_fmsg_u32_pair_put(fmsg, "ring_next_to_use", st.next_to_use);
	devlink_fmsg_u32_pair_put(fmsg, "ring_in_flight", st.in_flight);
	devlink_fmsg_u32_pair_put(fmsg, "ring_device_cidx", st.device_cidx);
	devlink_fmsg_bool_pair_put(fmsg, "ring_error", st.error);
	devlink_fmsg_u64_pair_put(fmsg, "queue_errors", d->tx_queue_errors);
	devlink_fmsg_u64_pair_put(fmsg, "restarts", d->tx_restarts);
	devlink_fmsg_u64_pair_put(fmsg, "stall_reclaims", d->tx_stall_reclaims);
	devlink_fmsg_obj_nest_end(fmsg);
	devlink_fmsg_pair_nest_end(fmsg);
}

/* Queue q's C2H side: the C2H, completion and prefetch contexts and the health counters. */
static void onic_put_c2h(struct devlink_fmsg *fmsg, const struct onic_queue_dump *d)
{
	devlink_fmsg_pair_nest_start(fmsg, "c2h");
	devlink_fmsg_obj_nest_start(fmsg);
	devlink_fmsg_u32_pair_put(fmsg, "sw_pidx", d->rx_pidx);
	devlink_fmsg_u32_pair_put(fmsg, "sw_qen", d->rx_qen);
	devlink_fmsg_u32_pair_put(fmsg, "sw_err", d->rx_err);
	devlink_fmsg_u32_pair_put(fmsg, "hw_cidx", d->rx_cidx);
	devlink_fmsg_u32_pair_put(fmsg, "cmpt_pidx", d->cmpt_pidx);
	devlink_fmsg_u32_pair_put(fmsg, "cmpt_cidx", d->cmpt_cidx);
	devlink_fmsg_u32_pair_put(fmsg, "cmpt_color", d->cmpt_color);
	devlink_fmsg_u32_pair_put(fmsg, "cmpt_valid", d->cmpt_valid);
	devlink_fmsg_u32_pair_put(fmsg, "cmpt_err", d->cmpt_err);
	devlink_fmsg_u32_pair_put(fmsg, "cmpt_timer_idx", d->cmpt_timer_idx);
	devlink_fmsg_u32_pair_put(fmsg, "cmpt_counter_idx", d->cmpt_counter_idx);
	devlink_fmsg_u32_pair_put(fmsg, "pfch_valid", d->pfch_valid);
	devlink_fmsg_u32_pair_put(fmsg, "pfch_err", d->pfch_err);
	devlink_fmsg_u64_pair_put(fmsg, "queue_errors", d->rx_queue_errors);
	devlink_fmsg_u64_pair_put(fmsg, "restarts", d->rx_restarts);
	devlink_fmsg_u64_pair_put(fmsg, "stall_polls", d->rx_stall_polls);
	devlink_fmsg_u64_pair_put(fmsg, "bad_length", d->rx_bad_length);
	devlink_fmsg_obj_nest_end(fmsg);
	devlink_fmsg_pair_nest_end(fmsg);
}

/* One queue index: the device's contexts and the counters (the Rust side), the H2C side, the
 * C2H side or both; with the last failure reported of that side (diagnose). RTNL held. */
static void onic_put_queue(struct devlink_fmsg *fmsg, struct onic_ndev *nd, u16 q, bool h2c, bool c2h,
			   const char *last)
{
	struct onic_queue_dump d;
	int err = onic_rs_queue_dump(nd->port, q, &d);

	devlink_fmsg_obj_nest_start(fmsg);
	devlink_fmsg_u32_pair_put(fmsg, "queue", q);
	if (err) {
		devlink_fmsg_u32_pair_put(fmsg, "error", -err);
		devlink_fmsg_obj_nest_end(fmsg);
		return;
	}
	devlink_fmsg_u32_pair_put(fmsg, "abs_qid", d.abs);
	if (h2c)
		onic_put_h2c(fmsg, nd, q, &d);
	if (c2h)
		onic_put_c2h(fmsg, &d);
	if (last)
		devlink_fmsg_string_pair_put(fmsg, "last_error", last);
	devlink_fmsg_obj_nest_end(fmsg);
}

/* dump: the reported queue (from a report), or every queue in use (devlink health dump show
 * with no dump stored). Takes RTNL (the devlink lock may be held: devlink, then RTNL). */
static int onic_health_dump(struct devlink_health_reporter *r, struct devlink_fmsg *fmsg,
			    void *priv_ctx, struct netlink_ext_ack *extack)
{
	struct onic_ndev *nd = devlink_health_reporter_priv(r);
	struct onic_health_ctx *ctx = priv_ctx;
	u16 q;

	rtnl_lock();
	devlink_fmsg_bool_pair_put(fmsg, "running", netif_running(nd->netdev));
	devlink_fmsg_arr_pair_nest_start(fmsg, "queues");
	if (netif_running(nd->netdev)) {
		for (q = 0; q < nd->open_queues; q++)
			if (!ctx || ctx->q == q)
				onic_put_queue(fmsg, nd, q, true, true, NULL);
	}
	devlink_fmsg_arr_pair_nest_end(fmsg);
	rtnl_unlock();
	return 0;
}

/* recover: the reported queue restarted in place (a report's auto-recovery), or, asked for by
 * the user (devlink health recover), every queue in use. Takes RTNL. */
static int onic_health_recover(struct devlink_health_reporter *r, void *priv_ctx,
			       struct netlink_ext_ack *extack)
{
	struct onic_ndev *nd = devlink_health_reporter_priv(r);
	struct onic_health_ctx *ctx = priv_ctx;
	u16 q;

	rtnl_lock();
	if (netif_running(nd->netdev) && !READ_ONCE(nd->removing)) {
		for (q = 0; q < nd->open_queues; q++)
			if (!ctx || ctx->q == q)
				onic_restart_queue(nd, q);
	}
	if (ctx)
		ctx->recovered = true;
	rtnl_unlock();
	return 0;
}

/* diagnose: the reporter's side of every queue in use, now (ring indices and contexts, in
 * flight, restarts, errors, the last failure reported). Takes RTNL like dump. */
static int onic_health_diagnose(struct devlink_health_reporter *r, struct devlink_fmsg *fmsg,
				struct netlink_ext_ack *extack)
{
	struct onic_ndev *nd = devlink_health_reporter_priv(r);
	struct onic_dl *dl = devlink_priv(nd->devlink);
	bool rx = r == nd->rx_reporter;
	u16 q;

	rtnl_lock();
	devlink_fmsg_bool_pair_put(fmsg, "running", netif_running(nd->netdev));
	devlink_fmsg_u32_pair_put(fmsg, "queues_in_use", nd->open_queues);
	devlink_fmsg_arr_pair_nest_start(fmsg, "queues");
	for (q = 0; q < nd->open_queues; q++) {
		const char *why = READ_ONCE(dl->last_why[rx][q]);

		onic_put_queue(fmsg, nd, q, !rx, rx, why ? why : "none");
	}
	devlink_fmsg_arr_pair_nest_end(fmsg);
	rtnl_unlock();
	return 0;
}

static const struct devlink_health_reporter_ops onic_tx_reporter_ops = {
	.name = "tx",
	.recover = onic_health_recover,
	.dump = onic_health_dump,
	.diagnose = onic_health_diagnose,
};

static const struct devlink_health_reporter_ops onic_rx_reporter_ops = {
	.name = "rx",
	.recover = onic_health_recover,
	.dump = onic_health_dump,
	.diagnose = onic_health_diagnose,
};

/* Reports queue q's failure to the tx or rx reporter (process context, no RTNL held: the reset
 * work). Returns whether devlink's recovery restarted the queue; if not (auto-recovery off, or
 * devlink aborted it), the caller restarts it itself: a queue is never left broken. */
static bool onic_devlink_report(struct onic_ndev *nd, u16 q, bool rx, const char *why)
{
	struct devlink_health_reporter *r = rx ? nd->rx_reporter : nd->tx_reporter;
	struct onic_health_ctx ctx = { .q = q };
	char msg[64];

	if (!r)
		return false;
	if (q < ONIC_MAX_QUEUES)
		WRITE_ONCE(((struct onic_dl *)devlink_priv(nd->devlink))->last_why[rx][q], why);
	snprintf(msg, sizeof(msg), "queue %u: %s", q, why);
	devlink_health_report(r, msg, &ctx);
	return ctx.recovered;
}

/* After register_netdev (process context, no RTNL). A devlink that cannot be had leaves the
 * netdev without one: nothing else depends on it. */
void onic_devlink_register(struct onic_ndev *nd, struct device *dev)
{
	struct devlink *dl;
	struct devlink_health_reporter *r;

	if (!dev)
		return;
	dl = devlink_alloc(&onic_dl_ops, sizeof(struct onic_dl), dev);
	if (!dl)
		return;
	((struct onic_dl *)devlink_priv(dl))->nd = nd;
	devlink_register(dl);
	nd->devlink = dl;
	/* No grace period: every failure is recovered (the driver restarted queues before devlink). */
	r = devlink_health_reporter_create(dl, &onic_tx_reporter_ops, 0, nd);
	nd->tx_reporter = IS_ERR(r) ? NULL : r;
	r = devlink_health_reporter_create(dl, &onic_rx_reporter_ops, 0, nd);
	nd->rx_reporter = IS_ERR(r) ? NULL : r;
	/* From here the reset work reports each failed queue here first; the release orders the
	 * reporters' pointers above before the hook (the reset work loads it with acquire). */
	smp_store_release(&nd->report_failure, onic_devlink_report);
}

/* After the netdev's unregister, which cancelled the reset work (no report runs any more);
 * devlink_unregister waits for the callbacks still running. */
void onic_devlink_unregister(struct onic_ndev *nd)
{
	if (!nd->devlink)
		return;
	WRITE_ONCE(nd->report_failure, NULL);
	if (nd->rx_reporter)
		devlink_health_reporter_destroy(nd->rx_reporter);
	if (nd->tx_reporter)
		devlink_health_reporter_destroy(nd->tx_reporter);
	nd->rx_reporter = NULL;
	nd->tx_reporter = NULL;
	devlink_unregister(nd->devlink);
	devlink_free(nd->devlink);
	nd->devlink = NULL;
}
