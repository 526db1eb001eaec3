# The kernel's "netdev" generic netlink family (6.8+ for queues and page pools, 6.10+ for queue
# statistics), read with onic_nl (os-linux/vm/onic_nl.c), sourced by init.sh: its helpers (check,
# refuse, pass, fail, SLOW), the namespaces ($A: IF0 in a, $B: IF1 in b, both up with addresses)
# and the tools' paths ($IP, $PING) are those of init.sh.
#
# netlink_tests: while the ports are up: every queue names its NAPI, the page pools are listed
#   under the netdev with their queue's NAPI, the per-queue statistics add up to the netdev's and
#   move with traffic; ifdown takes the NAPIs and pools away, ifup brings them back, a channel
#   change re-binds them. On a kernel without the family (6.1) it checks the family is absent.
# netlink_after_rmmod: after the module's unload, no pool is left under IF0's interface index.
# devlink_diagnose_tests (devlink's own generic netlink family, both kernels): after the hung TX
#   engine and the frozen completion rings of init.sh, `devlink health diagnose` of the tx and
#   rx reporters shows every queue's side with the last failure, its restarts, and ring indices
#   that move with traffic. DL0 and DL1 are init.sh's devlink handles.

NL=/bin/onic_nl
NL_IFX=""

# nl ARGS...: onic_nl in namespace a (the family answers per namespace).
nl() { $A $NL "$@"; }
# nl_field FILE KEY: the values of KEY ("... KEY VALUE ...") over FILE's lines, one a line.
nl_field() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$1"; }
# nl_queue_napis: "rx|tx ID NAPI" of IF0's queues, into /tmp/nlq.
nl_queue_napis() { nl queues $IF0 | awk '$1 == "queue" { print $2, $3, $5 }' >/tmp/nlq; }
# nl_pools: IF0's page pools ("pool ID ifindex N napi N inflight N detached 0|1") into /tmp/nlp.
nl_pools() { nl pools $IF0 >/tmp/nlp; }
# nl_sysfs NAME: IF0's netdev counter NAME (ndo_get_stats64, as ip -s shows it).
nl_sysfs() { $A cat /sys/class/net/$IF0/statistics/$1; }
# nl_qsum DIR FIELD: the per-queue statistic FIELD of the DIR (rx, tx) queues in /tmp/nls.
nl_qsum() { awk -v d="$1" -v f="$2" '$1 == "qstats" && $2 == d { for (i = 4; i < NF; i++) if ($i == f) s += $(i + 1) } END { print s + 0 }' /tmp/nls; }
# nl_dev FIELD: the netdev-wide statistic FIELD (rx-packets, ...) in /tmp/nls.
nl_dev() { awk -v f="$1" '$1 == "qstats" && $2 == "dev" { for (i = 3; i < NF; i++) if ($i == f) print $(i + 1) }' /tmp/nls; }

# nl_napis_ok N: /tmp/nlq lists N RX and N TX queues, each with a NAPI id, queue q's RX and TX
# the same one, and N different ids.
nl_napis_ok() {
	awk -v n="$1" '$3 == 0 { bad = 1 } $1 == "rx" { rx[$2] = $3; nr++ } $1 == "tx" { tx[$2] = $3; nt++ }
		END { if (bad || nr != n || nt != n) exit 1
		      for (q in rx) { if (rx[q] != tx[q]) exit 1; if (seen[rx[q]]++) exit 1 }
		      exit 0 }' /tmp/nlq
}
# nl_pools_ok N: N page pools attached to IF0 (no detach time), each bound to the NAPI of one
# queue in /tmp/nlq, no two to the same.
nl_pools_ok() {
	awk -v n="$1" -v ifx="$NL_IFX" 'FNR == NR { if ($1 == "rx") napi[$3] = 1; next }
		$1 == "pool" && $10 == 0 { k++; if ($4 != ifx || !($6 in napi) || used[$6]++) bad = 1 }
		END { exit (bad || k != n) }' /tmp/nlq /tmp/nlp
}
# nl_napi_irq Q: the NAPI id of RX queue Q in /tmp/nlq and its IRQ in /tmp/nln ("ID IRQ").
nl_napi_irq() {
	id=$(awk -v q="$1" '$1 == "rx" && $2 == q { print $3 }' /tmp/nlq)
	echo "$id $(awk -v id="$id" '$1 == "napi" && $2 == id { print $4 }' /tmp/nln)"
}
# nl_napi_irqs_ok N: the NAPIs of RX queues 0..N-1 show the IRQs /proc/interrupts names
# IF0-q0.., each listed once.
nl_napi_irqs_ok() {
	q=0
	while [ $q -lt $1 ]; do
		set -- $(nl_napi_irq $q) "$1"
		want=$(awk -v n="$IF0-q$q" '$NF == n { sub(":", "", $1); print $1 }' /proc/interrupts)
		echo "queue $q: napi $1 irq $2, /proc/interrupts $want"
		[ -n "$want" ] && [ "$2" = "$want" ] || return 1
		shift 2
		q=$((q + 1))
	done
}
# nl_napi_noirq_ok N: the NAPIs of RX queues 0..N-1 are listed, without an IRQ (-1).
nl_napi_noirq_ok() {
	q=0
	while [ $q -lt $1 ]; do
		set -- $(nl_napi_irq $q) "$1"
		echo "queue $q: napi $1 irq $2"
		[ -n "$1" ] && [ "$2" = "-1" ] || return 1
		shift 2
		q=$((q + 1))
	done
}
# nl_bound N: both of the above, from fresh reads.
nl_bound() { nl_queue_napis && nl_pools && nl_napis_ok $1 && nl_pools_ok $1; }
# nl_attached: how many of IF0's pools in /tmp/nlp have no detach time.
nl_attached() { awk '$1 == "pool" && $10 == 0 { k++ } END { print k + 0 }' /tmp/nlp; }

# nl_consistent: the netdev-wide qstats equal ndo_get_stats64's counters, read between two
# reads of sysfs (so a frame of the stack's own in between cannot fail it).
nl_consistent() {
	for c in rx_packets rx_bytes tx_packets tx_bytes; do eval "L_$c=$(nl_sysfs $c)"; done
	nl qstats $IF0 >/tmp/nls || return 1
	for c in rx_packets rx_bytes tx_packets tx_bytes; do
		lo=$(eval echo "\$L_$c")
		hi=$(nl_sysfs $c)
		v=$(nl_dev $(echo $c | tr _ -))
		echo "$c: sysfs $lo..$hi, qstats $v"
		[ -n "$v" ] && [ "$v" -ge "$lo" ] && [ "$v" -le "$hi" ] || return 1
	done
}

# nl_base: reads the statistics into /tmp/nls until two reads in a row agree on NL_BASE, the
# netdev's rx packets minus its queues' (a frame arriving between onic_nl's two requests would
# skew one read), at most 5 reads.
nl_base() {
	NL_BASE=x
	k=0
	while [ $k -lt 5 ]; do
		nl qstats $IF0 >/tmp/nls
		b=$(($(nl_dev rx-packets) - $(nl_qsum rx packets)))
		[ "$b" = "$NL_BASE" ] && return 0
		NL_BASE=$b
		k=$((k + 1))
	done
}

netlink_tests() {
	echo "== the netdev netlink family (onic_nl)"
	NL_IFX=$($A cat /sys/class/net/$IF0/ifindex)
	nl dev $IF0 >/tmp/nld 2>&1
	rc=$?
	kv=$(uname -r | awk -F. '{ print $1 * 1000 + $2 }')
	if [ $rc = 2 ]; then
		check "the kernel has no netdev netlink family (Linux $(uname -r), before 6.3): nothing to check" test "$kv" -lt 6003
		return
	fi
	sed 's/^/    | /' /tmp/nld
	# BASIC | REDIRECT | NDO_XMIT (more bits may come with other features).
	f=$(nl_field /tmp/nld xdp-features)
	check "dev-get: $IF0's xdp-features ($f) has basic, redirect and ndo-xmit" test $((f & 7)) = 7
	if [ "$kv" -lt 6010 ]; then
		echo "    | Linux $(uname -r): no queue statistics before 6.10, queue NAPIs and page pools before 6.8; the rest is skipped"
		return
	fi
	n=$($A ethtool -l $IF0 | awk '/^Current/ { c = 1 } c && /^Combined:/ { print $2 }')
	nl_queue_napis
	sed 's/^/    | /' /tmp/nlq
	check "queue-get: each of the $n RX and TX queues of $IF0 names its NAPI (one per queue index, RX and TX the same)" nl_napis_ok $n
	nl_pools
	sed 's/^/    | /' /tmp/nlp
	check "page-pool-get: $n pools under $IF0 (ifindex $NL_IFX), each bound to its queue's NAPI" nl_pools_ok $n
	# napi-get: the queue NAPIs with their IRQ (netif_napi_set_irq): on the PCI card the
	# number of the queue vector's IRQ (/proc/interrupts, "$IF0-qN"); the model inside the
	# kernel raises no Linux interrupt, so none is set there.
	nl napis $IF0 >/tmp/nln
	sed 's/^/    | /' /tmp/nln
	if [ $MODE = pci ]; then
		check "napi-get: the NAPI of each of $IF0's $n queues shows its vector's IRQ" nl_napi_irqs_ok $n
	else
		check "napi-get: the NAPIs of $IF0's $n queues are listed, with no IRQ (the model has none)" nl_napi_noirq_ok $n
	fi

	# Per-queue statistics: the netdev's sum is ndo_get_stats64's, and the queues move with
	# the traffic by what the netdev's counters moved: the difference between the netdev's sum
	# and the queues' (the base: queue indices not in use, which see no traffic) stays put.
	check "qstats-get: the netdev's rx/tx packets and bytes are ip -s link's" nl_consistent
	nl_base
	O0=$NL_BASE
	R0=$(nl_qsum rx packets)
	T0=$(nl_qsum tx packets)
	B0=$(nl_qsum rx bytes)
	check "500 pings a -> b (flood)" timeout $((30 * SLOW)) $A $PING -q -f -c 500 -W 2 192.0.2.2
	nl_base
	sed 's/^/    | /' /tmp/nls
	R1=$(nl_qsum rx packets)
	T1=$(nl_qsum tx packets)
	B1=$(nl_qsum rx bytes)
	# (a reply or two may be lost under the flood: 90 % of them)
	check "the queues' rx packets moved with the replies (+$((R1 - R0)) >= 450, +$((B1 - B0)) bytes) and tx with the requests (+$((T1 - T0)) >= 500)" \
		test $((R1 - R0)) -ge 450 -a $((B1 - B0)) -ge $(((R1 - R0) * 60)) -a $((T1 - T0)) -ge 500
	check "and by what the netdev's rx packets moved (base: netdev minus queues, $O0 before, $NL_BASE after)" test "$O0" = "$NL_BASE"
	check "alloc-fail is reported per RX queue" sh -c "grep -q '^qstats rx 0 .* alloc-fail [0-9]' /tmp/nls"
	check "qstats-get after the traffic: the netdev's sum is still ip -s link's" nl_consistent

	# ifdown: no queue is served by a NAPI, no pool stays attached; the pools' pages come back
	# and the pools go (within the deadline); ifup binds new ones.
	check "ip link set $IF0 down" $IP -n a link set $IF0 down
	nl_queue_napis
	check "queue-get after ifdown: no queue of $IF0 names a NAPI" sh -c "! awk '\$3 != 0 { f = 1 } END { exit !f }' /tmp/nlq"
	nl_pools
	check "page-pool-get after ifdown: no pool of $IF0 is attached any more" test "$(nl_attached)" = 0
	k=0
	while [ $k -lt $((30 * SLOW)) ] && nl_pools && [ -s /tmp/nlp ]; do sleep 1; k=$((k + 1)); done
	check "and every pool of $IF0 is gone within $((30 * SLOW)) s ($k s)" test ! -s /tmp/nlp
	check "ip link set $IF0 up" $IP -n a link set $IF0 up
	check "after ifup: each queue names its NAPI and $n new pools are bound to them" nl_bound $n
	# A channel change re-binds: one queue index, then the count of before.
	check "ethtool -L $IF0 combined 1" $A ethtool -L $IF0 combined 1
	check "after -L combined 1: one RX and one TX queue with a NAPI, one pool attached" nl_bound 1
	check "ethtool -L $IF0 combined $n" $A ethtool -L $IF0 combined $n
	check "after -L combined $n: $n queue NAPIs and $n pools attached again" nl_bound $n
	check "traffic flows after the netlink checks" timeout $((20 * SLOW)) $A $PING -c 3 -W 2 192.0.2.2
}

netlink_after_rmmod() {
	[ -n "$NL_IFX" ] && [ -x $NL ] || return 0
	$A $NL pools-if $NL_IFX >/tmp/nlp 2>&1
	[ $? = 2 ] && return 0
	check "page-pool-get after rmmod: no pool left under $IF0's interface index $NL_IFX" test ! -s /tmp/nlp
}

# diag REPORTER: devlink health diagnose of REPORTER on both functions, into /tmp/dldiag.
diag() { { devlink health diagnose $DL0 reporter $1 && devlink health diagnose $DL1 reporter $1; } >/tmp/dldiag 2>&1; }
# diag_field NAME: every value of NAME in /tmp/dldiag, on one line.
# (devlink prints "name: value" pairs)
diag_field() { awk -v k="$1:" '{ for (i = 1; i < NF; i++) if ($i == k) printf "%s ", $(i + 1) } END { print "" }' /tmp/dldiag; }

# diag_restarted WHY: some queue in /tmp/dldiag whose last_error is WHY shows restarts >= 1 in
# its own block (each queue: "queue: N abs_qid: M", its side's fields, then "last_error: ...").
diag_restarted() {
	awk -v why="$1" '/queue: / { r = 0 } { for (i = 1; i < NF; i++) if ($i == "restarts:") r = $(i + 1) }
		/last_error: / { w = $0; sub(/.*last_error: /, "", w); if (w == why && r >= 1) f = 1 }
		END { exit !f }' /tmp/dldiag
}

devlink_diagnose_tests() {
	echo "== devlink health diagnose"
	check "devlink health diagnose, tx reporter, both functions" diag tx
	head -c 1500 /tmp/dldiag | sed 's/^/    | /'
	echo
	check "tx diagnose: queues in use, each with its H2C ring indices, in flight, restarts and last error" sh -c \
		"grep -Eq 'queues_in_use:? [1-9]' /tmp/dldiag && grep -q ring_next_to_clean /tmp/dldiag && grep -q ring_in_flight /tmp/dldiag && grep -q last_error /tmp/dldiag && ! grep -q cmpt_pidx /tmp/dldiag"
	check "tx diagnose: the hung engine's queue says its last error was a TX timeout, and that queue was restarted" \
		diag_restarted "TX timeout"
	U0=$(diag_field ring_next_to_use)
	timeout $((20 * SLOW)) $A $PING -q -c 20 -i 0.05 -W 2 192.0.2.2 >/dev/null 2>&1
	diag tx
	U1=$(diag_field ring_next_to_use)
	check "tx diagnose: ring indices move with traffic (next_to_use $U0-> $U1)" test "$U0" != "$U1"
	check "devlink health diagnose, rx reporter, both functions" diag rx
	head -c 1500 /tmp/dldiag | sed 's/^/    | /'
	echo
	check "rx diagnose: each queue's C2H and completion indices, and no H2C ring" sh -c \
		"grep -q cmpt_pidx /tmp/dldiag && grep -q cmpt_cidx /tmp/dldiag && ! grep -q ring_next_to_use /tmp/dldiag"
	check "rx diagnose: a frozen ring's queue says its last error was an RX ring error, and that queue was restarted" \
		diag_restarted "RX or XDP_TX ring error"
}
