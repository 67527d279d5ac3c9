#!/usr/bin/env bash
# Builds the lab's binaries into _output/bin: the control-plane components
# from the Go module proxy at the versions pinned in test/lab/go.mod, and
# labctl from this module.
#
# Building kube-apiserver and friends takes minutes, so they are cached: a
# stamp file holds the hash of go.mod, go.sum and the Go version they were
# built with, and nothing is relinked while it matches and every binary
# exists. labctl is small and always handed to `go build`, whose own
# up-to-date check skips the link when its sources did not change.
set -euo pipefail

lab_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root_dir=$(cd "${lab_dir}/../.." && pwd)
bin_dir=${root_dir}/_output/bin
stamp=${bin_dir}/.lab-bins.stamp

# name=package; the binary name is what labctl executes, and kubectl is
# what make demo shows and the README's commands use.
tools=(
	etcd=go.etcd.io/etcd/server/v3
	kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver
	kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
	kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
	kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
	kubectl=k8s.io/kubernetes/cmd/kubectl
	kwok=sigs.k8s.io/kwok/cmd/kwok
)

build_flags=(-trimpath -buildvcs=false "-ldflags=-s -w")

cd "${lab_dir}"
mkdir -p "${bin_dir}"

key=$({ cat go.mod go.sum; go version; printf '%s\n' "${tools[@]}"; } | sha256sum | cut -d' ' -f1)

cached() {
	[[ -f ${stamp} && $(<"${stamp}") == "${key}" ]] || return 1
	local tool
	for tool in "${tools[@]}"; do
		[[ -x ${bin_dir}/${tool%%=*} ]] || return 1
	done
}

if cached; then
	echo "lab binaries up to date in ${bin_dir}"
else
	rm -f "${stamp}"
	# One binary at a time: each link of a Kubernetes binary takes
	# gigabytes and both cores.
	for tool in "${tools[@]}"; do
		name=${tool%%=*}
		echo "building ${name} (${tool#*=})"
		start=${SECONDS}
		go build "${build_flags[@]}" -o "${bin_dir}/${name}" "${tool#*=}"
		echo "built ${name} in $((SECONDS - start))s"
	done
	echo "${key}" >"${stamp}"
fi

go build "${build_flags[@]}" -o "${bin_dir}/labctl" ./cmd/labctl
