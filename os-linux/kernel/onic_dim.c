// SPDX-License-Identifier: GPL-2.0
/*
 * onic: adaptive RX interrupt moderation (ethtool -C adaptive-rx on) with the kernel's DIM
 * library. The Rust side owns the moderation (onic_core::moderation): it says in each poll's
 * result whether the queue is adaptive, at which level, and what it received so far. This file
 * only feeds DIM and carries its decisions back:
 *
 * - each completing NAPI poll of an adaptive queue is a DIM sample: the queue's received
 *   frames and bytes, and the count of completing polls (one per interrupt: a poll completes,
 *   re-arms, and the next interrupt starts the next round);
 * - when DIM settles on another profile it schedules dim.work, which runs in process context
 *   and hands the profile index to onic_rs_set_rx_level (a compare-exchange in the core, no
 *   lock): the queue's next poll writes the new table entries with its CMPT CIDX doorbell;
 * - the work may run after adaptive-rx went off: the core refuses it, the fixed setting stays.
 *
 * os-linux/README.md's lock/context table has the rules.
 */
#include "onic_glue.h"

static void onic_dim_work(struct work_struct *w)
{
	struct dim *dim = container_of(w, struct dim, work);
	struct onic_qv *qv = container_of(dim, struct onic_qv, dim);

	/* -EINVAL only when adaptive moderation went off meanwhile (the profile index is one of
	 * DIM's five, the queue one of the port's): nothing to undo. */
	onic_rs_set_rx_level(qv->nd->port, qv->qid, dim->profile_ix);
	dim->state = DIM_START_MEASURE;
}

/* At allocation, once per queue vector. */
void onic_dim_init(struct onic_qv *qv)
{
	INIT_WORK(&qv->dim.work, onic_dim_work);
	/* The QDMA's timer starts at the first completion not yet reported (hardware.md §8.5). */
	qv->dim.mode = DIM_CQ_PERIOD_MODE_START_FROM_EQE;
}

/* From the queue's NAPI poll, when it completes: a sample of an adaptive queue. The first one
 * after adaptive-rx went on starts DIM over at the level the core gave the queue. */
void onic_dim_sample(struct onic_qv *qv, const struct onic_poll_result *r)
{
	struct dim_sample s;

	if (!r->adaptive) {
		qv->dim_on = false;
		return;
	}
	if (!qv->dim_on) {
		qv->dim.profile_ix = r->level;
		qv->dim.state = DIM_START_MEASURE;
		qv->dim.tune_state = DIM_PARKING_ON_TOP;
		qv->dim.steps_left = 0;
		qv->dim.steps_right = 0;
		qv->dim.tired = 0;
		qv->dim_on = true;
	}
	qv->dim_events++;
	dim_update_sample(qv->dim_events, r->rx_packets, r->rx_bytes, &s);
	net_dim(&qv->dim, s);
}

/* RTNL held, the queue's NAPI disabled (stop, removal): no new decision can be scheduled; a
 * running one finishes before the port may go. */
void onic_dim_cancel(struct onic_qv *qv)
{
	cancel_work_sync(&qv->dim.work);
}
