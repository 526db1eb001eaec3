# AF_XDP checks of the VM test (os-linux/vm/README.md, "AF_XDP"), sourced by init.sh with the
# module unloaded; they end with it unloaded again. onic_xsk (onic_xsk.c) binds AF_XDP sockets
# on $IF0's queues in namespace a and loads its own XDP filter (UDP to port 7777 into the
# socket of its queue, everything else to the stack); its peer, on $IF1 in namespace b, sends
# patterned frames with AF_PACKET and compares what comes back byte for byte.

# 1: a driver that does not offer zero copy fails the run; 0: it is a SKIP line. onic.ko offers
# it wherever its buffers go through the kernel's DMA API: the PCI card, and the model with
# sim_dma_api (MODE sim-dma). The model without it (MODE sim) has no DMA device to map a UMEM
# for, and refuses zero copy (EOPNOTSUPP): sockets bind in copy mode there.
if [ $MODE = sim ]; then XSK_ZC_REQUIRED=0; else XSK_ZC_REQUIRED=1; fi
XSK=/bin/onic_xsk
# The XSK program's own deadline and the step's (timeout), stretched on the debug kernel.
XDL=$((40 * SLOW))
XTO=$((60 * SLOW))

# xsk_start ARGS...: starts onic_xsk in namespace a in the background (XP: its pid, output in
# /tmp/xsk.out) and waits, up to 20 s (times SLOW), until its sockets are bound. Its own deadline
# (-d, else $XDL) ends it; the timeout, 20 s (times SLOW) after that, only a hung one. (A
# timeout shorter than the deadline once ended the sessions' program in the middle of their
# steps, its filter with it: the next round's frames all went to the stack.)
xsk_start() {
	rm -f /tmp/xsk.out
	xd=$XDL p=
	for a in "$@"; do
		[ "$p" = -d ] && xd=$a
		p=$a
	done
	timeout $((xd + 20 * SLOW)) $A $XSK "$@" >/tmp/xsk.out 2>&1 &
	XP=$!
	n=0
	while [ $n -lt $((100 * SLOW)) ] && ! grep -q '^bound ' /tmp/xsk.out 2>/dev/null && kill -0 $XP 2>/dev/null; do
		sleep 0.2
		n=$((n + 1))
	done
	grep -q '^bound ' /tmp/xsk.out
}
# xsk_wait: waits for onic_xsk (its own deadline ends it) and sets XRC to its exit status.
xsk_wait() {
	wait $XP
	XRC=$?
}
# kv KEY FILE: the value of the last KEY=VALUE in FILE.
kv() { tr ' ' '\n' <"$2" | sed -n "s/^$1=//p" | tail -1; }
xshow() { sed 's/^/    | /' /tmp/xsk.out /tmp/peer.out 2>/dev/null; }
# xdetail: both programs' output and the ports' drop and error counters that are not 0.
xdetail() {
	xshow
	{ $A ethtool -S $IF0 | sed 's/^ */a /'; $B ethtool -S $IF1 | sed 's/^ */b /'; } |
		grep -E 'drop|miss|err|no_page' | grep -v ': 0$' | sed 's/^/    | /'
}

# xsk_rxdrop LABEL QUEUES N XSK-ARGS...: N frames from the peer, every one received and checked
# byte for byte by the XSK program; the driver counted exactly N redirects.
xsk_rxdrop() {
	l=$1 q=$2 cnt=$3
	shift 3
	r0=$(stat rx_xdp_redirect $IF0 $A)
	if xsk_start rxdrop $IF0 -q $q -n $cnt -d $XDL -C -M $MAC1 "$@"; then
		timeout $XTO $B $XSK peer-send $IF1 -M $MAC0 -n $cnt -F 16 -g 2000 >/tmp/peer.out 2>&1
		xsk_wait
	else
		end_jobs $XP
		XRC=bind
	fi
	r=$(($(stat rx_xdp_redirect $IF0 $A) - r0))
	if [ "$XRC" = 0 ] && [ "$(kv rx /tmp/xsk.out)" = $cnt ] && [ "$(kv accounted /tmp/xsk.out)" = yes ] && [ $r = $cnt ]; then
		pass "$l rxdrop, queues $q: $cnt frames received intact, $r redirects in ethtool -S, every UMEM frame accounted"
	else
		fail "$l rxdrop, queues $q: $cnt frames (exit $XRC, $r redirects in ethtool -S)"
		xdetail
	fi
}

# xsk_l2fwd LABEL QUEUES N XSK-ARGS...: the peer sends N frames (at most 32 in flight), the XSK
# program swaps their MACs and sends them back; the peer compares each echo byte for byte.
xsk_l2fwd() {
	l=$1 q=$2 cnt=$3
	shift 3
	r0=$(stat rx_xdp_redirect $IF0 $A)
	t0=$(cnt a $IF0 tx_packets)
	PRC=none
	if xsk_start l2fwd $IF0 -q $q -n $cnt -d $XDL -C -M $MAC1 "$@"; then
		timeout $XTO $B $XSK peer-echo $IF1 -M $MAC0 -n $cnt -F 16 -W 32 -d $XDL >/tmp/peer.out 2>&1
		PRC=$?
		xsk_wait
	else
		end_jobs $XP
		XRC=bind
	fi
	r=$(($(stat rx_xdp_redirect $IF0 $A) - r0))
	t=$(($(cnt a $IF0 tx_packets) - t0))
	if [ "$XRC" = 0 ] && [ "$PRC" = 0 ] && [ "$(kv tx /tmp/xsk.out)" = $cnt ] && [ "$(kv got /tmp/peer.out)" = $cnt ] &&
		[ "$(kv accounted /tmp/xsk.out)" = yes ] && [ $r = $cnt ] && [ $t -ge $cnt ]; then
		pass "$l l2fwd, queues $q: $cnt echoes back byte for byte, $r redirects and $t frames sent in the counters, every UMEM frame accounted"
	else
		fail "$l l2fwd, queues $q: $cnt frames (exit $XRC, peer $PRC, $r redirects, $t frames sent)"
		xdetail
	fi
}

# xsk_txonly LABEL QUEUES N XSK-ARGS...: the XSK program sends N patterned frames from each of
# its sockets; the peer receives every one exactly once, byte for byte.
xsk_txonly() {
	l=$1 q=$2 cnt=$3
	shift 3
	nq=$(echo $q | tr ',' ' ' | wc -w)
	all=$((cnt * nq))
	rm -f /tmp/peer.out
	timeout $XTO $B $XSK peer-recv $IF1 -M $MAC0 -n $all -d $XDL >/tmp/peer.out 2>&1 &
	PP=$!
	n=0
	while [ $n -lt $((100 * SLOW)) ] && ! grep -q '^ready' /tmp/peer.out 2>/dev/null; do sleep 0.2; n=$((n + 1)); done
	t0=$(cnt a $IF0 tx_packets)
	timeout $XTO $A $XSK txonly $IF0 -q $q -n $cnt -d $XDL -M $MAC1 -g 2000 "$@" >/tmp/xsk.out 2>&1
	XRC=$?
	wait $PP
	PRC=$?
	t=$(($(cnt a $IF0 tx_packets) - t0))
	if [ "$XRC" = 0 ] && [ "$PRC" = 0 ] && [ "$(kv comp /tmp/xsk.out)" = $all ] && [ "$(kv got /tmp/peer.out)" = $all ] &&
		[ "$(kv accounted /tmp/xsk.out)" = yes ] && [ $t -ge $all ]; then
		pass "$l txonly, queues $q: $all frames sent and completed, all received byte for byte, $t frames in tx_packets, every UMEM frame accounted"
	else
		fail "$l txonly, queues $q: $all frames (exit $XRC, peer $PRC, $t frames in tx_packets)"
		xdetail
	fi
}

# xsk_suite LABEL BIND-MODE: one queue (RSS steers every flow to queue 2) and several (queues 1
# and 2; 0 to 3), need_wakeup on and off, shared UMEM and one each.
xsk_suite() {
	lb=$1
	m=$2
	check "$lb: ethtool -X weight 0 0 1 0 steers every flow to queue 2" $A ethtool -X $IF0 weight 0 0 1 0
	for w in 1 0; do
		xsk_rxdrop "$lb, need_wakeup $w:" 2 500 -m $m -w $w
		xsk_l2fwd "$lb, need_wakeup $w:" 2 500 -m $m -w $w
		xsk_txonly "$lb, need_wakeup $w:" 2 500 -m $m -w $w
	done
	check "$lb: ethtool -X weight 0 1 1 0 spreads the flows over queues 1 and 2" $A ethtool -X $IF0 weight 0 1 1 0
	xsk_l2fwd "$lb, shared UMEM:" 1,2 500 -m $m
	PQ=$(kv per_queue /tmp/xsk.out)
	check "$lb: both queues' sockets took frames (queue:rx/tx $PQ)" sh -c "echo '$PQ' | grep -Eq '^1:[1-9][0-9]*/[0-9]+,2:[1-9]'"
	xsk_rxdrop "$lb, a UMEM each, need_wakeup 0:" 1,2 500 -m $m -U each -w 0
	check "$lb: ethtool -X equal 4" $A ethtool -X $IF0 equal 4
	xsk_l2fwd "$lb, a UMEM each:" 0,1,2,3 500 -m $m -U each
	echo "    | FIGURE: $lb: 16 flows over 4 queues, queue:rx/tx $(kv per_queue /tmp/xsk.out)"
	xsk_txonly "$lb, shared UMEM:" 0,1,2,3 250 -m $m
	# A UMEM headroom: in zero copy the queue's C2H buffers shrink from 3520 to 2048 bytes to
	# leave it in each 4 KiB chunk (more than 320 and up to 1792 bytes), then to 1792 (up to
	# 2048); more is refused at bind.
	check "$lb: ethtool -X weight 0 0 1 0 (queue 2 again)" $A ethtool -X $IF0 weight 0 0 1 0
	xsk_l2fwd "$lb, UMEM headroom 1024:" 2 500 -m $m -H 1024
	xsk_rxdrop "$lb, UMEM headroom 256:" 2 500 -m $m -H 256
	# 2 KiB chunks (DPDK's AF_XDP default): in zero copy the queue's buffers are the 1792-byte
	# entry the driver programs, which reach the chunk's end; frames up to 1514 bytes echo whole.
	xsk_l2fwd "$lb, 2 KiB chunks:" 2 500 -m $m -Z 2048
	xsk_rxdrop "$lb, 2 KiB chunks:" 2 500 -m $m -Z 2048
	if [ $m = zc ]; then
		timeout $XTO $A $XSK probe $IF0 -q 2 -H 2100 >/tmp/xsk.out 2>&1
		HRC=$?
		sed 's/^/    | /' /tmp/xsk.out
		check "$lb: 2100 bytes of UMEM headroom: zero copy refused with EINVAL (no buffer holds a full frame in the rest), copy mode binds (exit $HRC)" \
			sh -c "[ $HRC = 3 ] && grep -q 'zero-copy bind: Invalid argument' /tmp/xsk.out"
		timeout $XTO $A $XSK probe $IF0 -q 2 -Z 2048 -H 256 >/tmp/xsk.out 2>&1
		HRC=$?
		sed 's/^/    | /' /tmp/xsk.out
		check "$lb: 2 KiB chunks with 256 bytes of UMEM headroom: zero copy refused with EINVAL (1792 bytes cannot hold the RX headroom and a full frame) (exit $HRC)" \
			sh -c "[ $HRC = 3 ] && grep -q 'zero-copy bind: Invalid argument' /tmp/xsk.out"
	fi
	check "$lb: ethtool -X equal 4" $A ethtool -X $IF0 equal 4
}

# xsk_round_why: after a failed echo round, the peer's report and where the frames went: every
# counter of both ports and stacks that moved since /tmp/xr.before, and the filter.
xsk_round_why() {
	sed 's/^/    | /' /tmp/peer.out
	port_counters >/tmp/xr.after
	moved /tmp/xr.before /tmp/xr.after | sed 's/^/    | /'
	{ $IP -n a link show $IF0; $A ethtool -x $IF0; } 2>&1 | sed 's/^/    | /'
}

# (port_counters, moved and port_sum: init.sh)
# port_drops: the frames both ports counted as dropped or missed (ring full), RX and TX.
port_drops() { port_sum rx_dropped rx_missed_errors rx_fifo_errors tx_dropped; }
# xsk_round DESC: 200 frames through the running l2fwd program under load; every echo that
# arrives must be byte for byte, and a frame that does not must be counted as a drop by a port
# (the TCP load fills the rings: a ring that overflows drops frames, and counts them).
xsk_round() {
	d0=$(port_drops)
	port_counters >/tmp/xr.before
	timeout $XTO $B $XSK peer-echo $IF1 -M $MAC0 -n 200 -F 16 -W 32 -d $XDL >/tmp/peer.out 2>&1
	d=$(($(port_drops) - d0))
	miss=$(kv missing /tmp/peer.out)
	# A round with no echo at all is a dead socket path, whatever the load dropped besides.
	if [ "$(kv bad /tmp/peer.out)" = 0 ] && [ "$(kv dup /tmp/peer.out)" = 0 ] && [ -n "$miss" ] && [ "$miss" -le $d ] &&
		[ "$miss" -lt 200 ]; then
		pass "$1: 200 frames, $((200 - miss)) echoes back byte for byte, $miss lost ($d drops counted by the ports)"
	else
		fail "$1: 200 frames, every echo byte for byte and every loss counted ($d drops counted by the ports)"
		xsk_round_why
	fi
}

# xsk_round_quiet DESC: the TCP load paused (its client $LC stopped, its socket buffers given 2 s
# to drain), 200 frames through the running l2fwd program: every one comes back, byte for byte.
xsk_round_quiet() {
	kill -STOP $LC
	sleep 2
	port_counters >/tmp/xr.before
	timeout $XTO $B $XSK peer-echo $IF1 -M $MAC0 -n 200 -F 16 -W 32 -d $XDL >/tmp/peer.out 2>&1
	kill -CONT $LC
	if [ "$(kv got /tmp/peer.out)" = 200 ] && [ "$(kv bad /tmp/peer.out)" = 0 ] && [ "$(kv dup /tmp/peer.out)" = 0 ] &&
		[ "$(kv missing /tmp/peer.out)" = 0 ]; then
		pass "$1: 200 frames, all 200 echoes back byte for byte"
	else
		fail "$1: 200 frames, all 200 echoes back byte for byte"
		xsk_round_why
	fi
}

# xsk_session LABEL BIND-MODE STEP-DESC STEP-CMD: binds l2fwd sockets on queues 0 and 1 (the
# filter swapped for a fresh copy every 0.7 s), an echo round, the step while the sockets stay
# bound, the link back, another round under load and one with the load paused, then SIGTERM:
# the program, still running, unbinds and accounts its frames.
xsk_session() {
	if ! xsk_start l2fwd $IF0 -q 0,1 -m $2 -S 700 -d $((300 * SLOW)) -C -M $MAC1; then
		fail "$1: bind l2fwd on queues 0,1 under load"
		end_jobs $XP
		xshow
		return
	fi
	xsk_round "$1: bound under load"
	check "$1: $3 while the sockets are bound" sh -c "$4"
	check "$1: $IF0 has its carrier after it" carrier yes $IF0 $A
	xsk_round "$1: after $3"
	xsk_round_quiet "$1: after $3, the load paused"
	if kill -TERM $XP 2>/dev/null; then alive=yes; else alive=no; fi
	xsk_wait
	sed 's/^/    | /' /tmp/xsk.out
	check "$1: onic_xsk, running all along ($alive), unbinds on SIGTERM with every UMEM frame accounted, the filter swapped $(kv swaps /tmp/xsk.out) times" \
		test "$alive" = yes -a "$XRC" = 0 -a "$(kv accounted /tmp/xsk.out)" = yes -a "$(kv swaps /tmp/xsk.out)" -ge 1
}

# xsk_load LABEL BIND-MODE: the sessions under TCP load (iperf3 a -> b, 4 streams, whose ACKs
# arrive on the XSK queues too and pass to the stack): ring resize, channel changes, link down/up.
xsk_load() {
	check "$1: ethtool -L combined 4, -X equal 2 (flows on queues 0 and 1)" sh -c \
		"$A ethtool -L $IF0 combined 4 && $A ethtool -X $IF0 equal 2"
	$B iperf3 -s -p 5201 >/dev/null 2>&1 &
	LS=$!
	listening "$B" 5201
	RX0=$(cnt b $IF1 rx_bytes)
	$A iperf3 -c 192.0.2.2 -p 5201 -t 900 -P 4 >/dev/null 2>&1 &
	LC=$!
	sleep 2
	xsk_session "$1" $2 "ethtool -G rx 255 tx 255" "$A ethtool -G $IF0 rx 255 tx 255"
	xsk_session "$1" $2 "ethtool -L combined 3" "$A ethtool -L $IF0 combined 3 && $A ethtool -X $IF0 equal 2"
	xsk_session "$1" $2 "ip link set down and up" "$IP -n a link set $IF0 down && sleep 1 && $IP -n a link set $IF0 up"
	if xsk_start l2fwd $IF0 -q 0,1 -m $2 -d $((120 * SLOW)) -C -M $MAC1; then
		refuse "$1: ethtool -L combined 1 is refused while a socket is bound on queue 1" $A ethtool -L $IF0 combined 1
		xsk_round "$1: after the refused -L"
		kill -TERM $XP
	fi
	xsk_wait
	check "$1: ethtool -L combined 4 once unbound" $A ethtool -L $IF0 combined 4
	RX1=$(cnt b $IF1 rx_bytes)
	check "$1: iperf3 moved data all along ($((RX1 - RX0)) bytes received)" test $((RX1 - RX0)) -gt 1000000
	end_jobs $LC $LS
}

# xsk_end LABEL BIND-MODE: kill -9 with sockets bound and frames arriving, then rmmod with
# sockets bound and frames arriving; the module unloads.
xsk_end() {
	$A ethtool -X $IF0 equal 2
	if xsk_start l2fwd $IF0 -q 0,1 -m $2 -d $XDL; then
		timeout $XTO $B $XSK peer-send $IF1 -M $MAC0 -n 5000 -F 16 -g 2000 >/dev/null 2>&1 &
		PS=$!
		sleep 2
		kill -9 $XP
		wait $XP 2>/dev/null
		end_jobs $PS
		n=0
		while [ $n -lt $((50 * SLOW)) ] && $IP -n a link show $IF0 | grep -q 'xdp'; do sleep 0.2; n=$((n + 1)); done
		check "$1: after kill -9 of onic_xsk, its filter went with it" sh -c "! $IP -n a link show $IF0 | grep -q xdp"
		check "$1: ping after the kill" timeout 20 $A $PING -c 3 -W 2 192.0.2.2
	else
		fail "$1: bind l2fwd for the kill"
		xshow
	fi
	xsk_rxdrop "$1, bound again after the kill:" 0,1 300 -m $2
	if xsk_start l2fwd $IF0 -q 0,1 -m $2 -d $XDL; then
		timeout $XTO $B $XSK peer-send $IF1 -M $MAC0 -n 20000 -F 16 -g 2000 >/dev/null 2>&1 &
		PS=$!
		sleep 2
		check "$1: rmmod with AF_XDP sockets bound and frames arriving" timeout 60 rmmod onic
		xsk_wait
		end_jobs $PS
		sed 's/^/    | /' /tmp/xsk.out
		check "$1: onic_xsk saw its device go and ended (exit $XRC, 4 = device gone)" test "$XRC" = 4
	else
		fail "$1: bind l2fwd for the rmmod"
		xshow
		rmmod onic
	fi
	refuse "$1: the netdevs are gone" $IP -n a link show $IF0
}

# xsk_up: the module loaded, both ports up in their namespaces, 4 channels on $IF0.
xsk_up() {
	check "AF_XDP: insmod onic.ko" timeout 30 insmod $KO $SIMARGS
	card_netdevs
	check "AF_XDP: ports up in their namespaces ($IF0, $IF1)" ports_up
	check "AF_XDP: ethtool -L $IF0 combined 4" $A ethtool -L $IF0 combined 4
	check "AF_XDP: $IF0 has its carrier" carrier yes $IF0 $A
	MAC0=$($A cat /sys/class/net/$IF0/address)
	MAC1=$($B cat /sys/class/net/$IF1/address)
}

echo "== AF_XDP (onic_xsk)"
xsk_up
$A $XSK probe $IF0 -q 0 >/tmp/xsk.out 2>&1
ZRC=$?
sed 's/^/    | /' /tmp/xsk.out
XSK_MODES=copy
case $ZRC in
0) pass "AF_XDP: the driver offers zero copy (a zero-copy bind on queue 0 works)" ; XSK_MODES="copy zc" ;;
3) if [ "$XSK_ZC_REQUIRED" = 1 ]; then fail "AF_XDP: zero copy not offered by the driver (XSK_ZC_REQUIRED=1)"; else echo "SKIP zero copy: not offered by the driver"; fi ;;
*) fail "AF_XDP: onic_xsk probe failed (exit $ZRC)" ;;
esac
first=1
for XM in $XSK_MODES; do
	[ $first = 1 ] || xsk_up
	first=0
	xsk_suite "AF_XDP $XM" $XM
	xsk_load "AF_XDP $XM under load" $XM
	xsk_end "AF_XDP $XM" $XM
done
