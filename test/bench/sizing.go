package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// memberKustomization is what every member applies: its CoreDNS Deployment
// carries the resources the report holds to the measured figures.
const memberKustomization = "deploy/member"

// The sizing rule of deploy/README.md ("Resources"), from the member
// Corefile's process at the measured scale: the request at least what it
// holds once synced, so that the scheduler counts it; the limit at least
// twice its peak, for the Go heap's growth under queries and an informer's
// relist, which decodes a list while the old objects are still held;
// GOMEMLIMIT at 85–90% of the limit, so that the Go runtime collects
// harder as it nears the limit instead of being killed, with the rest left
// for what is not Go heap (the binary's pages, stacks).
const (
	limitPerPeak       = 2.0
	minGoMemLimitShare = 0.85
	maxGoMemLimitShare = 0.90
)

// shippedResources is the CoreDNS container of deploy/member as kustomize
// renders it: memory request, limit and GOMEMLIMIT, in bytes (0: unset).
type shippedResources struct {
	request, limit, goMemLimit int64
}

// sizingCheck is one part of the rule against the measured figures.
type sizingCheck struct {
	what       string
	have, want int64
	atLeast    bool // have must be at least want; else at most
}

func (c sizingCheck) met() bool {
	if c.atLeast {
		return c.have >= c.want
	}
	return c.have > 0 && c.have <= c.want
}

// checks holds s to the rule for a process that held rss once synced and
// peak at most.
func (s shippedResources) checks(m memoryReading) []sizingCheck {
	limit := float64(s.limit)
	return []sizingCheck{
		{"memory request ≥ RSS", s.request, m.rss, true},
		{fmt.Sprintf("memory limit ≥ %.0f × peak RSS", limitPerPeak), s.limit, int64(limitPerPeak * float64(m.peak())), true},
		{fmt.Sprintf("GOMEMLIMIT ≥ %.0f%% of the limit", 100*minGoMemLimitShare), s.goMemLimit, int64(minGoMemLimitShare * limit), true},
		{fmt.Sprintf("GOMEMLIMIT ≤ %.0f%% of the limit", 100*maxGoMemLimitShare), s.goMemLimit, int64(maxGoMemLimitShare * limit), false},
	}
}

// readShipped renders deploy/member under root and reads its CoreDNS
// container's memory settings.
func readShipped(root string) (shippedResources, error) {
	var s shippedResources
	dir := filepath.Join(root, memberKustomization)
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return s, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	text, err := rm.AsYaml()
	if err != nil {
		return s, err
	}
	c, err := corednsContainer(text)
	if err != nil {
		return s, fmt.Errorf("%s: %w", dir, err)
	}
	return containerMemory(c)
}

// corednsContainer finds the container named coredns of the Deployment
// coredns among the rendered objects.
func corednsContainer(text []byte) (map[string]any, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(text), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no Deployment coredns with a container coredns")
		}
		if err != nil {
			return nil, err
		}
		if u.GetKind() != "Deployment" || u.GetName() != "coredns" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if m, ok := c.(map[string]any); ok && m["name"] == "coredns" {
				return m, nil
			}
		}
	}
}

func containerMemory(c map[string]any) (shippedResources, error) {
	var s shippedResources
	for _, q := range []struct {
		into *int64
		path []string
	}{{&s.request, []string{"resources", "requests", "memory"}}, {&s.limit, []string{"resources", "limits", "memory"}}} {
		v, _, _ := unstructured.NestedString(c, q.path...)
		if v == "" {
			continue
		}
		qty, err := resource.ParseQuantity(v)
		if err != nil {
			return s, fmt.Errorf("%s: %w", strings.Join(q.path, "."), err)
		}
		*q.into = qty.Value()
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range env {
		if m, ok := e.(map[string]any); ok && m["name"] == "GOMEMLIMIT" {
			v, _ := m["value"].(string)
			n, err := parseGoMemLimit(v)
			if err != nil {
				return s, fmt.Errorf("GOMEMLIMIT %q: %w", v, err)
			}
			s.goMemLimit = n
		}
	}
	return s, nil
}

// parseGoMemLimit reads a GOMEMLIMIT value as the Go runtime does: a
// number of bytes with an optional unit B, KiB, MiB, GiB or TiB.
func parseGoMemLimit(v string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			return n << u.shift, err
		}
	}
	return strconv.ParseInt(v, 10, 64)
}
