#!/usr/bin/env bash
# A virtual cluster on one machine: k network namespaces act as hosts, each joined by a veth
# "cable" to one bridge, with a rate limit (tbf) on each direction of each cable. The bridge sits
# in a namespace of its own, so nothing the script makes touches the root namespace's interfaces
# and no traffic between the hosts can leave them.
#
#   scripts/vcluster.sh create NAME K [RATE]   hosts NAME-h0 … NAME-h(K-1), switch NAME-sw;
#                                              RATE as tc writes it (1gbit, 10gbit, 100mbit;
#                                              default 1gbit; "none" = no limit)
#   scripts/vcluster.sh destroy NAME           removes everything NAME made (idempotent)
#   scripts/vcluster.sh exec NAME I CMD…       runs CMD on host I
#   scripts/vcluster.sh link NAME I up|down    plugs / unplugs host I's cable (switch side)
#   scripts/vcluster.sh addr I                 host I's address (198.18.0.(I+1), in 198.18.0.0/15,
#                                              the range set aside for benchmarks, RFC 2544)
#   scripts/vcluster.sh bytes NAME I           "rx tx" bytes of host I's interface so far
#   scripts/vcluster.sh bytes NAME             "I rx tx" for every host, one line each, all read
#                                              at one moment (from the switch's ports)
#   scripts/vcluster.sh run K RATE -- CMD…     create a fresh cluster, run CMD in the root
#                                              namespace with VCLUSTER_NAME / VCLUSTER_HOSTS set,
#                                              destroy it whatever happens; exits with CMD's status
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN, for `ip netns`); without them it prints why and
# exits 77 (the "skipped" code: tests/python/test_hosts.py and bench/cluster/run.py skip on it). Every loop is bounded by K ≤ 64.
set -euo pipefail

readonly kSkip=77
readonly kMaxHosts=64
readonly kPrefix="198.18.0"

die() { echo "vcluster: $*" >&2; exit 1; }

# Root alone is not enough inside a container without CAP_NET_ADMIN; creating and deleting a
# scratch namespace proves both capabilities.
require_privileges() {
  if ((EUID != 0)); then
    echo "vcluster: skipped: needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces" >&2
    exit "$kSkip"
  fi
  command -v ip >/dev/null && command -v tc >/dev/null || { echo "vcluster: skipped: needs iproute2 (ip, tc)" >&2; exit "$kSkip"; }
  local probe="vcprobe$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "vcluster: skipped: cannot create a network namespace (no CAP_NET_ADMIN / CAP_SYS_ADMIN?)" >&2
    exit "$kSkip"
  fi
  if ! ip -n "$probe" link add vcprobe0 type veth peer name vcprobe1 2>/dev/null; then
    ip netns del "$probe" 2>/dev/null || true
    echo "vcluster: skipped: cannot create veth pairs (no CAP_NET_ADMIN?)" >&2
    exit "$kSkip"
  fi
  ip netns del "$probe"
}

check_name() {
  [[ "$1" =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "NAME must be 1-8 lower-case letters or digits, starting with a letter: '$1'"
}

check_count() {
  # 10#: "010" is ten, not octal eight.
  [[ "$1" =~ ^[0-9]{1,3}$ ]] && ((10#$1 >= 1 && 10#$1 <= kMaxHosts)) || die "K must be 1..$kMaxHosts: '$1'"
}

addr() { echo "$kPrefix.$(($1 + 1))"; }

# tbf's bucket is what a link sends at full speed after an idle moment: 1 ms of traffic at the
# rate (tbf's watchdog is a high-resolution timer), and at least 64 KiB, the largest segment the
# kernel hands a veth (a bucket smaller than one segment would split it). A larger bucket lets
# short messages between pauses through faster than the rate (1 MiB at 1 Gbit/s: 8 ms free after
# every pause), which favours a protocol of short messages over a long stream. The queue limit
# is what the link may buffer before it drops, like a switch port's buffer.
burst_bytes() {
  local rate=$1 number unit bits
  number=${rate%%[kmg]bit}
  number=${number%bit}
  unit=${rate#"$number"}
  case "$unit" in
    bit) bits=1 ;;
    kbit) bits=1000 ;;
    mbit) bits=1000000 ;;
    gbit) bits=1000000000 ;;
  esac
  # rate × 1 ms in bytes; awk reads "2.5" and "08" as the decimals they are (bash would not).
  awk -v n="$number" -v b="$bits" 'BEGIN { x = int(n * b / 8 / 1000); print (x > 65536 ? x : 65536) }'
}

shape() {
  local ns=$1 dev=$2 rate=$3
  [[ "$rate" == none ]] && return 0
  # VCLUSTER_BURST (bytes) overrides the bucket, to measure what it changes.
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "${VCLUSTER_BURST:-$(burst_bytes "$rate")}" limit 8mb
}

create() {
  local name=$1 count=$2 rate=${3:-1gbit}
  check_name "$name"
  check_count "$count"
  count=$((10#$count))
  [[ "$rate" == none || "$rate" =~ ^[0-9]+(\.[0-9]+)?[kmg]?bit$ ]] || die "RATE like 1gbit, 10gbit, 100mbit or none: '$rate'"
  local sw="$name-sw"
  # Claiming the switch's name is the check that the cluster does not exist: atomic, so two
  # creates of one name cannot both go on (and neither removes the other's cluster).
  [[ -e "/run/netns/$sw" ]] && die "a cluster '$name' exists already (destroy it first)"
  ip netns add "$sw" || die "cannot create namespace '$sw' (made by a create of '$name' running beside this one?)"
  # From here on a half-made cluster is removed before the error is reported.
  trap 'status=$?; if ((status != 0)); then destroy "$name"; fi' EXIT
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  local i
  for ((i = 0; i < count; i++)); do
    local host="$name-h$i"
    ip netns add "$host"
    ip -n "$host" link set lo up
    # Both ends are made inside the switch namespace, then one moves: no interface ever appears
    # in the root namespace.
    ip -n "$sw" link add "p$i" type veth peer name eth0
    ip -n "$sw" link set eth0 netns "$host"
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    ip -n "$host" addr add "$(addr "$i")/15" dev eth0
    ip -n "$host" link set eth0 up
    # Upload: the host's egress; download: the switch port's egress towards the host.
    shape "$host" eth0 "$rate"
    shape "$sw" "p$i" "$rate"
  done
}

destroy() {
  local name=$1
  check_name "$name"
  # Deleting a namespace deletes the interfaces inside it (one end of a veth takes the other).
  # Processes still running in a host would keep its namespace alive as an orphan, so they go
  # first; ip netns pids lists exactly those.
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$name-(sw|h[0-9]+)$" | head -n $((kMaxHosts + 1))); do
    local pid
    for pid in $(ip netns pids "$ns" 2>/dev/null | head -n 1000); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
}

host_ns() {
  check_name "$1"
  [[ "$2" =~ ^[0-9]+$ ]] || die "host index must be a number: '$2'"
  echo "$1-h$2"
}

cmd=${1:-}
shift || true
case "$cmd" in
  create)
    (($# >= 2)) || die "usage: create NAME K [RATE]"
    require_privileges
    check_name "$1"
    # bash runs the EXIT trap on exit, not when a signal kills it: these make a signal an exit.
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    trap 'exit 130' INT
    create "$@"
    trap - EXIT
    ;;
  destroy)
    (($# == 1)) || die "usage: destroy NAME"
    ((EUID == 0)) || { echo "vcluster: skipped: needs root" >&2; exit "$kSkip"; }
    destroy "$1"
    ;;
  exec)
    (($# >= 3)) || die "usage: exec NAME I CMD..."
    ns=$(host_ns "$1" "$2")
    shift 2
    exec ip netns exec "$ns" "$@"
    ;;
  link)
    (($# == 3)) || die "usage: link NAME I up|down"
    [[ "$3" == up || "$3" == down ]] || die "link state must be up or down: '$3'"
    check_name "$1"
    [[ "$2" =~ ^[0-9]+$ ]] || die "host index must be a number: '$2'"
    ip -n "$1-sw" link set "p$2" "$3"
    ;;
  addr)
    (($# == 1)) && [[ "$1" =~ ^[0-9]+$ ]] || die "usage: addr I"
    addr "$1"
    ;;
  bytes)
    (($# == 1 || $# == 2)) || die "usage: bytes NAME [I]"
    if (($# == 2)); then
      ns=$(host_ns "$1" "$2")
      echo "$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes) $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes)"
    else
      check_name "$1"
      # Switch port p<I> is host I's cable: what the port received the host sent, and the reverse.
      # One process reads every counter, so they describe one moment.
      ip netns exec "$1-sw" sh -c 'for port in /sys/class/net/p[0-9]*; do
        i=${port##*/p}; echo "$i $(cat "$port/statistics/tx_bytes") $(cat "$port/statistics/rx_bytes")"
      done' | sort -n
    fi
    ;;
  run)
    (($# >= 4)) && [[ "$3" == -- ]] || die "usage: run K RATE -- CMD..."
    count=$1
    rate=$2
    shift 3
    check_count "$count"
    count=$((10#$count))
    require_privileges
    # A name unique to this run, so that parallel tests do not meet.
    name="v$(printf '%07d' $(($$ % 10000000)))"  # pid_max is at most 2^22: unique
    if [[ -e "/run/netns/$name-sw" ]]; then destroy "$name"; fi  # left by a killed run whose pid we reuse
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    trap 'exit 130' INT
    create "$name" "$count" "$rate"
    trap 'destroy "$name"' EXIT
    # CMD runs in the background so that a signal is handled at once (bash waits for a foreground
    # command before it runs a trap); the signal is passed on to CMD, which gets up to 5 s to end
    # before the cluster goes. A background job starts with SIGINT and SIGQUIT ignored and stdin
    # from /dev/null: the subshell restores both, so CMD sees Ctrl-C and this script's stdin.
    child=
    forward() {
      if [[ -n "$child" ]]; then
        kill "-$1" "$child" 2>/dev/null || true
        local waited
        for ((waited = 0; waited < 50; waited++)); do
          kill -0 "$child" 2>/dev/null || break
          sleep 0.1
        done
        kill -KILL "$child" 2>/dev/null || true
      fi
      exit "$2"
    }
    trap 'forward TERM 143' TERM
    trap 'forward INT 130' INT
    trap 'forward HUP 129' HUP
    script=$(readlink -f "$0")
    (
      trap - INT QUIT
      export VCLUSTER_NAME=$name VCLUSTER_HOSTS=$count VCLUSTER_RATE=$rate VCLUSTER_SCRIPT=$script
      exec "$@"
    ) <&0 &
    child=$!
    status=0
    wait "$child" || status=$?
    exit "$status"
    ;;
  *)
    sed -n '2,22p' "$0" >&2
    exit 2
    ;;
esac
