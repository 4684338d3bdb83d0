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
#   scripts/vcluster.sh run K RATE -- CMD…     create a fresh cluster, run CMD in the root
#                                              namespace with VCLUSTER_NAME / VCLUSTER_HOSTS set,
#                                              destroy it whatever happens; exits with CMD's status
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN, for `ip netns`); without them it prints why and
# exits 77 (the "skipped" code ctest is told about). Every loop is bounded by K ≤ 64.
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
  [[ "$1" =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= kMaxHosts)) || die "K must be 1..$kMaxHosts: '$1'"
}

addr() { echo "$kPrefix.$(($1 + 1))"; }

# tbf needs a bucket that holds at least one timer tick of traffic at the rate (the kernel's
# timer is 1-4 ms): 1 Mbyte covers 10 Gbit/s at 1 ms with room. The queue limit is what the
# link may buffer before it drops, like a switch port's buffer.
shape() {
  local ns=$1 dev=$2 rate=$3
  [[ "$rate" == none ]] && return 0
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst 1mb limit 8mb
}

create() {
  local name=$1 count=$2 rate=${3:-1gbit}
  check_name "$name"
  check_count "$count"
  [[ "$rate" == none || "$rate" =~ ^[0-9]+(\.[0-9]+)?[kmg]?bit$ ]] || die "RATE like 1gbit, 10gbit, 100mbit or none: '$rate'"
  local sw="$name-sw"
  ip netns add "$sw"
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
    if ip netns list | grep -q "^$1-sw\b"; then die "a cluster '$1' exists already (destroy it first)"; fi
    # A half-made cluster is removed before the error is reported.
    cluster=$1  # the trap runs in whatever function exits, so not "$1" there
    trap 'status=$?; if ((status != 0)); then destroy "$cluster"; fi' EXIT
    create "$@"
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
    (($# == 2)) || die "usage: bytes NAME I"
    ns=$(host_ns "$1" "$2")
    echo "$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes) $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes)"
    ;;
  run)
    (($# >= 4)) && [[ "$3" == -- ]] || die "usage: run K RATE -- CMD..."
    count=$1
    rate=$2
    shift 3
    check_count "$count"
    require_privileges
    # A name unique to this run, so that parallel tests do not meet.
    name="vc$(printf '%05d' $(($$ % 100000)))"
    trap 'destroy "$name"' EXIT
    trap 'exit 130' INT TERM
    if ip netns list | grep -q "^$name-sw\b"; then destroy "$name"; fi  # left by a killed run whose pid we reuse
    create "$name" "$count" "$rate"
    status=0
    VCLUSTER_NAME=$name VCLUSTER_HOSTS=$count VCLUSTER_RATE=$rate VCLUSTER_SCRIPT=$(readlink -f "$0") "$@" || status=$?
    exit "$status"
    ;;
  *)
    sed -n '2,22p' "$0" >&2
    exit 2
    ;;
esac
