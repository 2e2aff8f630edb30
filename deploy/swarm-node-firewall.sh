#!/bin/sh
# The firewall of one swarm node for workspaces (docs/swarm.md, "Isolation"). Run as root on every
# node, after Docker Engine has started, and again after each reboot (iptables rules do not persist;
# e.g. from a systemd unit ordered after docker.service):
#
#   sh swarm-node-firewall.sh CONTROL_PLANE_ADDRESS [CIDR...]
#
# CONTROL_PLANE_ADDRESS: the address the nodes see the control plane's connections come from.
# CIDR...: ranges no workspace may reach: the nodes' own network (their engines, Swarm's ports,
# each other's published ports), the control plane's host and its database, and any other private
# range of the school. The internet stays reachable (as on one engine).
#
# Workspaces' containers are on the workspace network's bridge, whose interface on every node starts
# with `cpws` (the control plane names it). With these rules:
# - a new connection into a workspace container (a published editor or simulator port, from
#   anywhere, its own node included) is accepted only from CONTROL_PLANE_ADDRESS;
# - a workspace container reaches neither CONTROL_PLANE_ADDRESS, nor a link-local address (169.254.0.0/16:
#   a cloud's metadata service), nor the CIDRs;
# - a workspace container reaches nothing on its own node (its engine, Swarm's ports);
# - containers on one bridge do not reach each other (the network's own inter-container switch).
# Idempotent: the rules live in two chains of their own (CLASSROOM-FORWARD, hooked into Docker's
# DOCKER-USER, and CLASSROOM-INPUT, hooked into INPUT), emptied and written again on each run.
set -eu

if [ "$#" -lt 1 ]; then
  echo "usage: $0 CONTROL_PLANE_ADDRESS [CIDR...]" >&2
  exit 2
fi
control_plane="$1"
shift
command -v iptables >/dev/null 2>&1 || {
  echo "swarm-node-firewall: iptables is missing (Debian package iptables)" >&2
  exit 1
}
BRIDGES='cpws+'

chain() { iptables -N "$1" 2>/dev/null || iptables -F "$1"; }
hook() { iptables -C "$1" -j "$2" 2>/dev/null || iptables -I "$1" 1 -j "$2"; }

chain CLASSROOM-FORWARD
chain CLASSROOM-INPUT
# Docker makes DOCKER-USER and jumps to it first from FORWARD; made here too when Docker has not yet.
iptables -N DOCKER-USER 2>/dev/null || true
hook DOCKER-USER CLASSROOM-FORWARD
hook INPUT CLASSROOM-INPUT

# Answers of connections already allowed.
iptables -A CLASSROOM-FORWARD -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
# Out of a workspace: not to the control plane, nor to link-local addresses (a cloud's metadata
# service, 169.254.169.254, hands out the node's credentials), nor to the ranges given.
iptables -A CLASSROOM-FORWARD -i "$BRIDGES" -d "$control_plane" -j REJECT
iptables -A CLASSROOM-FORWARD -i "$BRIDGES" -d 169.254.0.0/16 -j REJECT
for cidr in "$@"; do
  iptables -A CLASSROOM-FORWARD -i "$BRIDGES" -d "$cidr" -j REJECT
done
# Into a workspace: new connections from the control plane only (its published ports reach it here,
# after Docker's address translation; a workspace on this node reaching a published port as well).
iptables -A CLASSROOM-FORWARD -o "$BRIDGES" ! -s "$control_plane" -j REJECT
# Nothing of the node itself.
iptables -A CLASSROOM-INPUT -i "$BRIDGES" -j REJECT

echo "swarm-node-firewall: workspaces on $(hostname) are reached only from $control_plane; they reach neither it nor 169.254.0.0/16${*:+ nor $*}"
