#!/bin/busybox sh
# /init of the VM test's initramfs (cargo xtask vm-test): loads onic.ko in simulation mode and
# checks it like a user would, then reports pass/fail to the host through QEMU's exit status
# (isa-debug-exit: 0x10 -> status 33 = pass, 0x11 -> 35 = fail).
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
# Debian's static busybox runs its own applets before anything on PATH: name iproute2's ip by
# its path (ethtool has no applet).
IP=/usr/sbin/ip
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /run /var /tmp
ln -s /run /var/run
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp

KO=/lib/modules/onic.ko
FAILS=0
PASSES=0

pass() { echo "PASS: $*"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
show() { sed 's/^/    | /' /tmp/out; }
# check DESC CMD...: CMD must succeed.
check() {
	desc=$1
	shift
	if "$@" >/tmp/out 2>&1; then pass "$desc"; else fail "$desc"; show; fi
}
# refuse DESC CMD...: CMD must fail.
refuse() {
	desc=$1
	shift
	if "$@" >/tmp/out 2>&1; then fail "$desc (was accepted)"; show; else pass "$desc"; fi
}
same() { # same DESC FILE1 FILE2
	if cmp -s "$2" "$3"; then pass "$1"; else fail "$1"; diff "$2" "$3" | sed 's/^/    | /'; fi
}

finish() {
	dmesg >/tmp/dmesg
	echo "---- kernel log ----"
	cat /tmp/dmesg
	echo "---- end of kernel log ----"
	if grep -E 'WARNING:|BUG:|Oops|Call Trace|general protection|page_pool.*(leak|stalled|inflight)|onic: sim: (driver leaked|the model recorded)|onic: Rust panic' /tmp/dmesg >/tmp/out; then
		fail "kernel log free of WARN/BUG/Oops/Call Trace/page_pool leaks/model violations"
		show
	else
		pass "kernel log free of WARN/BUG/Oops/Call Trace/page_pool leaks/model violations"
	fi
	echo "VM-TEST SUMMARY: checks that passed $PASSES, checks that failed $FAILS"
	if [ "$FAILS" = 0 ]; then
		echo "VM-TEST PASS"
		code=16
	else
		echo "VM-TEST FAIL"
		code=17
	fi
	printf "\\$(printf %o $code)" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
	poweroff -f
}

echo "== onic VM test on Linux $(uname -r)"

# The harness's own check (cargo xtask vm-test --expect-fail): a failing check must fail the run.
if grep -qw onic_vm_deliberate_fail /proc/cmdline; then
	fail "deliberate failure (onic_vm_deliberate_fail on the kernel command line)"
	finish
fi

# ---- load, netdevs, driver info, statistics names
check "insmod onic.ko sim=1" insmod $KO sim=1
check "netdev onicsim0 appears" $IP link show onicsim0
check "netdev onicsim1 appears" $IP link show onicsim1
check "ethtool -i reports driver onic" sh -c 'ethtool -i onicsim0 | grep -qx "driver: onic"'
ethtool -S onicsim0 >/tmp/stats 2>&1
sed -n '2,72p' /tmp/stats | sed 's/^ *//; s/:.*//' >/tmp/names71
same "ethtool -S lists the reference driver's 71 names first, in order" /tmp/names71 /etc/onic/stats71.txt
check "ethtool -S then lists per-queue counters" grep -q 'rx0_packets' /tmp/stats
check "ethtool -S lists the page-pool counters" grep -q 'rx_pp_alloc_fast' /tmp/stats
# stat NAME DEV [NETNS-PREFIX...]: the value of one ethtool -S entry.
stat() {
	n=$1
	d=$2
	shift 2
	"$@" ethtool -S "$d" | sed -n "s/^ *$n: //p"
}

# ---- XDP_REDIRECT (both ports still in the first namespace, so the program can name the other
# port by its index): ARP requests out of onicsim1 arrive at onicsim0, whose program redirects
# each once to onicsim1 (ndo_xdp_xmit), which sends it back over the cable; the second arrival is
# dropped by the program.
check "ip link set onicsim0 up (redirect test)" $IP link set onicsim0 up
check "ip link set onicsim1 up (redirect test)" $IP link set onicsim1 up
I0=$(cat /sys/class/net/onicsim0/ifindex)
I1=$(cat /sys/class/net/onicsim1/ifindex)
check "onicsim1 is registered right after onicsim0 (ifindex $I0, $I1)" test "$I1" = $((I0 + 1))
check "attach xdp_redirect.o natively (xdpdrv) on onicsim0" $IP link set dev onicsim0 xdpdrv obj /xdp/xdp_redirect.o sec xdp
check "ip link shows the native XDP program" sh -c "$IP link show onicsim0 | grep -q 'xdp '"
$IP addr add 198.51.100.2/24 dev onicsim1
arping -c 5 -w 4 -I onicsim1 198.51.100.1 >/dev/null 2>&1
$IP addr del 198.51.100.2/24 dev onicsim1
sleep 1
R0=$(stat rx_xdp_redirect onicsim0)
X1=$(stat tx_xdp_xmit onicsim1)
D0=$(stat rx_xdp_drop onicsim0)
check "onicsim0 redirected the ARP requests (rx_xdp_redirect=$R0)" test "${R0:-0}" -ge 5
check "onicsim1 sent them through ndo_xdp_xmit (tx_xdp_xmit=$X1)" test "${X1:-0}" -ge 5
check "their second arrival was dropped by the program (rx_xdp_drop=$D0)" test "${D0:-0}" -ge 5
check "detach xdp_redirect.o" $IP link set dev onicsim0 xdpdrv off
$IP link set onicsim0 down
$IP link set onicsim1 down

# ---- each port in its own namespace, addresses, ping across the model's cable
$IP netns add a
$IP netns add b
$IP link set onicsim0 netns a
$IP link set onicsim1 netns b
A="$IP netns exec a"
B="$IP netns exec b"
$IP -n a link set lo up
$IP -n b link set lo up
$IP -n a addr add 192.0.2.1/24 dev onicsim0
$IP -n b addr add 192.0.2.2/24 dev onicsim1
check "ip link set onicsim0 up" $IP -n a link set onicsim0 up
check "ip link set onicsim1 up" $IP -n b link set onicsim1 up
sleep 1
check "ping a -> b across the model's cable" $A ping -c 3 -W 2 192.0.2.2
check "ping b -> a" $B ping -c 2 -W 2 192.0.2.1
check "ethtool -S counts the frames" sh -c "$B ethtool -S onicsim1 | grep -Eq 'stat_rx_total_pkts: [1-9]'"

# ---- ethtool round trips; bad values rejected with an error and no change
E="$A ethtool"
check "ethtool -x: default key is the RTL reset key" sh -c "$E -x onicsim0 | grep -q '17:14:e3:d6:7e:c8'"
check "ethtool -L combined 4" $E -L onicsim0 combined 4
# (the "Current hardware settings" part of -l / -g)
cur() { sed -n '/^Current/,$p'; }
check "ethtool -l shows 4 combined" sh -c "$E -l onicsim0 | sed -n '/^Current/,\$p' | grep -Eq '^Combined:[[:space:]]+4$'"
check "ethtool -X equal 2" $E -X onicsim0 equal 2
check "ethtool -x: table uses queues 0 and 1 only" sh -c "$E -x onicsim0 | grep -E '^ +[0-9]+:' | grep -Eq ' 1 ' && ! $E -x onicsim0 | grep -E '^ +[0-9]+:' | grep -Eq ' [2-9] '"
KEY=01:02:03:04:05:06:07:08:09:0a:0b:0c:0d:0e:0f:10:11:12:13:14:15:16:17:18:19:1a:1b:1c:1d:1e:1f:20:21:22:23:24:25:26:27:28
check "ethtool -X hkey" $E -X onicsim0 hkey $KEY
check "ethtool -x shows the new key" sh -c "$E -x onicsim0 | grep -q '$KEY'"
check "ethtool -G rx 127 tx 255" $E -G onicsim0 rx 127 tx 255
$E -g onicsim0 | cur >/tmp/g
check "ethtool -g shows rx 127 tx 255" sh -c "grep -Eq '^RX:[[:space:]]+127$' /tmp/g && grep -Eq '^TX:[[:space:]]+255$' /tmp/g"
check "ping still works after reconfiguration" $A ping -c 2 -W 2 192.0.2.2
$E -l onicsim0 >/tmp/l.before
$E -g onicsim0 >/tmp/g.before
$E -x onicsim0 >/tmp/x.before
refuse "ethtool -L combined 99 is rejected" $E -L onicsim0 combined 99
refuse "ethtool -G rx 100 (not a ring size) is rejected" $E -G onicsim0 rx 100
refuse "ethtool -G tx 20000 (too large) is rejected" $E -G onicsim0 tx 20000
refuse "ethtool -X equal 9 (more queues than in use) is rejected" $E -X onicsim0 equal 9
refuse "ethtool -X hkey of 4 bytes is rejected" $E -X onicsim0 hkey 01:02:03:04
$E -l onicsim0 >/tmp/l.after
$E -g onicsim0 >/tmp/g.after
$E -x onicsim0 >/tmp/x.after
same "rejected -L left the channels unchanged" /tmp/l.before /tmp/l.after
same "rejected -G left the rings unchanged" /tmp/g.before /tmp/g.after
same "rejected -X left table and key unchanged" /tmp/x.before /tmp/x.after
check "ethtool -n rx-flow-hash tcp4 reports IP and port fields" sh -c "$E -n onicsim0 rx-flow-hash tcp4 | grep -q 'L4 bytes 0 & 1'"
check "ethtool -L combined 2 back" $E -L onicsim0 combined 2

# ---- native XDP (ndo_bpf): drop, swap without a reset, XDP_TX, detach
check "attach xdp_drop.o natively (xdpdrv)" $IP -n a link set dev onicsim0 xdpdrv obj /xdp/xdp_drop.o sec xdp
refuse "ping fails while XDP drops the replies" $A ping -c 3 -W 1 192.0.2.2
D=$(stat rx_xdp_drop onicsim0 $A)
check "rx_xdp_drop counts the dropped replies ($D)" test "${D:-0}" -ge 3
check "swap in xdp_pass.o while attached (no detach, no reset)" $IP -n a -force link set dev onicsim0 xdpdrv obj /xdp/xdp_pass.o sec xdp
check "ping works through xdp_pass" $A ping -c 2 -W 2 192.0.2.2
P=$(stat rx_xdp_pass onicsim0 $A)
check "rx_xdp_pass counts the passed frames ($P)" test "${P:-0}" -ge 2
check "swap in xdp_tx.o (the ICMP echo responder)" $IP -n a -force link set dev onicsim0 xdpdrv obj /xdp/xdp_tx.o sec xdp
T0=$(stat rx_xdp_tx onicsim0 $A)
check "ping b -> a is answered by XDP_TX" $B ping -c 4 -W 2 192.0.2.1
T1=$(stat rx_xdp_tx onicsim0 $A)
check "rx_xdp_tx counts the reflected requests ($T0 -> $T1)" test $((T1 - T0)) -ge 4
E=$(stat rx_xdp_tx_errors onicsim0 $A)
check "no XDP_TX errors ($E)" test "${E:-1}" = 0
check "detach XDP" $IP -n a link set dev onicsim0 xdpdrv off
check "ping works again after detach" $A ping -c 2 -W 2 192.0.2.2

# ---- the RX hash through the XDP RX-metadata kfunc (6.3+, xdp_metadata_ops.xmo_rx_hash): a
# device-bound program (loaded by onic_xdp_hash with libbpf; iproute2 cannot) reads the hash of
# UDP frames (traceroute's probes from b): the shell's hash, type XDP_RSS_TYPE_L4_IPV4_UDP (0x29)
case $(uname -r) in
6.1.* | 6.2.*)
	echo "SKIP: RX-metadata hash (Linux $(uname -r) has no XDP RX-metadata kfuncs)"
	;;
*)
	$A onic_xdp_hash onicsim0 /xdp/xdp_hash.o 4 >/tmp/hash 2>&1 &
	HP=$!
	sleep 1
	$B traceroute -n -m 1 -q 3 -w 1 192.0.2.1 >/dev/null 2>&1
	wait $HP
	sed 's/^/    | /' /tmp/hash
	check "a device-bound program reads the RX hash and its type through the kfunc" grep -Eq '^calls=[1-9][0-9]* errors=0 hash=0x[0-9a-f]{8} type=0x29$' /tmp/hash
	check "the hash program detached itself" sh -c "! $IP -n a link show onicsim0 | grep -q 'xdp '"
	;;
esac
check "generic XDP still works too (xdpgeneric drop)" $IP -n a link set dev onicsim0 xdpgeneric obj /xdp/xdp_drop.o sec xdp
refuse "ping fails under generic XDP drop" $A ping -c 2 -W 1 192.0.2.2
check "detach generic XDP" $IP -n a link set dev onicsim0 xdpgeneric off

# ---- rmmod while traffic flows, then load/unload cycles
(while :; do $A ping -c 1 -W 1 192.0.2.2 >/dev/null 2>&1; done) &
LOOP_A=$!
(while :; do $B ping -c 1 -W 1 192.0.2.1 >/dev/null 2>&1; done) &
LOOP_B=$!
sleep 2
check "rmmod while pings flow" rmmod onic
kill $LOOP_A $LOOP_B 2>/dev/null
wait 2>/dev/null
$IP netns del a
$IP netns del b
refuse "netdevs are gone after rmmod" $IP link show onicsim0

ok=0
i=0
while [ $i -lt 20 ]; do
	if insmod $KO sim=1 && $IP link set onicsim0 up && $IP link set onicsim1 up && rmmod onic; then
		ok=$((ok + 1))
	fi
	i=$((i + 1))
done
if [ $ok = 20 ]; then pass "20 load/up/unload cycles"; else fail "20 load/up/unload cycles ($ok succeeded)"; fi

finish
