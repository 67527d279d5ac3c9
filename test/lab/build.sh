#!/usr/bin/env bash
# Builds the lab's binaries into _output/bin: the control-plane components
# from the Go module proxy at the versions pinned in test/lab/go.mod, and
# labctl from this module. `build.sh promtool` builds instead the promtool
# the alerts' unit tests run (deploy/alerts_test.go), at the version pinned
# in test/promtool/go.mod: a module of its own, as Prometheus's dependencies
# would move the Kubernetes build's.
#
# Building kube-apiserver and friends takes minutes, so they are cached: a
# stamp file holds the hash of go.mod, go.sum and the Go version they were
# built with, and nothing is relinked while it matches and every binary
# exists. promtool is cached the same way. labctl is small and always handed
# to `go build`, whose own up-to-date check skips the link when its sources
# did not change.
set -euo pipefail
# Go 1.27.3, as every build of the project (README.md, Two commands); it is
# also in the stamp's key below, so that a new Go builds everything again.
export GOTOOLCHAIN=go1.27.3

lab_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root_dir=$(cd "${lab_dir}/../.." && pwd)
bin_dir=${root_dir}/_output/bin

# name=package; the binary name is what labctl executes, kubectl is
# what make demo shows and the README's commands use, and kubeadm runs its
# CoreDNS add-on phase against a member (deploy/kubeadm_lab_test.go).
lab_tools=(
	etcd=go.etcd.io/etcd/server/v3
	kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver
	kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
	kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
	kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
	kubeadm=k8s.io/kubernetes/cmd/kubeadm
	kubectl=k8s.io/kubernetes/cmd/kubectl
	kwok=sigs.k8s.io/kwok/cmd/kwok
)
# promtool test rules runs the alerts' tests (deploy/alerts_test.go).
promtool_tools=(promtool=github.com/prometheus/prometheus/cmd/promtool)

build_flags=(-trimpath -buildvcs=false "-ldflags=-s -w")

mkdir -p "${bin_dir}"

# cached stamp key name=package...: whether the stamp holds key and every
# binary exists.
cached() {
	local stamp=$1 key=$2 tool
	shift 2
	[[ -f ${stamp} && $(<"${stamp}") == "${key}" ]] || return 1
	for tool in "$@"; do
		[[ -x ${bin_dir}/${tool%%=*} ]] || return 1
	done
}

# build_cached module_dir stamp name=package...: builds each package of the
# module in module_dir, unless cached.
build_cached() {
	local dir=$1 stamp=${bin_dir}/$2 key tool name start
	shift 2
	key=$({ cat "${dir}/go.mod" "${dir}/go.sum"; go version; printf '%s\n' "$@"; } | sha256sum | cut -d' ' -f1)
	if cached "${stamp}" "${key}" "$@"; then
		echo "${*%%=*} up to date in ${bin_dir}"
		return
	fi
	rm -f "${stamp}"
	# One binary at a time: each link of a Kubernetes binary takes
	# gigabytes and both cores.
	for tool in "$@"; do
		name=${tool%%=*}
		echo "building ${name} (${tool#*=})"
		start=${SECONDS}
		go build -C "${dir}" "${build_flags[@]}" -o "${bin_dir}/${name}" "${tool#*=}"
		echo "built ${name} in $((SECONDS - start))s"
	done
	echo "${key}" >"${stamp}"
}

case ${1:-lab} in
lab)
	build_cached "${lab_dir}" .lab-bins.stamp "${lab_tools[@]}"
	go build -C "${lab_dir}" "${build_flags[@]}" -o "${bin_dir}/labctl" ./cmd/labctl
	;;
promtool)
	build_cached "${root_dir}/test/promtool" .promtool.stamp "${promtool_tools[@]}"
	;;
*)
	echo "usage: $0 [lab|promtool]" >&2
	exit 2
	;;
esac
