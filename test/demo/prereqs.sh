#!/usr/bin/env bash
# What make demo needs besides Go, make and gcc, checked before anything is
# built: a missing tool or root would otherwise show only after minutes of
# compiling the lab's servers. The demo checks the lab's network again when
# it starts (test/lab/README.md, "The network").
set -euo pipefail

missing=()
for need in dig:bind9-dnsutils ip:iproute2 nft:nftables conntrack:conntrack; do
	command -v "${need%%:*}" >/dev/null || missing+=("${need%%:*} (Debian's ${need#*:})")
done
if ((${#missing[@]})); then
	echo "make demo needs: ${missing[*]}; .ci/run installs them" >&2
	exit 1
fi
if [[ $(id -u) != 0 ]]; then
	echo "make demo needs root: the lab gives each cluster's node a network namespace with kube-proxy, through which the demo's requests go" >&2
	exit 1
fi
