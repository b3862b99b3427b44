# Sourced by the several-host tests: two network namespaces ("hosts" A and B, unique
# names per run) joined by a veth pair that exists only inside them, A at $net.1 on $va
# and B at $net.2 on $vb. Needs skip() and fail() defined by the caller; skips (exit 77)
# where namespaces or veth cannot be made (not root, no CAP_NET_ADMIN, no `ip`).
#   two_hosts NAME_PREFIX SUBNET_BASE     e.g. two_hosts dpt 10.231
# Sets a b va vb net; delete_two_hosts removes them.
two_hosts() {
  command -v ip >/dev/null || skip "no ip(8)"
  a=$1-$$-a b=$1-$$-b va=$1$$a vb=$1$$b net=$2.$(($$ % 250))
  local err; err=$(ip netns add "$a" 2>&1) || skip "cannot create a network namespace: $err"
  ip netns add "$b" || fail "created $a but not $b"
  ip link add "$va" netns "$a" type veth peer name "$vb" netns "$b" || skip "cannot create a veth pair (no veth support?)"
  { ip -n "$a" addr add "$net.1/24" dev "$va" && ip -n "$b" addr add "$net.2/24" dev "$vb"; } || fail "addresses"
  for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
  { ip -n "$a" link set "$va" up && ip -n "$b" link set "$vb" up; } || fail "link up"
  echo "hosts $a ($net.1 on $va) and $b ($net.2 on $vb)"
}
delete_two_hosts() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
